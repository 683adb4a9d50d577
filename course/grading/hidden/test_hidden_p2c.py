"""Hidden tests, Problem 2 Part C: rotary encoding on other shapes, dtypes and positions
(checked through complex multiplication), and score shifts worked out by hand (the
sinusoidal table given as data: sinusoidal_rows)."""

import cmath
import math

import pytest
import torch

from tests.seam import submission

pytestmark = pytest.mark.p2c

positional = submission("problem2.positional")
apply_rotary = positional.apply_rotary
rotary_frequencies = positional.rotary_frequencies
score_shift_invariance = positional.score_shift_invariance


def rotated(x: torch.Tensor, positions: list[float]) -> torch.Tensor:
    """x [..., T, d] with pair i at position p multiplied by e^{j p theta_i}, in Python."""
    *lead, T, d = x.shape
    flat = x.reshape(-1, T, d).double()
    out = torch.empty_like(flat)
    for b in range(flat.shape[0]):
        for t, p in enumerate(positions):
            for i in range(d // 2):
                z = complex(flat[b, t, 2 * i], flat[b, t, 2 * i + 1])
                z *= cmath.exp(1j * p * 10000 ** (-2 * i / d))
                out[b, t, 2 * i], out[b, t, 2 * i + 1] = z.real, z.imag
    return out.reshape(x.shape)


def test_rotary_frequencies_by_formula():
    assert rotary_frequencies(2).tolist() == [1.0]
    theta = rotary_frequencies(64)
    assert theta.shape == (32,) and theta.dtype == torch.float32
    torch.testing.assert_close(
        theta, torch.tensor([10000 ** (-2 * i / 64) for i in range(32)]), msg=lambda m: (
            "rotary_frequencies(64) must be theta_i = 10000^(-2i/d) for i < d/2: is the "
            f"exponent i/d, or are there d of them?\n{m}"))


def test_apply_rotary_keeps_float64():
    x = torch.randn(3, 6, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    out = apply_rotary(x, torch.tensor([2, 0, 9]))
    assert out.dtype == torch.float64 and out.shape == (3, 6), (
        f"apply_rotary on a float64 x [3, 6] must return float64 [3, 6], not {out.dtype} "
        f"{list(out.shape)}")
    # 1e-5 is far above float32 rounding (about 1e-7 here): what fails is the rotation itself
    as_float32 = apply_rotary(x.float(), torch.tensor([2, 0, 9])).double()
    float32_gap = (as_float32 - rotated(x.float(), [2, 0, 9])).abs().max().item()
    why = (f"the same x in float32 is rotated right (to {float32_gap:.1g}): only the float64 "
           "path differs" if float32_gap < 1e-5 else
           f"the same x in float32 is off too (by up to {float32_gap:.3g}): the public "
           "test_apply_rotary_matches_complex_rotation names the usual mistakes")
    torch.testing.assert_close(out, rotated(x, [2, 0, 9]), atol=1e-5, rtol=0, msg=lambda m: (
        "apply_rotary on float64 must rotate each pair (x_2i, x_2i+1) by position * theta_i: "
        f"{why}\n{m}"))


def test_apply_rotary_on_a_single_sequence_and_on_five_dimensions():
    g = torch.Generator().manual_seed(2)
    x = torch.randn(4, 8, generator=g)  # [T, d], no leading dimensions
    torch.testing.assert_close(apply_rotary(x, torch.tensor([7, 3, 0, 1])).double(),
                               rotated(x, [7, 3, 0, 1]), atol=1e-5, rtol=0, msg=lambda m: (
        "apply_rotary on a [T, d] input (no batch dimension) must rotate row t by "
        f"positions[t]: does it assume a leading batch dimension?\n{m}"))
    y = torch.randn(2, 1, 3, 2, 4, generator=g)
    torch.testing.assert_close(apply_rotary(y, torch.tensor([5, 6])).double(),
                               rotated(y, [5, 6]), atol=1e-5, rtol=0, msg=lambda m: (
        "apply_rotary on a five-dimensional input must use the last two dimensions as [T, d] "
        f"and broadcast over the rest: does it index dimension 1 or 2 for positions?\n{m}"))


def test_apply_rotary_takes_float_positions():
    x = torch.randn(2, 3, 4, generator=torch.Generator().manual_seed(3))
    positions = [0.5, 2.25, 10.0]
    torch.testing.assert_close(apply_rotary(x, torch.tensor(positions)).double(),
                               rotated(x, positions), atol=1e-5, rtol=0, msg=lambda m: (
        "apply_rotary must take fractional positions as they are (0.5 turns by half the "
        f"angle of 1): are the positions rounded or cast to integers?\n{m}"))


@pytest.fixture
def sinusoidal_rows(monkeypatch):
    """score_shift_invariance's table (Part B's sinusoidal_table) answered from the formula's,
    computed here: a mistake in Part B costs nothing in Part C."""
    rows = {}
    for d in (2, 4):
        rows[d] = torch.tensor([[math.sin(p * 10000 ** (-(j - j % 2) / d)) if j % 2 == 0 else
                                 math.cos(p * 10000 ** (-(j - j % 2) / d)) for j in range(d)]
                                for p in range(64)])
    monkeypatch.setattr(positional, "sinusoidal_table",
                        submission("tests.tiny_problem2").TableRows(rows))


@pytest.mark.usefixtures("sinusoidal_rows")
def test_score_shift_sinusoidal_by_hand_at_other_positions():
    # d = 2, q = (0, 1), k = (1, 0): score(a, b) = sin a (1 + sin b) + (1 + cos a) cos b.
    def score(a, b):
        return math.sin(a) * (1 + math.sin(b)) + (1 + math.cos(a)) * math.cos(b)

    q, k = torch.tensor([0.0, 1.0]), torch.tensor([1.0, 0.0])
    change = score_shift_invariance(q, k, 4, "sinusoidal", q_pos=2, k_pos=5)
    assert float(change) == pytest.approx(abs(score(6, 9) - score(2, 5)), abs=1e-5)
    assert float(score_shift_invariance(q, k, 0, "sinusoidal", q_pos=2, k_pos=5)) == \
        pytest.approx(0.0, abs=1e-6)


@pytest.mark.usefixtures("sinusoidal_rows")
def test_score_shift_defaults_are_10_and_3():
    # d = 2, q = (1, 0), k = (0, 0): score(a, b) = sin b + cos(a - b), a change of
    # |sin(3 + s) - sin 3| for a shift s from the default positions (10, 3).
    q, k = torch.tensor([1.0, 0.0]), torch.tensor([0.0, 0.0])
    assert float(score_shift_invariance(q, k, 2, "sinusoidal")) == pytest.approx(
        abs(math.sin(5) - math.sin(3)), abs=1e-5)


def test_score_shift_rotary_with_the_key_after_the_query():
    g = torch.Generator().manual_seed(4)
    for _ in range(5):
        q, k = torch.randn(2, 4, generator=g)
        assert float(score_shift_invariance(q, k, 100, "rotary", q_pos=3, k_pos=9)) < 1e-4
    # ... and one hand value: d = 2, q = k = (1, 0): R(a)q . R(b)k = cos(a - b), unchanged
    one = torch.tensor([1.0, 0.0])
    assert float(score_shift_invariance(one, one, 7, "rotary", q_pos=0, k_pos=0)) == \
        pytest.approx(0.0, abs=1e-6)
