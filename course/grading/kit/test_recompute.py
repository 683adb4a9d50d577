"""course/grading/recompute.py: the graded results are the ones a submission's artifacts support.

Numbers without artifacts (fabricated, or the reference's own copied) are unverified; a log
that is not its checkpoint's, or a checkpoint of another run or model, is unverified; a
metrics.json that disagrees with its artifacts "differs" and the recomputed value is the
one reported. Problems 1 and 2 use tiny data and untrained weights of the prescribed
configuration built here (the trained weights are not committed); Problem 3 the committed
logs and samples, with toy weights of its main run built here (the grader samples them),
and the real data where it exists.
"""

import dataclasses
import io
import json
import shutil
import zipfile
from pathlib import Path

import pytest
import torch

from course.grading import bands
from course.grading import recompute as rc
from problem1.config import RUNS as P1_RUNS
from problem1.config import Config as P1Config
from problem1.dataset import AdditionDataset
from problem1.train import steps_to_95, validate
from problem2.config import Config as P2Config
from problem2.dataset import OffsetDataset
from problem2.evaluate import per_position_counts, position_metrics
from problem2.model import POSITIONS
from problem2.train import evaluate_split
from problem3.evaluate import canonical, sample_metrics
from provided.common import DATA_DIR, results_dir
from provided.results import checkpoint_bytes, json_bytes

pytestmark = pytest.mark.kit
PROBLEMS = ("problem1", "problem2", "problem3")


def reference_bands(problem: str) -> dict:
    return json.loads((results_dir(problem) / "reference_bands.json").read_text())


def graded(problem: str) -> dict:
    """{run: [quantity]} of the bands the grader applies, and the claimed quantities (only a
    log states them: shown, no points)."""
    def shown(band):
        return band["graded"] or band.get("not_graded", "").startswith("claimed")
    return {run: [q for q, band in quantities.items() if shown(band)]
            for run, quantities in reference_bands(problem).items()
            if any(shown(band) for band in quantities.values())}


def statuses(found: dict) -> set:
    return {entry["status"] for quantities in found.values() for entry in quantities.values()}


def real_data() -> Path:
    """The real data folder, or skip (it is made by python generate_datasets.py)."""
    try:
        for problem in PROBLEMS:
            rc.check_data(problem, DATA_DIR, rc.DATA_SHA1)
    except rc.GraderDataError as err:
        pytest.skip(f"needs the homework's data: {err}")
    return DATA_DIR


# ------------------------------------------------------------------ artifacts built here
def p1_artifacts(folder: Path, data: Path, runs=tuple(P1_RUNS)) -> dict:
    """model_{run}.pth and training_log_{run}.json for runs: untrained weights of the
    prescribed Config (a seed of their own each) and a log whose every validation point is
    what those weights score on the val split. Returns {run: (test exact, test token)}."""
    folder.mkdir(parents=True, exist_ok=True)
    scores = {}
    for index, run in enumerate(runs):
        config = P1Config(**P1_RUNS[run])
        torch.manual_seed(index)
        model = config.build_model().eval()
        exact, token = validate(model, AdditionDataset(data, "val", config.digit_order))
        points = [{"step": step, "train_loss": 1.0, "val_exact_match": exact,
                   "val_token_accuracy": token}
                  for step in range(config.eval_every, config.steps + 1, config.eval_every)]
        log = {"run": run, "config": dataclasses.asdict(config), "log": points,
               "steps_to_95": steps_to_95(points)}
        (folder / f"training_log_{run}.json").write_bytes(json_bytes(log))
        (folder / f"model_{run}.pth").write_bytes(checkpoint_bytes(config, model))
        scores[run] = validate(model, AdditionDataset(data, "test", config.digit_order))
    return scores


def p2_config(position: str) -> P2Config:
    sequences, length = rc.P2_TRAIN_SHAPE
    return P2Config(position=position, train_sequences=sequences, train_length=length)


