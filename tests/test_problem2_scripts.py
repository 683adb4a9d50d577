"""Problem 2, Parts D and E: train.py and evaluate.py on tiny data, their helpers, figures."""

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from problem2 import evaluate, train
from problem2.dataset import IGNORE_INDEX
from problem2.model import POSITIONS, OffsetRetrievalModel
from provided.plots.problem2 import make_figures

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def problem2_runs(tmp_path_factory):
    """Tiny data (40 train sequences of 64: one step per epoch; 6 test sequences of 128),
    the four schemes trained for 3 steps, then evaluate.py: (data_dir, results_dir)."""
    root = tmp_path_factory.mktemp("problem2")
    rng = np.random.default_rng(0)
    (root / "data" / "offset").mkdir(parents=True)
    np.save(root / "data" / "offset" / "train.npy", rng.integers(0, 16, size=(40, 64)))
    np.save(root / "data" / "offset" / "test.npy", rng.integers(0, 16, size=(6, 128)))
    common = ["--data_dir", str(root / "data"), "--results_dir", str(root / "results"),
              "--device", "cpu", "--threads", "1"]
    for position in POSITIONS:
        assert train.main(["--position", position, "--steps", "3", *common]) == 0
    assert evaluate.main(common[:6]) == 0
    return root / "data", root / "results"


def read(path: Path):
    return json.loads(path.read_text())


# --- train.py -----------------------------------------------------------------------------


def test_loss_and_correct_by_hand():
    # Two positions with a target (classes 0 and 1), one ignored.
    logits = torch.tensor([[[2.0, 0.0], [0.0, 1.0], [5.0, 0.0]]])  # [1, 3, 2]
    targets = torch.tensor([[0, 0, IGNORE_INDEX]])
    loss_sum, correct, count = train.loss_and_correct(logits, targets)
    expected = -math.log(math.exp(2) / (math.exp(2) + 1)) - math.log(1 / (1 + math.e))
    assert loss_sum.item() == pytest.approx(expected, rel=1e-6)
    assert (correct, count) == (1, 2)


def test_training_log(problem2_runs):
    _, results = problem2_runs
    for position in POSITIONS:
        log = read(results / f"training_log_{position}.json")
        assert log["run"] == position
        assert log["config"]["lr"] == 1e-3 and log["config"]["batch_size"] == 64
        assert log["config"]["epochs"] == 5 and log["config"]["d_model"] == 64
        assert [r["epoch"] for r in log["log"]] == [1, 2, 3]
        assert [r["step"] for r in log["log"]] == [1, 2, 3]
        for record in log["log"]:
            for key in ("train_loss", "train_accuracy", "test_loss", "test_accuracy"):
                assert math.isfinite(record[key])
            assert 0 <= record["train_accuracy"] <= 1 and 0 <= record["test_accuracy"] <= 1
        assert (results / f"model_{position}.pth").exists()


def test_training_loss_goes_down_and_is_deterministic(problem2_runs, tmp_path):
    data, results = problem2_runs
    args = ["--position", "rotary", "--steps", "3", "--data_dir", str(data),
            "--results_dir", str(tmp_path), "--device", "cpu", "--threads", "1"]
    assert train.main(args) == 0
    first = (tmp_path / "training_log_rotary.json").read_text()
    assert first == (results / "training_log_rotary.json").read_text()
    losses = [r["train_loss"] for r in json.loads(first)["log"]]
    assert losses[-1] < losses[0]


