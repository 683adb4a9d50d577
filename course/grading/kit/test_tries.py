"""A student's cheap tries: the smoke run per problem, which names an unfinished part in one
line and goes on with the other problems; evaluate.py --quick (Problem 1); the validation
subset of a shortened Problem 3 run; and visualize.py's line for each figure it skips."""

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import torch

from course.grading.handout import make_handout
from problem1 import evaluate
from problem1 import train as p1_train
from problem1.config import load_model
from problem1.dataset import AdditionDataset
from problem1.model import score_predictions
from problem3 import train as p3_train
from problem3.config import Config as P3Config
from problem3.config import load_model as p3_load
from problem3.run_files import load_data
from provided import smoke
from provided.visualize import main as visualize
from tests.tiny import addition_data, offset_data, p3_train_args, read_log, script_args

pytestmark = pytest.mark.kit

REPO = Path(__file__).resolve().parents[3]

STUB = '''class AdditionDataset:
    """A stand-in of the handout's Part A."""

    def __init__(self):
        raise NotImplementedError("your solution here")
'''
README = (  # the README's table of the parts, one row
    "| problem | part | title | file: functions to write | test | points |\n"
    "|---|---|---|---|---|---:|\n"
    "| 1 | A | Addition dataset | `problem1/dataset.py`: `AdditionDataset.__init__`, "
    "`AdditionDataset.__len__` | `pytest -m p1a` | 4 |\n")


# ------------------------------------------------------------------------------ smoke
def fake_repository(root: Path) -> None:
    (root / "problem1").mkdir(parents=True)
    (root / "problem1" / "__init__.py").write_text("")
    (root / "problem1" / "dataset.py").write_text(STUB)
    (root / "README.md").write_text(README)