def p2_artifacts(folder: Path, data: Path) -> dict:
    """model_{scheme}.pth (untrained, seed 10 + index) and training_log_{scheme}.json whose
    last test accuracy is those weights' over positions 0..63. Returns {scheme: the
    position_metrics of the weights on the test split}."""
    folder.mkdir(parents=True, exist_ok=True)
    test = OffsetDataset(data, "test", k=P2Config.k)
    metrics = {}
    for index, position in enumerate(POSITIONS):
        config = dataclasses.replace(p2_config(position), seed=10 + index)
        model = config.build_model().eval()
        first = evaluate_split(model, test.tokens[:, :64], test.targets[:, :64])
        per_epoch = -(-config.train_sequences // config.batch_size)
        records = [{"epoch": e, "step": e * per_epoch, "train_loss": 1.0, "train_accuracy": 0.5,
                    "test_loss": first["loss"], "test_accuracy": first["accuracy"]}
                   for e in range(1, config.epochs + 1)]
        log = {"run": config.run, "config": dataclasses.asdict(config), "log": records}
        (folder / f"training_log_{position}.json").write_bytes(json_bytes(log))
        (folder / f"model_{position}.pth").write_bytes(checkpoint_bytes(config, model))
        counts = per_position_counts(model, test.tokens, test.targets)
        metrics[position] = position_metrics(counts["correct"], counts["count"])
    return metrics


def write_json(path: Path, obj) -> None:
    path.write_bytes(json_bytes(obj))


def edit_checkpoint(path: Path, edit) -> None:
    """Rewrite a checkpoint with edit(checkpoint) applied."""
    checkpoint = torch.load(path, weights_only=True)
    edit(checkpoint)
    buffer = io.BytesIO()
    torch.save(checkpoint, buffer)
    path.write_bytes(buffer.getvalue())


# ------------------------------------------------------------------------- every problem
def test_the_entries_are_exactly_the_graded_and_the_claimed_quantities(data, tmp_path):
    for problem in PROBLEMS:
        found = rc.recompute(problem, tmp_path / "empty", data, data_sha1=None)
        assert {run: list(q) for run, q in found.items()} == graded(problem), problem
        for entry in (e for q in found.values() for e in q.values()):
            assert set(entry) == {"value", "claimed", "status", "why"}


def test_fabricated_metrics_at_the_band_midpoints_are_unverified(data, tmp_path):
    mid = {problem: {run: {q: band["mean"] for q, band in quantities.items()}
                     for run, quantities in reference_bands(problem).items()}
           for problem in PROBLEMS}
    metrics = {
        "problem1": {run: values for run, values in mid["problem1"].items() if run in P1_RUNS},
        "problem2": {scheme: {"in_range": v["in_range"], "beyond": v["beyond"],
                              "beyond_buckets": [v[f"bucket_{b}"] for b in bands.P2_BUCKETS]}
                     for scheme, v in mid["problem2"].items()},
        "problem3": {"sweep": [{"norm": cell.split("_")[0], "lr": float(cell.split("_")[1][2:]),
                                "warmup": int(cell.split("_")[2][1:]), **values}
                               for cell, values in mid["problem3"].items() if cell != "main"],
                     "main": {"by_step": [mid["problem3"]["main"]]}}}
    for problem in PROBLEMS:
        folder = tmp_path / problem
        folder.mkdir()
        write_json(folder / "metrics.json", metrics[problem])
        found = rc.recompute(problem, folder, data, data_sha1=None)
        assert statuses(found) == {"unverified"}, problem
        run, quantity = next((r, q) for r, qs in graded(problem).items() for q in qs
                             if mid[problem][r][q] is not None and r != "verdicts")
        assert found[run][quantity]["value"] is None
        assert found[run][quantity]["claimed"] == pytest.approx(mid[problem][run][quantity])


def test_the_references_own_numbers_without_weights_are_unverified(data, tmp_path):
    for problem in ("problem1", "problem2"):
        folder = tmp_path / problem
        folder.mkdir()
        for path in results_dir(problem).glob("*.json"):  # metrics and logs, never weights
            shutil.copy(path, folder / path.name)
        found = rc.recompute(problem, folder, data, data_sha1=None)
        assert statuses(found) == {"unverified"}, problem
        for entry in (e for run, q in found.items() if run != "verdicts" for e in q.values()):
            assert entry["why"].startswith("there is no model_"), entry
            assert entry["value"] is None


def test_data_that_is_not_the_homeworks_stops_the_grader(data, tmp_path):
    with pytest.raises(rc.GraderDataError, match="SHA-1"):
        rc.recompute("problem1", tmp_path, data)


def test_the_prescribed_problem2_split_is_the_one_generate_datasets_makes():
    from generate_datasets import OFFSET_SHAPES

    assert rc.P2_TRAIN_SHAPE == OFFSET_SHAPES["train"]


# ------------------------------------------------------------------------------ Problem 1
def test_problem1_checkpoints_and_logs_of_their_runs_are_verified(data, tmp_path):
    scores = p1_artifacts(tmp_path, data)
    claims = {run: {"test_exact_match": exact, "test_token_accuracy": token,
                    "steps_to_95": None} for run, (exact, token) in scores.items()}
    claims["forward_n2000"]["test_token_accuracy"] += 0.25  # the student's evaluation's bug
    write_json(tmp_path / "metrics.json", claims)
    found = rc.recompute("problem1", tmp_path, data, data_sha1=None)
    for run, (exact, token) in scores.items():
        assert found[run]["test_token_accuracy"]["value"] == token
        if "test_exact_match" in found[run]:  # reversed_n1000's alone is not graded
            assert found[run]["test_exact_match"]["value"] == exact
    wrong = found["forward_n2000"]["test_token_accuracy"]
    assert wrong["status"] == "differs" and "disagrees" in wrong["why"]
    assert {e["status"] for run, q in found.items() for name, e in q.items()
            if run != "forward_n2000" and name not in bands.CLAIMED} == {"verified"}
    assert {e["status"] for q in found.values() for name, e in q.items()
            if name in bands.CLAIMED} == {"claimed"}, "a log-only quantity earns no points"
    verdict = scores["reversed_n1000"][0] > scores["forward_n1000"][0]
    assert found["verdicts"]["reversed_beats_forward_n1000"]["value"] == float(verdict)


def test_problem1_weights_of_another_run_or_model_are_unverified(data, tmp_path):
    p1_artifacts(tmp_path, data)
    folder = tmp_path
    shutil.copy(folder / "model_reversed_n2000.pth", folder / "model_forward_n2000.pth")

    def other_architecture(checkpoint):  # relabelled, with d_model 64 weights
        config = P1Config(digit_order="forward", train_size=4000, d_model=64)
        checkpoint["model"] = config.build_model().state_dict()

    def relabelled(checkpoint):  # reversed_n4000's weights under forward_n1000's config
        checkpoint["config"] = dataclasses.asdict(P1Config(**P1_RUNS["forward_n1000"]))

    edit_checkpoint(folder / "model_forward_n4000.pth", other_architecture)
    shutil.copy(folder / "model_reversed_n4000.pth", folder / "model_forward_n1000.pth")
    edit_checkpoint(folder / "model_forward_n1000.pth", relabelled)
    edit_checkpoint(folder / "model_reversed_n1000.pth",
                    lambda c: c["config"].update(d_model=64))
    found = rc.recompute("problem1", folder, data, data_sha1=None)
    why = {run: found[run]["test_token_accuracy"]["why"] for run in P1_RUNS}
    assert "not the prescribed run forward_n2000" in why["forward_n2000"]
    assert "another model's weights" in why["forward_n4000"]
    assert "same weights as model_reversed_n4000" in why["forward_n1000"]
    assert "same weights as model_forward_n1000" in why["reversed_n4000"]
    assert "d_model" in why["reversed_n1000"]
    assert found["reversed_n2000"]["test_token_accuracy"]["value"] is not None  # no claim: differs
    for run in ("forward_n1000", "forward_n2000", "forward_n4000", "reversed_n1000"):
        assert {e["status"] for e in found[run].values()} == {"unverified"}, run


def test_problem1_logs_that_are_not_their_checkpoints_are_unverified(data, tmp_path):
    p1_artifacts(tmp_path, data)
    runs = {"forward_n1000": "another run's log", "forward_n2000": "a last point changed",
            "forward_n4000": "a score no split gives", "reversed_n2000": "steps_to_95 invented"}
    shutil.copy(tmp_path / "training_log_reversed_n2000.json",
                tmp_path / "training_log_forward_n1000.json")
    for run in list(runs)[1:]:
        path = tmp_path / f"training_log_{run}.json"
        log = json.loads(path.read_text())
        if run == "forward_n2000":
            log["log"][-1]["val_exact_match"] = 1.0 - log["log"][-1]["val_exact_match"]
            log["steps_to_95"] = steps_to_95(log["log"])
        elif run == "forward_n4000":
            log["log"][3]["val_exact_match"] = 0.123456
        else:
            log["steps_to_95"] = 500
        write_json(path, log)
    found = rc.recompute("problem1", tmp_path, data, data_sha1=None)
    expected = {"forward_n1000": "not the log of its checkpoint",
                "forward_n2000": "not its checkpoint's",
                "forward_n4000": "no model scores", "reversed_n2000": "says steps_to_95"}
    for run, words in expected.items():
        for quantity in graded("problem1")[run]:
            entry = found[run][quantity]
            if quantity.startswith("test_"):
                assert entry["value"] is not None, (run, quantity)  # the weights still count
            else:
                assert entry["status"] == "unverified" and words in entry["why"], (run, entry)


def test_problem1_metrics_that_disagree_with_the_log_differ(data, tmp_path):
    scores = p1_artifacts(tmp_path, data, runs=("forward_n2000",))
    write_json(tmp_path / "metrics.json", {"forward_n2000": {
        "test_exact_match": scores["forward_n2000"][0], "steps_to_95": 450}})
    found = rc.recompute("problem1", tmp_path, data, data_sha1=None)["forward_n2000"]
    assert found["steps_to_95"]["status"] == "claimed"  # only the log states it
    assert found["steps_to_95"]["value"] is None and found["steps_to_95"]["claimed"] == 450
    assert found["test_token_accuracy"]["status"] == "differs"  # metrics.json lacks it
    assert found["test_exact_match"]["status"] == "verified"
    assert found["late_val_exact_match"]["status"] == "claimed"


def test_problem1_hostile_or_damaged_files_are_unverified_never_a_crash(data, tmp_path):
    p1_artifacts(tmp_path, data, runs=("forward_n1000", "forward_n2000", "forward_n4000",
                                       "reversed_n1000"))
    (tmp_path / "model_forward_n1000.pth").write_bytes(b"not an archive")

    class Payload:
        def __reduce__(self):
            return (print, ("a pickle that runs code",))
    buffer = io.BytesIO()
    torch.save({"config": {}, "model": Payload()}, buffer)
    (tmp_path / "model_forward_n2000.pth").write_bytes(buffer.getvalue())
    with open(tmp_path / "model_forward_n4000.pth", "r+b") as f:
        f.truncate(rc.WEIGHTS_BYTES + 1)
    squeezed = tmp_path / "squeezed.zip"
    with zipfile.ZipFile(tmp_path / "model_reversed_n1000.pth") as source, \
            zipfile.ZipFile(squeezed, "w", zipfile.ZIP_DEFLATED) as target:
        for item in source.infolist():
            target.writestr(item.filename, source.read(item))
    squeezed.replace(tmp_path / "model_reversed_n1000.pth")
    (tmp_path / "model_reversed_n2000.pth").symlink_to(tmp_path / "model_reversed_n1000.pth")
    (tmp_path / "metrics.json").write_text("[" * 100_000)
    found = rc.recompute("problem1", tmp_path, data, data_sha1=None)
    why = {run: found[run]["test_token_accuracy"]["why"] for run in P1_RUNS}
    assert "not a torch.save archive" in why["forward_n1000"]
    assert "weights_only=True" in why["forward_n2000"]
    assert "over the" in why["forward_n4000"]
    assert "compressed" in why["reversed_n1000"]
    assert "not a regular file" in why["reversed_n2000"]
    assert statuses(found) == {"unverified"}


# ------------------------------------------------------------------------------ Problem 2
def test_problem2_checkpoints_of_their_schemes_are_verified(data, tmp_path):
    expected = p2_artifacts(tmp_path, data)
    write_json(tmp_path / "metrics.json", {s: {**m, "beyond": 0.5} for s, m in expected.items()})
    found = rc.recompute("problem2", tmp_path, data, data_sha1=None)
    for scheme, metrics in expected.items():
        assert found[scheme]["in_range"]["value"] == metrics["in_range"]
        assert found[scheme]["beyond"]["value"] == metrics["beyond"]
        assert found[scheme]["beyond"]["status"] == "differs"
        for bucket, value in zip(bands.P2_BUCKETS, metrics["beyond_buckets"]):
            assert found[scheme][f"bucket_{bucket}"] == {
                "value": value, "claimed": value, "status": "verified",
                "why": f"model_{scheme}.pth on the test split"}


def test_problem2_weights_of_another_scheme_or_log_are_unverified(data, tmp_path):
    p2_artifacts(tmp_path, data)
    shutil.copy(tmp_path / "model_rotary.pth", tmp_path / "model_none.pth")
    edit_checkpoint(tmp_path / "model_sinusoidal.pth",  # learned's table, sinusoidal's label
                    lambda c: c["model"].update(torch.load(tmp_path / "model_learned.pth",
                                                           weights_only=True)["model"]))
    log = json.loads((tmp_path / "training_log_learned.json").read_text())
    log["log"][-1]["test_accuracy"] = 1.0
    write_json(tmp_path / "training_log_learned.json", log)
    found = rc.recompute("problem2", tmp_path, data, data_sha1=None)
    assert "not the prescribed run none" in found["none"]["in_range"]["why"]
    assert "another model's weights" in found["sinusoidal"]["in_range"]["why"]
    assert "not its checkpoint's" in found["learned"]["beyond"]["why"]
    assert all(e["value"] is not None for e in found["rotary"].values())
    for scheme in ("none", "sinusoidal", "learned"):
        assert {e["status"] for e in found[scheme].values()} == {"unverified"}


@pytest.mark.skipif(not all((results_dir("problem2") / f"model_{s}.pth").exists()
                            for s in POSITIONS), reason="the trained Problem 2 weights "
                    "(make problem2) are not here")
def test_problem2_the_references_own_runs_are_verified():
    found = rc.recompute("problem2", results_dir("problem2"), real_data())
    assert statuses(found) == {"verified"}


# ------------------------------------------------------------------------------ Problem 3
def copy_problem3(folder: Path) -> Path:
    """The committed Problem 3 results (metrics, logs, samples) in folder."""
    folder.mkdir()
    for path in results_dir("problem3").glob("*"):
        if path.is_file() and path.suffix in (".json", ".txt"):
            shutil.copy(path, folder / path.name)
    return folder


def main_checkpoint(folder: Path, **changes) -> dict:
    """model_{MAIN_RUN}.pth in folder: the prescribed configuration of the main run (the
    committed log's, so seed included), its last step and the homework's vocabulary, with
    toy weights that make short samples fast: every step draws "C" (p = 0.73) or EOS
    (0.27), whatever came before. changes: config fields or checkpoint entries to change."""
    from problem3.config import checkpoint_extras
    from provided.smiles import HOMEWORK_TOKENS, SmilesVocab

    log = json.loads((results_dir("problem3") / f"training_log_{rc.MAIN_RUN}.json").read_text())
    saved = {**log["config"], **{k: v for k, v in changes.items() if k in log["config"]}}
    config = rc.P3Config(**saved)
    torch.manual_seed(0)
    model = config.build_model()
    vocab = SmilesVocab(HOMEWORK_TOKENS)
    with torch.no_grad():
        model.head.weight.zero_()
        model.head.bias.fill_(-30.0)
        model.head.bias[vocab.stoi["C"]] = 2.0
        model.head.bias[2] = 1.0  # EOS
    extras = {**checkpoint_extras(vocab, config.steps),
              **{k: v for k, v in changes.items() if k not in log["config"]}}
    (folder / f"model_{rc.MAIN_RUN}.pth").write_bytes(checkpoint_bytes(config, model, **extras))
    return extras


P3_MAIN_QUANTITIES = ("well_formed", "validity", "uniqueness", "novelty")


def toy_scores(folder: Path, data: Path) -> dict:
    """What the grader must find for main_checkpoint's weights in folder: the reference
    sampler's draw at seed SAMPLE_SEED, scored (computed here by its own steps)."""
    from problem3.sample import sample_run

    model, vocab = rc.load_main(folder)
    samples = sample_run(model, vocab, rc.NUM_SAMPLES, 1.0, rc.SAMPLE_SEED, "cpu")
    assert all(set(s) <= {"C"} for s in samples), "the toy weights draw only C and EOS"
    found = rc.scored(samples, (data / "smiles" / "train.txt").read_text().split())
    return {q: found[q] for q in P3_MAIN_QUANTITIES}


@pytest.fixture
def toy(tmp_path):
    """The committed Problem 3 results with main_checkpoint's weights beside them."""
    folder = copy_problem3(tmp_path / "toy")
    main_checkpoint(folder)
    return folder


def test_problem3_main_run_is_scored_from_the_grader_s_own_draw_of_its_weights(data, toy):
    found = rc.recompute("problem3", toy, data, data_sha1=None)["main"]
    expected = toy_scores(toy, data)
    for quantity, entry in found.items():
        assert entry["value"] == expected[quantity], (quantity, entry)
        assert f"drew from model_{rc.MAIN_RUN}.pth" in entry["why"]
    # the committed samples come from the reference's weights, not these: the file is
    # reported as not theirs, and the scores are the weights' (validity 1, all "C...C")
    assert found["validity"]["value"] > 0.5 > found["uniqueness"]["value"]
    assert "is not a sample of these weights" in found["validity"]["why"]
    assert "earns nothing by itself" in found["validity"]["why"]
    again = rc.recompute("problem3", toy, data, data_sha1=None)["main"]
    assert again == found, "the grader's draw must be the same every time"


def test_problem3_the_committed_logs_are_verified_and_samples_alone_earn_nothing(tmp_path):
    data = real_data()
    found = rc.recompute("problem3", results_dir("problem3"), data)
    weights = results_dir("problem3") / f"model_{rc.MAIN_RUN}.pth"
    final = json.loads((results_dir("problem3") / "metrics.json").read_text())["main"]
    for quantity, entry in found["main"].items():
        if weights.exists():  # after `make problem3`: the grader's draw is sample.py's
            assert entry["status"] == "verified", entry
            assert entry["value"] == final["by_step"][-1][quantity]
        else:  # a fresh clone: the committed samples file has no weights behind it
            assert entry["status"] == "unverified" and weights.name in entry["why"], entry
    from_logs = bands.problem3_quantities(results_dir("problem3"))
    for cell, quantities in found.items():
        if cell == "main":
            continue
        for quantity, entry in quantities.items():
            assert entry["status"] == "claimed"  # only a log states it: no points
            assert entry["value"] == from_logs[cell][quantity], (cell, quantity)


@pytest.mark.parametrize("changes, needle", [
    ({"seed": 1}, "is not the log of its checkpoint"),  # another seed's weights, this log
    ({"lr": 0.01, "warmup": 0, "steps": 1500, "checkpoint_every": 0},
     "is not the prescribed run"),  # another run's weights under this run's name
    ({"step": 3000}, "is not the run's last step"),
    ({"vocab": ["C", "c"]}, "the homework's vocabulary"),
])
def test_problem3_main_weights_of_another_seed_run_step_or_vocabulary_are_unverified(
        data, toy, changes, needle):
    main_checkpoint(toy, **changes)
    found = rc.recompute("problem3", toy, data, data_sha1=None)["main"]
    for entry in found.values():
        assert entry["status"] == "unverified" and needle in entry["why"], entry


def test_problem3_main_weights_that_are_damaged_are_unverified(data, toy):
    path = toy / f"model_{rc.MAIN_RUN}.pth"
    path.write_bytes(path.read_bytes()[:5000])
    found = rc.recompute("problem3", toy, data, data_sha1=None)["main"]
    assert {e["status"] for e in found.values()} == {"unverified"}


def test_problem3_sweep_logs_must_be_their_cells_and_consistent(data, tmp_path):
    folder = copy_problem3(tmp_path / "p3")
    edits = {"pre_lr0.001_w0": lambda log: log["config"].update(lr=0.01),
             "pre_lr0.01_w0": lambda log: log.update(final_val_loss=0.5),
             "pre_lr0.03_w0": lambda log: log["log"][4].update(lr=0.5),
             "post_lr0.001_w0": lambda log: log["val"].pop(2),
             "post_lr0.01_w0": lambda log: log["config"].update(d_model=64)}
    for cell, edit in edits.items():
        path = folder / f"training_log_{cell}_s1500.json"
        log = json.loads(path.read_text())
        edit(log)
        write_json(path, log)
    metrics = json.loads((folder / "metrics.json").read_text())
    row = next(r for r in metrics["sweep"] if r["run"] == "pre_lr0.01_w500_s1500")
    row["final_val_loss"], row["trains"] = 3.0, False
    write_json(folder / "metrics.json", metrics)
    found = rc.recompute("problem3", folder, data, data_sha1=None)
    words = {"pre_lr0.001_w0": "not the prescribed run", "pre_lr0.01_w0": "final_val_loss",
             "pre_lr0.03_w0": "learning rate", "post_lr0.001_w0": "validate every",
             "post_lr0.01_w0": "d_model"}
    for cell, needle in words.items():
        for entry in found[cell].values():
            assert entry["status"] == "unverified" and needle in entry["why"], (cell, entry)
    lied = found["pre_lr0.01_w500"]
    log = json.loads((folder / "training_log_pre_lr0.01_w500_s1500.json").read_text())
    assert lied["final_val_loss"]["status"] == lied["trains"]["status"] == "claimed"
    assert lied["final_val_loss"]["value"] == log["final_val_loss"]
    assert lied["trains"] == {**lied["trains"], "value": 1.0, "claimed": 0.0}
    assert found["pre_lr0.03_w500"]["trains"]["status"] == "claimed"


def test_problem3_a_samples_file_no_model_of_the_homework_wrote_is_not_compared(data, toy):
    samples = (results_dir("problem3") / f"samples_{rc.MAIN_RUN}.txt").read_text()
    lines = samples[:-1].split("\n")
    path = toy / f"samples_{rc.MAIN_RUN}.txt"
    def edited(number: int, line: str) -> str:
        return "\n".join(lines[:number - 1] + [line] + lines[number:]) + "\n"
    expected = toy_scores(toy, data)
    for text, needle in [("\n".join(lines[:-1]) + "\n", "1000 lines"),
                         (edited(6, "C[NH3+]C"), "line 6"), (edited(8, "C" * 51), "over 50"),
                         (samples[:-1], "1000 lines")]:
        path.write_text(text)
        found = rc.recompute("problem3", toy, data, data_sha1=None)["main"]
        assert {q: e["value"] for q, e in found.items()} == expected
        assert "was not compared" in found["validity"]["why"]
        assert needle in found["validity"]["why"], found["validity"]["why"]


def test_problem3_metrics_that_disagree_with_the_grader_s_draw_differ(data, toy):
    expected = toy_scores(toy, data)
    write_json(toy / "metrics.json", {"main": {"by_step": [
        {**expected, "novelty": 1.0 - expected["novelty"] + 0.5}]}})
    found = rc.recompute("problem3", toy, data, data_sha1=None)["main"]
    assert found["novelty"]["status"] == "differs"
    assert found["validity"] == {**found["validity"], "value": expected["validity"],
                                 "status": "verified"}


def test_novelty_is_exact_against_the_whole_canonical_training_set(data):
    """novel_matches equals the brute-force intersection, with training molecules written
    in other SMILES (random atom orders, Kekule forms) among the samples."""
    from rdkit import Chem

    train = [line for line in (data / "smiles" / "train.txt").read_text().split("\n") if line]
    rewritten = []
    for index, smiles in enumerate(train[:60]):
        molecule = Chem.MolFromSmiles(smiles)
        if index % 2:
            Chem.Kekulize(molecule, clearAromaticFlags=True)
        rewritten.append(Chem.MolToSmiles(molecule, doRandom=True, kekuleSmiles=bool(index % 2)))
    samples = rewritten + train[100:110] + ["CCO", "c1ccccc1", "C1CC1", "N#Cc1ccccc1", ""]
    distinct = {c for c in map(canonical, samples) if c is not None}
    brute = distinct & {c for c in map(canonical, train) if c is not None}
    assert rc.novel_matches(distinct, train) == brute
    assert len(brute) >= 70
    whole = {c for c in map(canonical, train) if c is not None}
    assert sample_metrics(samples, rc.novel_matches(distinct, train)) == \
        sample_metrics(samples, whole)


HOSTILE = (None, "x", [], {}, -1, 10**400, True, [{}], {"step": 100})


def mutations(log: dict):
    """log with one field replaced by a value of another type, each field at each level."""
    for key in log:
        for value in HOSTILE:
            yield {**log, key: value}
    for list_key in [k for k, v in log.items() if isinstance(v, list) and v]:
        for point_key in log[list_key][0]:
            for value in HOSTILE:
                points = [dict(p) for p in log[list_key]]
                points[1 % len(points)][point_key] = value
                yield {**log, list_key: points}
    for config_key in log.get("config", {}):
        for value in HOSTILE:
            yield {**log, "config": {**log["config"], config_key: value}}


def test_a_log_of_any_shape_is_judged_never_a_crash(data, tmp_path):
    p3_log = json.loads((results_dir("problem3") / "training_log_pre_lr0.01_w500_s1500.json")
                        .read_text())
    prescribed = rc.P3Config(norm="pre", lr=0.01, warmup=500, vocab_size=rc.P3_VOCAB_SIZE)
    path = tmp_path / "training_log_pre_lr0.01_w500_s1500.json"
    for log in mutations(p3_log):
        write_json(path, log)
        entries = rc.p3_cell(path, prescribed, None)
        assert {e["status"] for e in entries.values()} <= {"verified", "differs", "unverified"}
    p1_artifacts(tmp_path, data, runs=("forward_n2000",))
    config = rc.P1Config(**P1_RUNS["forward_n2000"])
    model, _ = rc.load_run("problem1", tmp_path / "model_forward_n2000.pth", rc.P1Config, config)
    path = tmp_path / "training_log_forward_n2000.json"
    val = AdditionDataset(data, "val", "forward")
    original = json.loads(path.read_text())
    for log in mutations(original):
        write_json(path, log)
        try:
            rc.p1_log(path, config, model, val)
        except rc.Unverified:
            continue
        untouched = [{k: v for k, v in p.items() if k != "train_loss"} for p in log["log"]]
        assert {**log, "log": untouched} == {**original, "log": [
            {k: v for k, v in p.items() if k != "train_loss"} for p in original["log"]]}, \
            "only the training loss, which nothing graded reads, may change unnoticed"


def test_the_teacher_forced_exact_match_is_greedy_decodings(data):
    """greedy_exact_match rests on this: fed its own greedy prefix, the decoder's argmax
    (over the digits) is the greedy prediction at every position, so a sum is right
    greedily iff it is right after the true prefix."""
    from problem1.model import NUM_DIGITS

    for seed, order in enumerate(("forward", "reversed", "forward")):
        torch.manual_seed(seed)
        model = P1Config(digit_order=order, train_size=1000).build_model().eval()
        split = AdditionDataset(data, "train", order)
        with torch.inference_mode():
            greedy = model.generate(split.src)
            prefix = torch.cat([split.tgt_in[:, :1], greedy[:, :-1]], dim=1)
            forced = model(split.src, prefix)[0][..., :NUM_DIGITS].argmax(dim=-1)
        assert torch.equal(forced, greedy)
        assert rc.greedy_exact_match(model, split) == validate(model, split)[0]
