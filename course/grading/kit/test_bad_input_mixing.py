"""Results of different runs never mix: a Problem 3 run does not resume another
configuration's save or train over another vocabulary, a non-prescribed run cannot write into
the committed results folder, and the same weights always give the same bytes."""

import pytest
import torch

import problem1.train as p1_train
import problem2.train as p2_train
import problem3.train as p3_train
from problem1.config import Config as Config1
from problem3.config import run_name
from provided import common
from provided import results as results_io

pytestmark = pytest.mark.kit

RUN3 = run_name("pre", 1e-3, 3, 4)


def p3_args(data, results, *extra):
    return ["--norm", "pre", "--lr", "1e-3", "--warmup", "3", "--batch_size", "16",
            "--steps", "4", "--data_dir", str(data), "--results_dir", str(results),
            "--device", "cpu", "--threads", "1", *extra]


@pytest.fixture
def interrupted_run(data, tmp_path, monkeypatch, capsys):
    """A Problem 3 run interrupted (Ctrl-C) at step 3, after its resume file was saved at
    step 2: (data folder, results folder, resume file)."""
    monkeypatch.setattr(p3_train, "LOG_EVERY", 2)
    monkeypatch.setattr(p3_train, "VAL_EVERY", 2)
    real_step, calls = p3_train.train_step, []

    def interrupted_at_step_3(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real_step(*args, **kwargs)

    monkeypatch.setattr(p3_train, "train_step", interrupted_at_step_3)
    results = tmp_path / "results"
    with pytest.raises(SystemExit) as stop:
        p3_train.main(p3_args(data, results))
    assert stop.value.code == 130
    monkeypatch.setattr(p3_train, "train_step", real_step)
    resume = results / f"resume_{RUN3}.pth"
    assert resume.exists()
    capsys.readouterr()
    return data, results, resume


@pytest.mark.parametrize("flags, changed", [
    (["--seed", "1"], "seed 0 -> 1"),
    (["--batch_size", "8"], "batch_size 16 -> 8"),
    (["--threads", "2"], "threads 1 -> 2"),
])
def test_resume_with_other_flags_is_refused(interrupted_run, flags, changed, stops):
    data, results, resume = interrupted_run
    before = resume.read_bytes()
    argv = p3_args(data, results, *flags)  # the later flag wins
    stops(p3_train.main, argv, str(resume), "another configuration", changed,
          "delete it to start over")
    assert resume.read_bytes() == before
    assert not list(results.glob("training_log_*")) and not list(results.glob("model_*"))


def test_resume_with_other_data_is_refused(interrupted_run, stops):
    data, results, resume = interrupted_run
    train = data / "smiles" / "train.txt"
    lines = train.read_text().splitlines()
    train.write_text("\n".join(lines[1:] + lines[:1]) + "\n")  # same strings, other order
    stops(p3_train.main, p3_args(data, results), str(resume), "the data files")
    assert not list(results.glob("training_log_*"))


def test_same_flags_resume(interrupted_run, capsys):
    data, results, resume = interrupted_run
    assert p3_train.main(p3_args(data, results)) == 0
    assert "resuming after step 2" in capsys.readouterr().out
    assert not resume.exists() and (results / f"training_log_{RUN3}.json").exists()


def test_other_vocabulary_in_the_same_folder_is_refused(data, tmp_path, stops):
    results = tmp_path / "results"
    assert p3_train.main(p3_args(data, results, "--steps", "1")) == 0
    finished = {p.name: p.read_bytes() for p in results.iterdir() if p.is_file()}
    other = tmp_path / "other"
    (other / "smiles").mkdir(parents=True)
    for split in ("train", "val"):  # the same kind of data without any Cl
        lines = (data / "smiles" / f"{split}.txt").read_text().split()
        (other / "smiles" / f"{split}.txt").write_text(
            "\n".join(s for s in lines if "Cl" not in s) + "\n")
    stops(p3_train.main, p3_args(other, results, "--steps", "2"),
          str(results / "vocab.json"), "another vocabulary", "--results_dir")
    assert {p.name: p.read_bytes() for p in results.iterdir() if p.is_file()} == finished


@pytest.fixture
def committed(tmp_path, monkeypatch):
    """The committed results folders, moved to tmp_path for the test: a refusal that failed
    would write there, never into the repository."""
    monkeypatch.setattr(common, "results_dir", lambda problem: tmp_path / problem / "results")
    return tmp_path


@pytest.mark.parametrize("main, argv", [
    (p1_train.main, ["--digit_order", "forward", "--train_size", "1000", "--steps", "3"]),
    (p1_train.main, ["--digit_order", "forward", "--train_size", "1000", "--seed", "1"]),
    (p1_train.main, ["--digit_order", "forward", "--train_size", "8"]),
    (p2_train.main, ["--position", "rotary", "--steps", "3"]),
    (p2_train.main, ["--position", "rotary", "--seed", "1"]),
    (p3_train.main, ["--norm", "pre", "--lr", "1e-3", "--batch_size", "16"]),
    (p3_train.main, ["--norm", "pre", "--lr", "1e-3", "--seed", "2"]),
], ids=["p1 --steps", "p1 --seed", "p1 --train_size 8", "p2 --steps", "p2 --seed",
        "p3 --batch_size", "p3 --seed"])
def test_non_prescribed_run_needs_its_own_results_dir(data, committed, main, argv, stops):
    stops(main, argv + ["--data_dir", data, "--device", "cpu"], "not a prescribed run",
          "--results_dir")
    assert not any(committed.glob("problem*/results/*"))


def test_same_weights_give_the_same_bytes(data, tmp_path):
    for folder in ("a", "b"):
        args = ["--digit_order", "forward", "--train_size", "8", "--steps", "2", "--data_dir",
                str(data), "--results_dir", str(tmp_path / folder), "--device", "cpu",
                "--threads", "1"]
        assert p1_train.main(args) == 0
    for name in ("model_forward_n8.pth", "training_log_forward_n8.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    config = Config1(digit_order="forward", train_size=8)
    torch.manual_seed(0)
    model = config.build_model()
    for name in ("x.pth", "y.pth"):
        results_io.save_checkpoint(tmp_path / name, config, model)
    assert (tmp_path / "x.pth").read_bytes() == (tmp_path / "y.pth").read_bytes()
