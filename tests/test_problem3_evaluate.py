"""Problem 3, Part E: sample metrics, the outcome breakdown by bins, the sweep table, and
evaluate.py end to end on runs written by the test. The tests answer Part D's is_well_formed
and max_open_ring_span from tables (stubs.Answers), and the end-to-end run uses stand-ins
of Parts A-D (tests/tiny_problem3.py), so that they grade Part E's functions alone."""

import json
from pathlib import Path

import pytest

from problem3.evaluate import canonical  # given code (RDKit's canonical SMILES): trusted
from provided.visualize import main as visualize_main
from tests.seam import submission
from tests.tiny import run_script, smiles_data
from tests.tiny_problem3 import stand_in_parts_a_and_b, write_run

pytestmark = pytest.mark.p3e

ev = submission("problem3.evaluate")
sample = submission("problem3.sample")
stubs = submission("tests.tiny_problem3")  # stand-ins, next to the code under test

FIXTURES = Path(__file__).parent / "fixtures"
# is_well_formed (Part D) of the strings below, worked out by hand
WELL_FORMED = {"CCO": True, "OCC": True, "C1CC": False, "": False, "c1ccccc1": True,
               "CC(": False, "CCN": True, "NCC": True, "c1cccc1": True, "C1": False,
               "C1CC1": True}


@pytest.fixture
def data_dir(tmp_path) -> Path:
    """A data folder holding the 400 + 100 fixture strings as the SMILES splits."""
    return smiles_data(tmp_path)


@pytest.fixture
def well_formed_by_hand(monkeypatch):
    """is_well_formed answered from WELL_FORMED, next to the code under test."""
    monkeypatch.setattr(ev, "is_well_formed", stubs.Answers(WELL_FORMED))


def test_validity_uniqueness_novelty_by_hand(well_formed_by_hand):
    samples = ["CCO", "OCC", "C1CC", "", "c1ccccc1", "CC(", "NCC", "c1cccc1"]
    train = {canonical("CCN")}  # NCC is CCN written otherwise
    m = ev.sample_metrics(samples, train)
    assert m["num_samples"] == 8, "num_samples must count every sample, empty ones included"
    why = {5 / 8: "it counts the well-formed samples: valid means canonical(s) is not None",
           4 / 7: "is it over the non-empty samples only?"}
    assert float(m["validity"]) == pytest.approx(4 / 8), (  # CCO, OCC, benzene, NCC
        "validity must be the valid samples (canonical(s) is not None) over all samples, "
        f"empty ones included (4 / 8 here), not {float(m['validity']):.4f}: "
        + next((w for v, w in why.items() if float(m["validity"]) == pytest.approx(v)),
               "is it over the non-empty samples only?"))
    assert float(m["well_formed"]) == pytest.approx(5 / 8), (  # the four and invalid c1cccc1
        "well_formed must be the well-formed samples over all samples, valid or not")
    def reading(value: float, readings: dict) -> str:
        """The usual mistake that gives value, or the values the usual mistakes give."""
        same = [why for v, why in readings.items() if value == pytest.approx(v)]
        return same[0] if same else "none of " + "; ".join(
            f"{v:.4f} ({why})" for v, why in readings.items())
    uniqueness, novelty = float(m["uniqueness"]), float(m["novelty"])
    assert uniqueness == pytest.approx(3 / 4), (  # OCC is CCO
        "uniqueness must be the distinct canonical SMILES over the valid samples (3 / 4 here), "
        f"not {uniqueness:.4f}: it is " + reading(uniqueness, {
            3 / 8: "over all samples, not the valid ones",
            1.0: "counted on the raw strings (CCO and OCC are one molecule)"}))
    assert novelty == pytest.approx(2 / 3), (  # NCC is in the training set
        "novelty must be the distinct valid molecules not in the training set over all "
        f"distinct valid molecules (2 / 3 here), not {novelty:.4f}: it is " + reading(novelty, {
            3 / 4: "over the valid samples, duplicates counted",
            1.0: "without the training set (every molecule counted novel)",
            4 / 3: "the samples compared as written, not as canonical SMILES (NCC is the "
                   "training set's CCN)"}))
    assert ev.sample_metrics(["CC(", "C1"], train)["uniqueness"] is None, (
        "uniqueness must be None when no sample is valid")


