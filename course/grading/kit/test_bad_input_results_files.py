"""Damaged results files: a corrupt or truncated checkpoint, resume file, training log,
vocab.json or metrics.json stops the script that reads it in one line naming the file and
saying what to do, and no finished file is changed."""

import json

import pytest
import torch

import problem1.evaluate as p1_evaluate
import problem2.evaluate as p2_evaluate
import problem3.evaluate as p3_evaluate
import problem3.sample as p3_sample
import problem3.train as p3_train
from problem1.config import Config as Config1
from problem2.config import Config as Config2
from problem3.config import run_name
from provided.results import save_checkpoint
from provided.smiles import SmilesVocab
from provided.visualize import main as visualize

pytestmark = pytest.mark.kit

FINISHED = '{"finished": true}\n'


def truncated(path):
    raw = path.read_bytes()
    path.write_bytes(raw[: len(raw) // 2])


DAMAGES = {  # name: (damage a file, words of the message)
    "garbage": (lambda path: path.write_bytes(b"not a checkpoint at all"),
                "truncated or corrupt"),
    "truncated": (truncated, "truncated or corrupt"),
    "empty": (lambda path: path.write_bytes(b""), "truncated or corrupt"),
    "not a checkpoint": (lambda path: torch.save({"weights": torch.zeros(2)}, path),
                         "not a checkpoint of this repository"),
}


@pytest.fixture
def results(tmp_path):
    """A results folder with a finished metrics.json that no failure may change."""
    folder = tmp_path / "results"
    folder.mkdir()
    (folder / "metrics.json").write_text(FINISHED)
    return folder


def untouched(results):
    return (results / "metrics.json").read_text() == FINISHED


def problem1_checkpoint(results, order="forward", size=1000):
    config = Config1(digit_order=order, train_size=size)
    torch.manual_seed(0)
    path = results / f"model_{config.run}.pth"
    save_checkpoint(path, config, config.build_model())
    return path


# --------------------------------------------------------------------------- weights
@pytest.mark.parametrize("damage", list(DAMAGES))
def test_problem1_weights(data, results, damage, stops):
    path = problem1_checkpoint(results)
    damaging, words = DAMAGES[damage]
    damaging(path)
    stops(p1_evaluate.main, ["--data_dir", data, "--results_dir", results, "--device", "cpu"],
          str(path), words, "delete it")
    assert untouched(results)


@pytest.mark.parametrize("damage", ["truncated", "not a checkpoint"])
def test_problem2_weights(data, results, damage, stops):
    config = Config2(position="rotary", train_sequences=40, train_length=64)
    path = results / "model_rotary.pth"
    save_checkpoint(path, config, config.build_model())
    damaging, words = DAMAGES[damage]
    damaging(path)
    stops(p2_evaluate.main, ["--data_dir", data, "--results_dir", results, "--device", "cpu"],
          str(path), words)
    assert untouched(results)


@pytest.mark.parametrize("damage", ["garbage", "truncated"])
def test_problem3_weights(results, damage, stops):
    path = results / "model_pre_lr0.001_w500_s4000.pth"
    torch.save({"config": {}, "model": {"w": torch.zeros(1000)}}, path)
    damaging, words = DAMAGES[damage]
    damaging(path)
    stops(p3_sample.main, ["--run", "pre_lr0.001_w500_s4000", "--results_dir", results,
                           "--device", "cpu"], str(path), words)
    assert untouched(results) and not list(results.glob("samples_*"))


def test_weights_of_another_model(data, results, stops):
    """A checkpoint whose config and weights do not fit this repository's model."""
    config = Config1(digit_order="forward", train_size=1000)
    path = results / "model_forward_n1000.pth"
    torch.save({"config": {"digit_order": "forward", "train_size": 1000, "colour": "red"},
                "model": {}}, path)
    stops(p1_evaluate.main, ["--data_dir", data, "--results_dir", results, "--device", "cpu"],
          str(path), "another kind of run")
    save_checkpoint(path, config, torch.nn.Linear(2, 2))
    stops(p1_evaluate.main, ["--data_dir", data, "--results_dir", results, "--device", "cpu"],
          str(path), "does not hold weights of this model")
    assert untouched(results)


# ----------------------------------------------------------------------- resume file
def p3_args(data, results, steps=2):
    return ["--norm", "pre", "--lr", "1e-3", "--warmup", "3", "--batch_size", "16",
            "--steps", str(steps), "--data_dir", data, "--results_dir", results,
            "--device", "cpu", "--threads", "1"]


@pytest.mark.parametrize("damage", ["garbage", "truncated", "empty"])
def test_corrupt_resume_file_says_deleting_it_starts_over(data, results, damage, stops):
    path = results / f"resume_{run_name('pre', 1e-3, 3, 2)}.pth"
    torch.save({"config": {}, "model": {"w": torch.zeros(1000)}, "optimizer": {}}, path)
    DAMAGES[damage][0](path)
    stops(p3_train.main, p3_args(data, results), str(path), "truncated or corrupt",
          "deleting it starts the run over")
    assert path.exists() and untouched(results)
    assert not list(results.glob("training_log_*")) and not list(results.glob("model_*"))


# ---------------------------------------------------------------------- training logs
@pytest.mark.parametrize("content", ['{"run": "forward_n1000", "log": [', "", '["a list"]'],
                         ids=["truncated", "empty", "not a log"])
def test_problem1_training_log(data, results, content, stops):
    problem1_checkpoint(results)
    log = results / "training_log_forward_n1000.json"
    log.write_text(content)
    stops(p1_evaluate.main, ["--data_dir", data, "--results_dir", results, "--device", "cpu"],
          str(log), "not a finished training log")
    assert untouched(results)


def test_problem3_sweep_log(data, results, stops):
    log = results / "training_log_pre_lr0.001_w0_s1500.json"
    log.write_text('{"run": "pre_lr0.001_w0_s1500", "config": {"norm": "pre", ')
    stops(p3_evaluate.main, ["--data_dir", data, "--results_dir", results, "--device", "cpu"],
          str(log), "not a finished training log")
    assert untouched(results)


@pytest.mark.parametrize("target", ["problem1", "problem3"])
def test_visualize_names_a_truncated_log(results, tmp_path, target, stops):
    (results / "metrics.json").unlink()
    name = ("training_log_forward_n1000.json" if target == "problem1"
            else "training_log_pre_lr0.001_w0_s1500.json")
    if target == "problem3":
        (results / "metrics.json").write_text(json.dumps(
            {"sweep": [{"run": "pre_lr0.001_w0_s1500"}]}))
    (results / name).write_text('{"log": [{"step": 50, "val_')
    stops(visualize, [target, "--input_dir", results, "--out_dir", tmp_path / "figures"],
          str(results / name), "not valid JSON")
    assert not list((tmp_path / "figures").glob("*.png"))


# ------------------------------------------------------------------------ vocab.json
@pytest.mark.parametrize("content, words", [('{"tokens": ["<pad>", ', "not valid JSON"),
                                            ('{"tokens": ["C", "c"]}', "not a SmilesVocab"),
                                            ("[1, 2]", "not a SmilesVocab")],
                         ids=["truncated", "no specials", "a list"])
def test_bad_vocab_json(data, results, content, words, stops):
    path = results / "vocab.json"
    path.write_text(content)
    stops(p3_train.main, p3_args(data, results), str(path), words)
    assert path.read_text() == content and untouched(results)


def test_vocab_json_that_is_not_text(data, results, stops):
    path = results / "vocab.json"
    path.write_bytes(b"\xff\xfe\xfa")
    stops(p3_train.main, p3_args(data, results), str(path))
    assert path.read_bytes() == b"\xff\xfe\xfa"


# ---------------------------------------------------------------------- metrics.json
@pytest.mark.parametrize("target", ["problem1", "problem2", "problem3"])
def test_visualize_names_a_corrupt_metrics_json(results, tmp_path, target, stops):
    path = results / "metrics.json"
    path.write_text('{"forward_n1000": {"test_exact_match": 0.9')
    stops(visualize, [target, "--input_dir", results, "--out_dir", tmp_path / "figures"],
          str(path), "not valid JSON")
    assert not list((tmp_path / "figures").glob("*.png"))


def test_problem3_evaluate_names_a_corrupt_metrics_json(data, results, stops):
    path = results / "metrics.json"
    path.write_text('{"main": {"run": ')
    stops(p3_evaluate.main, ["--data_dir", data, "--results_dir", results, "--device", "cpu",
                             "--num_samples", "5"], str(path))
    assert path.read_text() == '{"main": {"run": '


def test_vocab_check_refuses_before_training(data, results, stops):
    """A readable vocab.json of another vocabulary is not overwritten either."""
    path = results / "vocab.json"
    SmilesVocab(["C", "c", "1"]).save(path)
    before = path.read_bytes()
    stops(p3_train.main, p3_args(data, results), str(path), "another vocabulary")
    assert path.read_bytes() == before


@pytest.mark.parametrize("target, what", [("data", "generate_datasets.py"),
                                          ("problem1", "problem1.train"),
                                          ("problem2", "problem2.train"),
                                          ("problem3", "problem3.train")])
def test_visualize_on_a_folder_without_results_says_what_to_run(tmp_path, target, what, stops):
    empty = tmp_path / "empty"
    empty.mkdir()
    stops(visualize, [target, "--input_dir", empty, "--out_dir", tmp_path / "figures"],
          "nothing to draw", str(empty), what)
