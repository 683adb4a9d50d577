"""Hidden tests, Problem 2 Part E: pooled (not averaged) accuracies, per-position counts
with uneven batches and scattered targets, buckets without targets, and the numerical checks
on other sizes (Parts B and C's functions replaced by stand-ins)."""

import cmath
import math

import pytest
import torch

from problem2.dataset import IGNORE_INDEX
from tests.seam import submission
from tests.tiny_problem2 import orthogonal

pytestmark = pytest.mark.p2e
I = IGNORE_INDEX

evaluate = submission("problem2.evaluate")
PredictsPositionModThree = submission("tests.tiny_problem2").PredictsPositionModThree  # a stub


def as_float(value):
    return None if value is None else float(value)


def test_accuracy_is_pooled_over_positions():
    correct, count = torch.tensor([1.0, 0.0, 2.0]), torch.tensor([1.0, 3.0, 0.0])
    # pooled: 1 right of 4 targets (the mean of per-position accuracies would give 0.5)
    assert as_float(evaluate.accuracy_over(correct, count, 0, 2)) == pytest.approx(0.25)
    assert evaluate.accuracy_over(correct, count, 2, 3) is None


def test_per_position_counts_by_hand():
    targets = torch.tensor([[I, 1, 2, 0, I, 2, 0, 1, 1, I],
                            [0, I, 2, 1, 1, I, I, 1, 2, 0],
                            [I, I, I, 0, 0, 2, 0, 0, 0, 0]])
    tokens = torch.zeros_like(targets)
    counts = evaluate.per_position_counts(PredictsPositionModThree(), tokens, targets,
                                          batch_size=2)
    rows = targets.tolist()
    expected_count = [sum(row[i] != I for row in rows) for i in range(10)]
    expected_correct = [sum(row[i] == i % 3 for row in rows) for i in range(10)]
    for name, expected in (("count", expected_count), ("correct", expected_correct)):
        assert counts[name].is_floating_point()  # (the seam brings every tensor to the cpu)
        assert counts[name].tolist() == expected


def test_position_metrics_with_buckets_without_targets():
    count, correct = torch.zeros(128), torch.zeros(128)
    count[10:20] = 2
    correct[10:20] = 1  # bucket 0-15: 6 of 12, bucket 16-31: 4 of 8
    count[100] = 4
    correct[100] = 3  # bucket 96-111 only, beyond: 3 of 4
    m = evaluate.position_metrics(correct, count)
    assert as_float(m["in_range"]) == pytest.approx(10 / 20)
    assert as_float(m["beyond"]) == pytest.approx(3 / 4)
    assert [as_float(b) for b in m["buckets"]] == [0.5, 0.5, None, None, None, None, 0.75, None]
    assert [as_float(b) for b in m["beyond_buckets"]] == [None, None, 0.75, None]
    count[64:] = 0
    assert evaluate.position_metrics(correct, count)["beyond"] is None


def test_numerical_checks_on_other_sizes(monkeypatch):
    # Parts B and C's functions as stand-ins (tests/tiny_problem2.py), so that their mistakes
    # cost nothing here: a table and rotations that fit, known score changes, and an
    # apply_rotary that is pairwise_rotary + 0.5
    stubs = submission("tests.tiny_problem2")
    power = stubs.PowerTable({d: orthogonal(d, seed=d) for d in (8, 16, 32)})
    monkeypatch.setattr(evaluate, "sinusoidal_table", power.table)
    monkeypatch.setattr(evaluate, "shift_rotation", power.rotation)
    monkeypatch.setattr(evaluate, "apply_rotary", stubs.PlusConstant(evaluate.pairwise_rotary,
                                                                     0.5))
    rotary, sinusoidal = [1e-7 * i for i in range(20)], [0.1 + (7 * i % 20) / 10
                                                         for i in range(20)]
    monkeypatch.setattr(evaluate, "score_shift_invariance", stubs.ScriptedScoreShifts(
        {"rotary": rotary, "sinusoidal": sinusoidal}))
    for d in (8, 32):
        assert float(evaluate.shift_rotation_max_error(d)) < 1e-5
        assert float(evaluate.rotary_vs_pairwise_error(d, length=20)) == pytest.approx(
            0.5, abs=1e-5)
    errors = evaluate.score_shift_errors(16, samples=20, seed=3)
    assert set(errors) == {"rotary_score_shift_error", "sinusoidal_score_shift_error",
                           "sinusoidal_score_shift_error_median", "score_magnitude_median"}
    assert float(errors["rotary_score_shift_error"]) == pytest.approx(max(rotary))
    assert float(errors["sinusoidal_score_shift_error"]) == pytest.approx(max(sinusoidal))
    assert float(errors["sinusoidal_score_shift_error_median"]) == pytest.approx(
        torch.tensor(sinusoidal).median().item())
    assert float(errors["score_magnitude_median"]) > 0
    # ... and pairwise_rotary itself at d = 8, by the formula
    x = torch.randn(5, 8, generator=torch.Generator().manual_seed(4))
    positions = [0, 3, 17, 64, 127]
    out = evaluate.pairwise_rotary(x, torch.tensor(positions))
    for row, p in enumerate(positions):
        for i in range(4):
            z = complex(x[row, 2 * i], x[row, 2 * i + 1]) * cmath.exp(1j * p * 10000 ** (-i / 4))
            assert [float(out[row, 2 * i]), float(out[row, 2 * i + 1])] == pytest.approx(
                [z.real, z.imag], abs=1e-9)


def test_pairwise_rotary_rows_by_hand():
    # d = 2, theta = 1: row (x, y) at position p -> (x cos p - y sin p, x sin p + y cos p)
    x = torch.tensor([[1.0, 2.0], [3.0, -1.0], [0.5, 0.5]])
    out = evaluate.pairwise_rotary(x, torch.tensor([0, 1, 5]))
    assert out.dtype == torch.float64 and out.shape == (3, 2)
    expected = [[1.0, 2.0],
                [3 * math.cos(1) + math.sin(1), 3 * math.sin(1) - math.cos(1)],
                [0.5 * (math.cos(5) - math.sin(5)), 0.5 * (math.sin(5) + math.cos(5))]]
    assert out.tolist() == [pytest.approx(row, abs=1e-12) for row in expected]