def test_breakdown_bins_and_fractions(well_formed_by_hand):
    samples = ["C1CC1", "c1ccccc1", "c1cccc1", "CC("]
    ring_span = stubs.Answers({"C1CC1": 3, "c1ccccc1": 6, "c1cccc1": 5, "CC(": 0})  # by hand
    rows = ev.breakdown(samples, ring_span, [(0, 0), (1, 5), (6, None)])
    assert [r["bin"] for r in rows] == ["0", "1-5", "6+"], (
        "breakdown's rows must be labelled by bin_label, in the order of the bins")
    assert [r["count"] for r in rows] == [1, 2, 1], (
        "breakdown must count the samples of each bin, both bounds inclusive and None open")
    assert rows[1]["valid"] == 0.5 and rows[1]["well_formed_invalid"] == 0.5, (
        "a bin's fractions must be over the bin's own samples (1 valid of the 2 in bin 1-5), "
        f"not over all samples: got {rows[1]}")
    assert rows[0]["ill_formed"] == 1.0, (
        "a bin's fractions must be over the bin's own samples (1 ill-formed of 1 in bin 0)")


def test_sweep_entry_early_gradient_statistics():
    log = {"run": "post_lr0.03_w0_s1500",
           "config": {"norm": "post", "lr": 0.03, "warmup": 0},
           "log": [{"step": 50, "head_grad_norm": 2.0}, {"step": 100, "head_grad_norm": 4.0},
                   {"step": 150, "head_grad_norm": 100.0}],
           "final_val_loss": 2.5}
    entry = ev.sweep_entry(log)
    assert (entry["run"], entry["norm"], entry["lr"], entry["warmup"]) == (
        "post_lr0.03_w0_s1500", "post", 0.03, 0), (
        "sweep_entry must copy run from the log and norm, lr and warmup from its config")
    assert entry["final_val_loss"] == 2.5, "sweep_entry must copy the log's final_val_loss"
    assert entry["head_grad_norm_mean_100"] == 3.0 and entry["head_grad_norm_max_100"] == 4.0, (
        "head_grad_norm_mean_100 and head_grad_norm_max_100 must be the mean and the maximum "
        "of the head gradient norms logged up to step 100 only: is the maximum computed as a "
        "mean, or are later steps included?")
    assert not entry["trains"], "trains must be False for a final loss above the threshold"
    assert ev.sweep_entry({**log, "final_val_loss": 1.99})["trains"], (
        "trains must be True for a final loss below the threshold")


# max_open_ring_span (Part D) of the strings of WELL_FORMED, worked out by hand
RING_SPANS = {"CCO": 0, "OCC": 0, "C1CC": 0, "": 0, "c1ccccc1": 6, "CC(": 0, "CCN": 0, "NCC": 0,
              "c1cccc1": 5, "C1": 0, "C1CC1": 3}


def logged(steps: list[int], loss: float) -> dict:
    """A training log's points, as train.py logs them, with the same loss everywhere."""
    return {"log": [{"step": step, "train_loss": loss, "lr": 1e-3, "head_grad_norm": 0.5,
                     "total_grad_norm": 1.0} for step in steps],
            "val": [{"step": steps[-1], "val_loss": loss}], "final_val_loss": loss}


