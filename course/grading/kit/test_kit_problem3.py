"""Problem 3's provided code (not graded), run against the reference solution: the optional
key/value cache, run names, batches, resuming, the scripts' messages, the outcome classes,
RDKit's reasons, the unigram entropy, and evaluate.py keeping a committed 'main' entry."""

import json
import math
from pathlib import Path

import pytest
import torch

import problem3.evaluate as ev
import problem3.train as tr
from problem3.config import run_name
from problem3.dataset import SmilesDataset
from problem3.model import Block
from provided.smiles import SmilesVocab, tokenize
from tests.tiny import p3_train_args, read_log, smiles_data, tiny_lm

pytestmark = pytest.mark.kit

FIXTURES = Path(__file__).resolve().parents[3] / "tests" / "fixtures"
TRAIN_FIXTURE = FIXTURES / "smiles_train.txt"


@pytest.fixture
def vocab() -> SmilesVocab:
    return SmilesVocab(t for line in TRAIN_FIXTURE.read_text().split() for t in tokenize(line))


@pytest.fixture
def data_dir(tmp_path) -> Path:
    """A data folder holding the 400 + 100 fixture strings as the SMILES splits."""
    return smiles_data(tmp_path)


def test_outcome_classes():
    assert [ev.outcome(s) for s in ["OCC", "c1cccc1", "CC("]] == [
        "valid", "well_formed_invalid", "ill_formed"]


def test_dataset_missing_file_says_what_to_run(tmp_path, vocab):
    with pytest.raises(FileNotFoundError, match="generate_datasets.py"):
        SmilesDataset(tmp_path / "none.txt", vocab)


def test_bad_norm_raises():
    with pytest.raises(ValueError, match="norm"):
        Block(16, 2, 32, 0.0, "middle")


@pytest.mark.parametrize("norm", ["pre", "post"])
def test_kv_cache_gives_the_full_forward(norm):
    model = tiny_lm(norm=norm).eval()
    ids = torch.randint(3, 12, (3, 9))
    full = model(ids)
    cache = [{} for _ in model.blocks]
    steps = [model(ids[:, :4], kv_cache=cache)] + [model(ids[:, t:t + 1], kv_cache=cache)
                                                   for t in range(4, 9)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=1e-5)


def test_run_names():
    assert run_name("pre", 1e-3, 500, 1500) == "pre_lr0.001_w500_s1500"
    assert run_name("post", 3e-2, 0, 4000) == "post_lr0.03_w0_s4000"


def test_batches_are_shuffled_passes_without_repeats():
    seen = torch.cat([tr.batch_indices(s, 20, 4, seed=0) for s in range(1, 6)])
    assert sorted(seen.tolist()) == list(range(20))
    assert torch.equal(tr.batch_indices(6, 20, 4, 0), tr.batch_indices(6, 20, 4, 0))
    assert not torch.equal(tr.batch_indices(1, 20, 4, 0), tr.batch_indices(1, 20, 4, 1))


@pytest.mark.timeout(300)  # three short runs of the full-size model
def test_resume_after_ctrl_c_gives_the_identical_log(data_dir, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(tr, "LOG_EVERY", 2)
    monkeypatch.setattr(tr, "VAL_EVERY", 4)
    assert tr.main(p3_train_args(data_dir, tmp_path / "a", "--steps", "10")) == 0
    whole = read_log(tmp_path / "a", "pre_lr0.001_w3_s10")

    real_step, calls = tr.train_step, []

    def killed_at_step_7(*args, **kwargs):
        calls.append(1)
        if len(calls) == 7:
            raise KeyboardInterrupt
        return real_step(*args, **kwargs)

    monkeypatch.setattr(tr, "train_step", killed_at_step_7)
    capsys.readouterr()
    with pytest.raises(SystemExit) as stop:
        tr.main(p3_train_args(data_dir, tmp_path / "b", "--steps", "10"))
    last = capsys.readouterr().err.strip().splitlines()[-1]  # after the progress bar
    assert stop.value.code == 130 and last.startswith("error: interrupted") and "resume" in last
    assert (tmp_path / "b" / "resume_pre_lr0.001_w3_s10.pth").exists()
    assert not (tmp_path / "b" / "training_log_pre_lr0.001_w3_s10.json").exists()
    monkeypatch.setattr(tr, "train_step", real_step)
    assert tr.main(p3_train_args(data_dir, tmp_path / "b", "--steps", "10")) == 0
    assert read_log(tmp_path / "b", "pre_lr0.001_w3_s10") == whole
    assert [r["step"] for r in whole["log"]] == [2, 4, 6, 8, 10]
    assert [r["step"] for r in whole["val"]] == [4, 8, 10]
    assert not (tmp_path / "b" / "resume_pre_lr0.001_w3_s10.pth").exists()
    a = (tmp_path / "a" / "model_pre_lr0.001_w3_s10.pth")
    b = (tmp_path / "b" / "model_pre_lr0.001_w3_s10.pth")
    assert a.read_bytes() == b.read_bytes()  # identical weights, identical bytes


def test_train_without_data_says_what_to_run(tmp_path, capsys):
    with pytest.raises(SystemExit):
        tr.main(p3_train_args(tmp_path, tmp_path / "r", "--steps", "2"))
    assert "generate_datasets.py" in capsys.readouterr().err


@pytest.mark.parametrize("smiles, category", [
    ("c1cccc1", "kekulization"), ("C(C)(C)(C)(C)C", "valence"),
    ("Cc", "aromatic atom outside a ring"), ("C1CC", "parse")])
def test_invalid_reasons(smiles, category):
    assert ev.reason_category(ev.invalid_reason(smiles)) == category


def test_unigram_entropy_by_hand(tmp_path):
    (tmp_path / "smiles").mkdir()
    (tmp_path / "smiles" / "train.txt").write_text("CO\n")
    (tmp_path / "smiles" / "val.txt").write_text("CO\nCC\n")
    # targets: C O EOS, C C EOS -> frequencies C 3/6, O 1/6, EOS 2/6; PAD never counted
    expected = -(0.5 * math.log(0.5) + math.log(1 / 6) / 6 + math.log(1 / 3) / 3)
    assert ev.unigram_entropy(tmp_path) == pytest.approx(expected, rel=1e-12)


def test_evaluate_without_the_main_model_keeps_the_committed_main_entry(data_dir, tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    committed = {"run": ev.MAIN_RUN, "by_step": [{"step": 4000, "validity": 0.9}]}
    (results / "metrics.json").write_text(json.dumps({"sweep": [], "main": committed}))
    assert ev.main(["--results_dir", str(results), "--data_dir", str(data_dir),
                    "--threads", "1"]) == 0
    metrics = json.loads((results / "metrics.json").read_text())
    assert metrics["sweep"] == [] and metrics["main"] == committed
    assert ev.main(["--run", "post_lr0.01_w0_s4000", "--results_dir", str(results),
                    "--data_dir", str(data_dir), "--threads", "1"]) == 0
    other = json.loads((results / "metrics.json").read_text())
    assert "main" not in other  # a different run's numbers are never carried over
