"""Loose ends found by fault probes: each bad input stops in one line that names the file
or flag, and no finished result is replaced by a partial one."""

import shutil

import pytest

import problem1.train as p1_train
import problem3.sample as p3_sample
import problem3.train as p3_train
from course.grading import bands
from problem3.config import Config as Config3
from problem3.config import checkpoint_extras
from provided.common import REPO_ROOT
from provided.results import save_checkpoint
from provided.smiles import SmilesVocab
from tests.tiny import addition_data, smiles_data

pytestmark = pytest.mark.kit


def test_a_seed_numpy_cannot_take_is_a_bad_flag(stops, tmp_path):
    stops(p1_train.main, ["--digit_order", "forward", "--train_size", "1000",
                          "--seed", "99999999999999999999", "--results_dir", tmp_path],
          "--seed", "at most 4294967295")


def test_a_header_only_csv_names_the_file(stops, tmp_path):
    data = addition_data(tmp_path)
    (data / "addition" / "train.csv").write_text("a,b\n")
    stops(p1_train.main, ["--digit_order", "forward", "--train_size", "1000", "--steps", "1",
                          "--data_dir", data, "--results_dir", tmp_path / "r"],
          "train.csv holds no pairs")


def test_a_token_outside_the_homework_stops_training(stops, tmp_path):
    data = smiles_data(tmp_path)
    train = data / "smiles" / "train.txt"
    lines = train.read_text().splitlines()
    lines.insert(4, "CC[Na]C")
    train.write_text("\n".join(lines) + "\n")
    stops(p3_train.main, ["--norm", "pre", "--lr", "1e-3", "--warmup", "0", "--steps", "1",
                          "--data_dir", data, "--results_dir", tmp_path / "r"],
          "train.txt, line 5", "'[Na]'")
    assert not (tmp_path / "r" / "vocab.json").exists()


def test_sample_names_a_bad_run(stops, tmp_path):
    stops(p3_sample.main, ["--run", "foo", "--results_dir", tmp_path], "--run", "'foo'",
          "not a run name")


def test_sample_never_replaces_the_committed_samples_with_other_ones(stops):
    committed = REPO_ROOT / "problem3" / "results" / "samples_pre_lr0.001_w500_s4000.txt"
    before = committed.read_bytes()
    stops(p3_sample.main, ["--run", "pre_lr0.001_w500_s4000", "--seed", "1",
                           "--num_samples", "10"], "--results_dir")
    assert committed.read_bytes() == before


def test_sample_checks_that_the_checkpoint_is_the_run(stops, tmp_path):
    config = Config3(norm="pre", lr=1e-3, warmup=0, steps=2, vocab_size=25, d_model=16,
                     num_layers=1, num_heads=2, d_ff=32, max_len=12)
    vocab = SmilesVocab(["C", "O"])
    path = tmp_path / "model_post_lr0.01_w0_s1500.pth"  # renamed from its own run's name
    save_checkpoint(path, config, config.build_model(), **checkpoint_extras(vocab, 2))
    stops(p3_sample.main, ["--run", "post_lr0.01_w0_s1500", "--results_dir", tmp_path],
          "holds the run pre_lr0.001_w0_s2")


def test_bands_never_drop_a_seed_they_hold(tmp_path):
    old = {"learned": {"beyond": {"seeds": [0, 1, 2, 3, 4]}}}
    new = {"learned": {"beyond": {"seeds": [0, 1, 2, 4]}}}
    assert bands.lost_seeds(old, new) == ["learned beyond: seeds [3]"]
    assert bands.lost_seeds(new, old) == []
    steps = {"r": {"steps_to_95": {"seeds": [0], "missing": [1, 2]}}}
    assert bands.lost_seeds(steps, {"r": {"steps_to_95": {"seeds": [0, 1], "missing": [2]}}}) \
        == []


def test_the_bands_command_stops_when_a_seed_folder_is_gone(stops, tmp_path, monkeypatch):
    """A copy of Problem 2's results with seed 3's metrics gone: the bands file is kept."""
    results = tmp_path / "problem2" / "results"
    shutil.copytree(REPO_ROOT / "problem2" / "results", results,
                    ignore=shutil.ignore_patterns("*.pth", "figures"))
    (results / "seeds" / "seed3" / "metrics.json").unlink()
    before = (results / "reference_bands.json").read_bytes()
    monkeypatch.setattr(bands, "results_dir", lambda problem: tmp_path / problem / "results")
    stops(bands.main, ["problem2"], "would lose seeds", "seeds [3]")
    assert (results / "reference_bands.json").read_bytes() == before