def test_train_missing_data_fails_cleanly(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        train.main(["--position", "none", "--data_dir", str(tmp_path),
                    "--results_dir", str(tmp_path / "r")])
    assert exit_info.value.code != 0
    assert "generate_datasets.py" in capsys.readouterr().err


def test_scripts_run_from_inside_problem2():
    for script in ("train.py", "evaluate.py"):
        done = subprocess.run([sys.executable, script, "--help"], cwd=REPO / "problem2",
                              capture_output=True, text=True)
        assert done.returncode == 0 and "usage" in done.stdout


# --- evaluate.py helpers ------------------------------------------------------------------


def test_accuracy_over_and_position_metrics_by_hand():
    T = 128
    count = torch.ones(T)
    count[:7] = 0
    correct = torch.zeros(T)
    correct[7:64] = 1  # everything right in range
    correct[64:80] = 1  # first beyond bucket right, the rest wrong
    m = evaluate.position_metrics(correct, count)
    assert m["in_range"] == 1.0
    assert m["beyond"] == pytest.approx(0.25)
    assert m["beyond_buckets"] == [1.0, 0.0, 0.0, 0.0]
    assert m["buckets"] == [1.0] * 4 + [1.0, 0.0, 0.0, 0.0]
    assert evaluate.accuracy_over(correct, count, 0, 7) is None
    assert evaluate.accuracy_over(correct, count, 76, 84) == pytest.approx(0.5)


class ReadsKeyAtDistance(torch.nn.Module):
    """Stub model: query i attends only to key i - distance (to itself when i < distance)
    and predicts token 0 everywhere."""

    def __init__(self, distance: int):
        super().__init__()
        self.distance = distance

    def forward(self, tokens, return_attention=False):
        B, T = tokens.shape
        queries = torch.arange(T)
        keys = torch.where(queries >= self.distance, queries - self.distance, queries)
        weights = torch.nn.functional.one_hot(keys, T).float().expand(B, T, T)
        logits = torch.zeros(B, T, 16)
        logits[..., 0] = 1.0
        return (logits, weights) if return_attention else logits


def test_per_position_counts_with_stub_models():
    tokens = torch.tensor([[0] * 64 + [1] * 64, [1] * 128])
    targets = torch.full_like(tokens, IGNORE_INDEX)
    targets[:, 7:] = tokens[:, :-7]
    for distance, expected in [(7, (1.0, 0.0, 0.0)), (8, (0.0, 56 / 57, 0.0)),
                               (70, (0.0, 0.0, 58 / 64))]:
        model = ReadsKeyAtDistance(distance)
        counts = evaluate.per_position_counts(model, tokens, targets, batch_size=1)
        assert counts["count"].tolist() == [0] * 7 + [2] * 121
        m = evaluate.position_metrics(counts["correct"], counts["count"])
        # Token 0 is the target in sequence 0 at positions 7..70: 57 + 7 of 121 targets.
        assert m["in_range"] == pytest.approx(57 / 114) and m["beyond"] == pytest.approx(7 / 128)
        attention = evaluate.attention_metrics(
            evaluate.attention_tallies(model, tokens, targets, 7), counts["count"])
        got = (attention["on_target"]["in_range"], attention["on_neighbours"]["in_range"],
               attention["on_unseen_distances"]["beyond"])
        assert got == pytest.approx(expected)


def test_bag_of_tokens_ceiling_by_hand():
    # k = 1, tokens 0 0 1 1: at i = 1 the bag {0} -> 1; i = 2 {0, 0} -> 1; i = 3 {0, 0, 1} -> 2/3.
    ceiling = evaluate.bag_of_tokens_ceiling(torch.tensor([[0, 0, 1, 1]]), k=1)
    assert math.isnan(ceiling[0])
    assert ceiling[1:].tolist() == pytest.approx([1.0, 1.0, 2 / 3])


def test_position_score_margins_by_hand():
    # sinusoidal, W_q = W_k = identity, no biases: S[i, j] = PE_i . PE_j / 8
    # = sum_m cos((i - j) omega_m) / 8, largest at j = i, so the margin at every query is
    # S at distance 7 minus S at distance 0 = (sum_m cos(7 omega_m) - 32) / 8.
    model = OffsetRetrievalModel("sinusoidal")
    for layer in (model.W_q, model.W_k):
        torch.nn.init.eye_(layer.weight)
        torch.nn.init.zeros_(layer.bias)
    margins = evaluate.position_score_margins(model, 128, 7)
    expected = (sum(math.cos(7 * 10000 ** (-2 * m / 64)) for m in range(32)) - 32) / 8
    assert torch.isnan(margins[:7]).all()
    torch.testing.assert_close(margins[7:], torch.full((121,), expected), atol=1e-4, rtol=0)


def test_learned_table_drift_by_hand():
    initial = torch.zeros(128, 2)
    trained = initial.clone()
    trained[0] = torch.tensor([3.0, 4.0])
    trained[1] = torch.tensor([0.0, 1.0])
    drift = evaluate.learned_table_drift(trained, initial)
    assert drift["row_distance"][:3] == [5.0, 1.0, 0.0]
    assert drift["rows_0_63"]["max"] == 5.0 and drift["rows_0_63"]["rows_moved"] == 2
    assert drift["rows_64_127"]["max"] == 0.0 and drift["rows_64_127"]["rows_moved"] == 0


def test_pairwise_rotary_by_hand():
    # d = 4: theta = (1, 0.01); (1, 0, 0, 1) at p = 2 -> (cos 2, sin 2, -sin .02, cos .02).
    out = evaluate.pairwise_rotary(torch.tensor([[1.0, 0.0, 0.0, 1.0]]), torch.tensor([2]))
    expected = [math.cos(2), math.sin(2), -math.sin(0.02), math.cos(0.02)]
    assert out[0].tolist() == pytest.approx(expected, abs=1e-12)


# --- evaluate.py end to end ---------------------------------------------------------------


def test_metrics(problem2_runs):
    _, results = problem2_runs
    metrics = read(results / "metrics.json")
    assert set(metrics) == {*POSITIONS, "checks", "bag_of_tokens_ceiling"}
    for position in POSITIONS:
        m = metrics[position]
        assert 0 <= m["in_range"] <= 1 and 0 <= m["beyond"] <= 1
        assert len(m["beyond_buckets"]) == 4 and m["buckets"][4:] == m["beyond_buckets"]
        # Equal-sized buckets: beyond is their mean.
        assert m["beyond"] == pytest.approx(sum(m["beyond_buckets"]) / 4)
        assert len(m["per_position"]) == 128 and m["per_position"][:7] == [None] * 7
    for position in ("learned", "sinusoidal"):
        margin = metrics[position]["position_score_margin"]
        assert len(margin["per_position"]) == 128 and margin["per_position"][0] is None
    drift = metrics["learned"]["table_drift"]
    assert drift["rows_64_127"]["max"] == 0.0  # positions 64.. never seen: no gradient
    assert drift["rows_0_63"]["min"] > 0 and drift["rows_0_63"]["rows_moved"] == 64


def test_checks(problem2_runs):
    checks = read(problem2_runs[1] / "metrics.json")["checks"]
    assert checks["shift_rotation_max_error"] < 1e-5
    assert checks["rotary_score_shift_error"] < 1e-3
    assert checks["sinusoidal_score_shift_error"] > 0.5
    assert checks["rotary_vs_pairwise_error"] < 1e-4


def test_attention_maps(problem2_runs):
    maps = read(problem2_runs[1] / "attention_maps.json")
    assert maps["k"] == 7 and len(maps["tokens"]) == 128
    for scheme in ("sinusoidal", "rotary"):
        assert set(maps[scheme]) == {"0-31", "96-127"}
        for window in maps[scheme].values():
            assert np.array(window).shape == (32, 32)
        # In 0-31 every query's keys lie inside the window: rows are whole softmax rows.
        np.testing.assert_allclose(np.array(maps[scheme]["0-31"]).sum(1), 1, atol=1e-3)
        diagonal = [maps[scheme]["0-31"][q][q - 7] for q in range(7, 32)]
        assert maps["on_target"][scheme]["0-31"]["mean"] == pytest.approx(np.mean(diagonal),
                                                                          abs=1e-4)
        assert maps["on_target"][scheme]["96-127"]["queries"] == 25


def test_evaluate_without_models_fails_cleanly(problem2_runs, tmp_path, capsys):
    data, _ = problem2_runs
    with pytest.raises(SystemExit):
        evaluate.main(["--data_dir", str(data), "--results_dir", str(tmp_path)])
    assert "train.py" in capsys.readouterr().err


def test_figures(problem2_runs, tmp_path):
    paths = make_figures(problem2_runs[1], tmp_path)
    assert {p.name for p in paths} == {"accuracy_by_bucket.png", "attention_maps.png",
                                       "learned_table_drift.png"}
    assert all(p.stat().st_size > 10_000 for p in paths)
