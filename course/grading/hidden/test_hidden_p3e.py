"""Hidden tests, Problem 3 Part E: sample metrics at their edges (RDKit decides what is the
same molecule), the breakdown with an empty bin, and sweep entries of incomplete or
diverged logs. Part D's is_well_formed is answered from a table worked out by hand."""

import pytest
from rdkit import Chem

from tests.seam import submission

pytestmark = pytest.mark.p3e

ev = submission("problem3.evaluate")
stubs = submission("tests.tiny_problem3")  # stand-ins, next to the code under test
WELL_FORMED = {"C1CC": False, "CC(": False, "": False, "c1cccc1": True, "c1ccccc1": True,
               "C1=CC=CC=C1": True, "OCC": True, "CCO": True, "CCN": True, "C": True,
               "CC": True, "C1CC1": True}


@pytest.fixture
def well_formed_by_hand(monkeypatch):
    """is_well_formed answered from WELL_FORMED, next to the code under test."""
    monkeypatch.setattr(ev, "is_well_formed", stubs.Answers(WELL_FORMED))


def canon(smiles: str) -> str:
    return Chem.MolToSmiles(Chem.MolFromSmiles(smiles))


def test_no_valid_sample(well_formed_by_hand):
    m = ev.sample_metrics(["C1CC", "CC(", "", "c1cccc1"], {canon("CCO")})
    assert m["num_samples"] == 4
    assert float(m["validity"]) == 0.0
    assert float(m["well_formed"]) == pytest.approx(1 / 4)  # c1cccc1 only
    assert m["uniqueness"] is None and m["novelty"] is None


def test_the_same_molecule_written_twice_and_novelty_against_canonical_training(
        well_formed_by_hand):
    samples = ["c1ccccc1", "C1=CC=CC=C1", "OCC", "CCO", "CCN", "CCN"]  # 3 distinct molecules
    train = {canon("NCC"), canon("CCCC")}
    m = ev.sample_metrics(samples, train)
    assert float(m["validity"]) == 1.0 and float(m["well_formed"]) == 1.0
    assert float(m["uniqueness"]) == pytest.approx(3 / 6)
    assert float(m["novelty"]) == pytest.approx(2 / 3)  # ethylamine is in the training set
    m = ev.sample_metrics(["CCN"], train)
    assert float(m["novelty"]) == 0.0 and float(m["uniqueness"]) == 1.0


def test_breakdown_with_an_empty_bin_and_an_open_ended_one(well_formed_by_hand):
    samples = ["C", "CC", "CCO", "C1CC1", "CC(", "c1cccc1"]
    length = submission("builtins").len  # the key, next to the code under test
    rows = ev.breakdown(samples, length, [(0, 2), (3, 3), (4, 4), (5, None)])
    assert [r["bin"] for r in rows] == ["0-2", "3", "4", "5+"], (
        "breakdown must label each bin with bin_label, one row per bin in the order given")
    assert [r["count"] for r in rows] == [2, 2, 0, 2], (
        "breakdown must count the samples in each bin, both bounds inclusive and None "
        "meaning no upper bound: are the bounds exclusive, or the open-ended bin mishandled?")
    fractions = ("breakdown must give each outcome's fraction of the bin's samples: is it over "
                 "all samples instead of the bin's?")
    assert rows[0]["valid"] == 1.0 and rows[0]["ill_formed"] == 0.0, fractions
    assert rows[1]["valid"] == 0.5 and rows[1]["ill_formed"] == 0.5, fractions  # CCO, CC(
    empty = "an empty bin's fractions must be None, not 0"
    assert rows[2]["valid"] is None and rows[2]["ill_formed"] is None, empty
    assert rows[2]["well_formed_invalid"] is None, empty
    assert rows[3]["valid"] == 0.5 and rows[3]["well_formed_invalid"] == 0.5, fractions


def log(final, early):
    return {"run": "pre_lr0.01_w500_s1500", "config": {"norm": "pre", "lr": 0.01, "warmup": 500,
                                                       "steps": 1500, "batch_size": 128},
            "log": [{"step": step, "head_grad_norm": g, "train_loss": 1.0}
                    for step, g in early],
            "val": [], "final_val_loss": final}


def test_sweep_entry_of_a_diverged_run():
    entry = ev.sweep_entry(log(None, [(50, None), (100, None), (150, None)]))
    assert entry["final_val_loss"] is None
    assert entry["trains"] is not None and not entry["trains"], (
        "trains must be False (not None) for a run without a final validation loss")
    assert entry["head_grad_norm_mean_100"] is None and entry["head_grad_norm_max_100"] is None
    assert (entry["run"], entry["norm"], entry["lr"], entry["warmup"]) == (
        "pre_lr0.01_w500_s1500", "pre", 0.01, 500)


def test_sweep_entry_threshold_and_missing_points():
    assert not ev.sweep_entry(log(2.0, [(50, 1.0), (100, 3.0)]))["trains"], (  # below 2.0 only
        "trains must need a final loss strictly below TRAIN_THRESHOLD: is a loss equal to the "
        "threshold counted as training?")
    entry = ev.sweep_entry(log(1.2, [(50, 1.0), (100, 3.0), (150, 8.0), (200, 9.0)]))
    assert entry["trains"], "trains must be True for a final loss below TRAIN_THRESHOLD"
    early_only = ("the early gradient statistics must use the log points of EARLY_STEPS only: "
                  "are later points included?")
    assert float(entry["head_grad_norm_mean_100"]) == pytest.approx(2.0), early_only
    assert float(entry["head_grad_norm_max_100"]) == pytest.approx(3.0), early_only
    for early in ([(50, 1.0)], [(50, 1.0), (100, None)], [(100, 3.0), (150, 1.0)]):
        entry = ev.sweep_entry(log(1.2, early))
        missing = ("the early gradient statistics must be None unless every point of "
                   "EARLY_STEPS is logged and finite: are they taken over the finite points "
                   f"only?\n{early}")
        assert entry["head_grad_norm_mean_100"] is None, missing
        assert entry["head_grad_norm_max_100"] is None, missing