def test_evaluate_end_to_end(data_dir, tmp_path, capsys, monkeypatch, well_formed_by_hand):
    # Parts A-D as stand-ins (tests/tiny_problem3.py): the vocabulary, the validation split and
    # the model, a sampler that draws the strings of WELL_FORMED in turn, and Part D's checks
    # answered from tables; the runs are written here as train.py writes them
    stand_in_parts_a_and_b(monkeypatch, scripts=("problem3.evaluate",))
    monkeypatch.setattr(sample, "generate_batch", stubs.ScriptedSamples(list(WELL_FORMED)))
    monkeypatch.setattr(ev, "max_open_ring_span", stubs.Answers(RING_SPANS))
    results = tmp_path / "results"
    run = write_run(results, logged([2, 4, 6], 2.5), checkpoints=[3], norm="pre", lr=1e-3,
                    warmup=3, steps=6, checkpoint_every=3, batch_size=16)
    for lr in (1e-3, 3e-2):  # two 'sweep' runs of 4 steps
        write_run(results, logged([2, 4], 3.0), norm="post", lr=lr, steps=4, batch_size=16)
    uses = "the Part E functions, on stand-ins of Parts A-D (tests/tiny_problem3.py)"
    run_script("problem3/sample.py", sample.main,
               ["--run", run, "--num_samples", "50", "--results_dir", str(results),
                "--data_dir", str(data_dir), "--threads", "1"], uses)
    samples = (results / f"samples_{run}.txt").read_text().split("\n")[:-1]
    capsys.readouterr()

    run_script("problem3/evaluate.py", ev.main,
               ["--run", run, "--num_samples", "50", "--sweep_steps", "4", "--results_dir",
                str(results), "--data_dir", str(data_dir), "--threads", "1"],
               uses)
    metrics = json.loads((results / "metrics.json").read_text())
    assert [e["run"] for e in metrics["sweep"]] == ["post_lr0.001_w0_s4", "post_lr0.03_w0_s4"]
    assert all(e["head_grad_norm_mean_100"] is None for e in metrics["sweep"])  # 4 steps only
    main = metrics["main"]
    assert [r["step"] for r in main["by_step"]] == [3, 6]
    assert [r["temperature"] for r in main["by_temperature"]] == [0.7, 1.0, 1.3]
    assert main["by_step"][-1] == {"step": 6, **{k: v for k, v in
                                   main["by_temperature"][1].items() if k != "temperature"}}
    # the final model's T = 1 samples are sample.py's
    assert main["by_step"][-1]["validity"] == pytest.approx(
        sum(canonical(s) is not None for s in samples) / 50)
    assert sum(r["count"] for r in main["by_length"]) == 50
    assert sum(r["count"] for r in main["by_span"]) == 50

    figures = tmp_path / "figures"
    assert visualize_main(["problem3", "--input_dir", str(results), "--out_dir",
                           str(figures)]) == 0
    assert len(list(figures.glob("*.png"))) >= 5


def test_breakdown_gives_an_empty_bin_none_fractions(well_formed_by_hand):
    samples = ["CCO", "C1CC", "CC("]
    length = stubs.Answers({"CCO": 3, "C1CC": 4, "CC(": 3})  # by hand
    rows = ev.breakdown(samples, length, [(3, 3), (5, 9), (4, None)])
    assert [r["count"] for r in rows] == [2, 0, 1], (
        "breakdown must count the samples of each bin, both bounds inclusive and None open")
    assert all(rows[1][o] is None for o in ("valid", "well_formed_invalid", "ill_formed")), (
        "breakdown must give an empty bin the fractions None (nothing to divide by), not 0: "
        f"got {rows[1]}")
    assert (rows[0]["valid"], rows[0]["ill_formed"]) == (0.5, 0.5), (
        "a bin's fractions must be over the bin's own samples, not all samples")


def test_sweep_entry_threshold_missing_points_and_a_diverged_run():
    def log(final, points):
        return {"run": "post_lr0.01_w0_s1500", "config": {"norm": "post", "lr": 0.01,
                                                          "warmup": 0},
                "log": [{"step": s, "head_grad_norm": g} for s, g in points],
                "final_val_loss": final}

    entry = ev.sweep_entry(log(2.0, [(50, 1.0), (100, 2.0)]))
    assert not entry["trains"], (
        "trains must need a final validation loss strictly below the threshold (2.0): is the "
        "threshold itself counted as training?")
    entry = ev.sweep_entry(log(None, [(50, None), (100, None)]))
    assert entry["trains"] is not None and not entry["trains"], (
        f"trains must be False (not None) for a run without a final loss, got {entry['trains']}")
    assert entry["final_val_loss"] is None
    for points in ([(50, 1.0)], [(50, 1.0), (100, None)], [(100, 3.0), (150, 1.0)]):
        entry = ev.sweep_entry(log(1.5, points))
        missing = ("head_grad_norm_mean_100 and head_grad_norm_max_100 must be None unless the "
                   "points at steps 50 and 100 are both logged and finite: are they computed "
                   f"over the points there are? log points {points}")
        assert entry["head_grad_norm_mean_100"] is None, missing
        assert entry["head_grad_norm_max_100"] is None, missing