def test_unfinished_part_names_file_function_and_part(tmp_path):
    fake_repository(tmp_path)
    done = subprocess.run([sys.executable, "-c", "from problem1.dataset import AdditionDataset; "
                           "AdditionDataset()"], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 1 and "NotImplementedError" in done.stderr
    assert smoke.unfinished_part(done.stderr, tmp_path) == (
        "problem1/dataset.py: AdditionDataset.__init__ (Part A, pytest -m p1a)")
    assert smoke.unfinished_part("ValueError: bad\n", tmp_path) is None
    assert smoke.unfinished_part(done.stderr, tmp_path / "elsewhere") is None  # not your code


def test_smoke_names_an_unfinished_problem_and_goes_on(tmp_path, monkeypatch, capsys):
    """Problem 1 stops at a stub (one line naming it, its later step skipped), Problem 2
    passes, Problem 3 fails otherwise (its output's tail): exit 1; one problem alone: 0."""
    fake_repository(tmp_path)
    commands = {1: [["-c", "from problem1.dataset import AdditionDataset; AdditionDataset()"],
                    ["-c", "raise SystemExit('never run')"]],
                2: [["-m", "json.tool", "--help"]],
                3: [["-c", "raise SystemExit('error: a real bug')"]]}
    monkeypatch.setattr(smoke, "REPO_ROOT", tmp_path)
    monkeypatch.setattr(smoke, "missing_data", lambda problem, source: None)
    monkeypatch.setattr(smoke, "tiny_data", lambda problem, source, out: None)
    monkeypatch.setattr(smoke, "steps", lambda problem, data, results: commands[problem])
    assert smoke.main([]) == 1
    out, err = capsys.readouterr()
    failed = [line for line in err.splitlines() if line.startswith("FAILED")]
    assert failed[0] == (
        "FAILED problem 1: unfinished: problem1/dataset.py: AdditionDataset.__init__ (Part A, "
        "pytest -m p1a) raises NotImplementedError (in `python -c from problem1.dataset import "
        "AdditionDataset; AdditionDataset()`); the rest of the problem is skipped")
    assert failed[1].startswith("FAILED problem 3: step `python -c raise SystemExit")
    assert "error: a real bug" in err and "never run" not in out + err
    assert [line.split()[0] for line in out.splitlines()] == ["problem", "problem", "ok",
                                                              "problem"]
    assert err.strip().splitlines()[-1].startswith(
        "smoke run failed: problem 1, 3 failed, problem 2 passed")
    assert smoke.main(["--problem", "2"]) == 0
    assert "smoke run passed: every script of problem 2 in" in capsys.readouterr().out


def test_smoke_of_the_handout_names_each_problems_first_unfinished_part(tmp_path):
    """The real handout, every body a stub: one line per problem, each naming the first
    function its pipeline reaches, and the three problems all tried."""
    handout = tmp_path / "handout"
    make_handout(handout)
    addition_data(handout)  # 4,000 training pairs: the smoke run's n4000 runs
    offset_data(handout)
    env = {**os.environ, "PYTHONPATH": str(handout), "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-m", "provided.smoke"], cwd=handout,
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    failed = [line for line in done.stderr.splitlines() if line.startswith("FAILED")]
    assert [line.split(": unfinished: ")[1].split(" raises")[0] for line in failed] == [
        "problem1/dataset.py: AdditionDataset.__init__ (Part A, pytest -m p1a)",
        "problem2/dataset.py: OffsetDataset.__init__ (Part A, pytest -m p2a)",
        "problem3/dataset.py: build_vocab (Part A, pytest -m p3a)"], done.stderr
    assert "Traceback" not in done.stdout + done.stderr


def test_smoke_reports_missing_data_and_goes_on(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(smoke, "DATA_DIR", tmp_path / "nodata")
    monkeypatch.setattr(smoke, "steps", lambda problem, data, results: [])
    assert smoke.main(["--problem", "1", "--problem", "3"]) == 1
    err = capsys.readouterr().err
    assert "FAILED problem 1: no data:" in err and "generate_datasets.py --only addition" in err
    assert "problem 3 passed" in err  # the SMILES fixture needs no data


# ------------------------------------------------------------------ evaluate.py --quick
def test_quick_evaluation_takes_every_number_on_the_first_test_pairs(tmp_path, monkeypatch,
                                                                     capsys, keep_torch_threads):
    data = addition_data(tmp_path)  # 24 test pairs
    args = script_args(tmp_path, data)
    results = tmp_path / "results"
    assert p1_train.main(["--digit_order", "reversed", "--train_size", "4000", "--steps", "3",
                       *args]) == 0
    monkeypatch.setattr(evaluate, "QUICK_PAIRS", 8)
    assert evaluate.main([*args, "--quick"]) == 0
    assert "--quick: every number below is taken on the first 8 test pairs" in (
        capsys.readouterr().out)
    quick = json.loads((results / "metrics.json").read_text())
    model, _, _ = load_model(results / "model_reversed_n4000.pth", "cpu")
    for pairs, metrics in ((8, quick), (24, None)):
        test = AdditionDataset(data, "test", "reversed", pairs)
        with torch.inference_mode():
            exact, token = score_predictions(model.generate(test.src), test.tgt_out)
        if metrics is None:  # the default path: the whole test split
            assert evaluate.main(args) == 0
            metrics = json.loads((results / "metrics.json").read_text())
        run = metrics["reversed_n4000"]
        assert (run["test_exact_match"], run["test_token_accuracy"]) == (exact, token)
        assert metrics["pruning"]["reversed_n4000"][0]["test_exact_match"] == exact
    assert "--quick" not in capsys.readouterr().out


def test_quick_evaluation_refuses_the_committed_results_folder(stops):
    stops(evaluate.main, ["--quick", "--device", "cpu"], "--quick", "--results_dir")


# -------------------------------------------------- Problem 3: a shortened run's validation
def test_shortened_problem3_run_validates_on_the_first_strings(data, tmp_path, monkeypatch):
    monkeypatch.setattr(p3_train, "TRY_VAL_STRINGS", 30)  # the fixture has 100
    results = tmp_path / "results"
    assert p3_train.main(p3_train_args(data, results, "--steps", "4")) == 0
    log = read_log(results, "pre_lr0.001_w3_s4")
    assert log["val_strings"] == 30
    model, _, _ = p3_load(results / "model_pre_lr0.001_w3_s4.pth", "cpu")
    _, _, val_set, _ = load_data(data, 16)
    first = p3_train.FirstStrings(val_set, 30)
    assert log["final_val_loss"] == p3_train.evaluate_loss(model, first, "cpu")
    assert len(first) == 30 and torch.equal(first.inputs, val_set.inputs[:30])


def test_prescribed_runs_validate_on_every_string():
    val_set = object()
    for steps in (1500, 4000):
        config = P3Config(norm="pre", lr=1e-3, steps=steps)
        assert p3_train.try_validation(config, val_set) == (val_set, None)


# ------------------------------------------------------------- visualize.py's skip lines
def test_visualize_says_which_figures_it_skipped_and_why(tmp_path, capsys):
    results = tmp_path / "results"
    results.mkdir()
    log = {"run": "forward_n1000", "config": {"digit_order": "forward", "train_size": 1000},
           "steps_to_95": None, "log": [{"step": 50, "val_exact_match": 0.1}]}
    (results / "training_log_forward_n1000.json").write_text(json.dumps(log))
    assert visualize(["problem1", "--input_dir", str(results), "--out_dir",
                      str(tmp_path / "figures")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("wrote ") and lines[0].endswith("val_exact_match.png")
    metrics = f"{results / 'metrics.json'} not found: run `python -m problem1.evaluate`"
    assert lines[1:] == [
        f"skipped test_vs_train_size.png: {metrics}",
        f"skipped ablation.png: {metrics}",
        f"skipped pruning.png: {metrics}",
        f"skipped cross_attention_{{run}}.png: {results / 'attention_maps.json'} not found: "
        "run `python -m problem1.evaluate`",
        f"skipped encoder_attention_{{run}}.png: {results / 'attention_maps.json'} not found: "
        "run `python -m problem1.evaluate`"]
    # metrics.json without the head analysis (problem1_seed_metrics writes such a file)
    (results / "metrics.json").write_text(json.dumps({
        "forward_n1000": {"test_exact_match": 0.5, "test_token_accuracy": 0.8,
                          "steps_to_95": None}, "ablation": {}, "pruning": {}}))
    assert visualize(["problem1", "--input_dir", str(results), "--out_dir",
                      str(tmp_path / "figures")]) == 0
    skipped = [line for line in capsys.readouterr().out.splitlines()
               if line.startswith("skipped")]
    assert skipped[:2] == [
        f'skipped ablation.png: {results / "metrics.json"} has no "ablation" entry: run '
        "`python -m problem1.evaluate`",
        f'skipped pruning.png: {results / "metrics.json"} has no "pruning" entry: run '
        "`python -m problem1.evaluate`"]
    assert len(skipped) == 4


def test_visualize_skips_nothing_on_the_committed_results(capsys):
    """Every figure of every problem is drawn from the committed results: no skip line
    (nothing written but to a temporary folder)."""
    for target in ("problem1", "problem2", "problem3"):
        if not (REPO / target / "results" / "metrics.json").exists():
            pytest.skip("no committed results")
    with tempfile.TemporaryDirectory() as out:
        for target in ("problem1", "problem2", "problem3"):
            assert visualize([target, "--out_dir", str(Path(out) / target)]) == 0
            assert "skipped" not in capsys.readouterr().out, target
