"""Problem 2, Parts B and C: the sinusoidal table, R_s, rotary encoding, score shifts.

Expected values come from the formulas evaluated by hand (d = 4: omega = 1, 0.01) or through
an independent route (Python's cmath for rotary), never from the code under test. The
tolerances accept a table computed in float32 (an angle p * omega rounded to float32 is off
by up to about 1e-5 at p = 128), not a wrong formula.
"""

import cmath
import math
import numbers

import pytest
import torch

from tests.seam import submission

p2b = pytest.mark.p2b
p2c = pytest.mark.p2c

positional = submission("problem2.positional")
apply_rotary = positional.apply_rotary
rotary_frequencies = positional.rotary_frequencies
score_shift_invariance = positional.score_shift_invariance
shift_rotation = positional.shift_rotation
sinusoidal_table = positional.sinusoidal_table


def is_real_number(value) -> bool:
    """A float of any kind: Python's, NumPy's, or a one-element floating tensor."""
    if isinstance(value, torch.Tensor):
        return value.numel() == 1 and value.is_floating_point()
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


# --- sinusoidal_table ---------------------------------------------------------------------


@p2b
def test_sinusoidal_table_hand_picked_entries_d4():
    # d = 4: omega_0 = 1, omega_1 = 10000^(-2/4) = 0.01; interleaved sin, cos.
    table = sinusoidal_table(5, 4)
    assert table.shape == (5, 4) and table.dtype == torch.float32, (
        "sinusoidal_table must return a float32 [max_len, d_model] table")
    expected = {
        0: [0.0, 1.0, 0.0, 1.0],
        1: [0.8414709848, 0.5403023059, 0.0099998333, 0.9999500004],
        3: [0.1411200081, -0.9899924966, 0.0299955002, 0.9995500337],
    }
    for p, row in expected.items():
        torch.testing.assert_close(
            table[p], torch.tensor(row), atol=1e-6, rtol=0, msg=lambda m, p=p: (
                f"row {p} must hold (sin p omega_i, cos p omega_i) in interleaved pairs, "
                "positions counted from 0: are sin and cos swapped, put in two halves, or "
                f"positions counted from 1?\n{m}"))


@p2b
def test_sinusoidal_table_d64_against_math():
    table = sinusoidal_table(128, 64)
    assert table.shape == (128, 64)
    for p, i in [(10, 10), (127, 0), (77, 31), (64, 5)]:
        omega = 10000 ** (-2 * i / 64)
        assert table[p, 2 * i].item() == pytest.approx(math.sin(p * omega), abs=2e-5)
        assert table[p, 2 * i + 1].item() == pytest.approx(math.cos(p * omega), abs=2e-5)


# --- shift_rotation -----------------------------------------------------------------------


@p2b
@pytest.mark.parametrize("shift", [0, 1, 7, 50])
def test_shift_rotation_moves_every_row(shift):
    d = 64
    table = sinusoidal_table(128 + shift, d)
    R = shift_rotation(shift, d)
    # PE[p + s] = R_s PE[p] for every p at once: rows are PE[p], so PE[p+s]^T = PE[p]^T R^T.
    torch.testing.assert_close(
        table[shift:shift + 128], table[:128] @ R.T, atol=5e-5, rtol=0, msg=lambda m: (
            "shift_rotation(s) must map PE[p] to PE[p + s] for every p: is the rotation "
            f"transposed (a shift by -s), or are its angles not s omega_i?\n{m}"))
    assert R.shape == (d, d) and R.dtype == torch.float32, (
        "shift_rotation must return a float32 [d, d] matrix")
    # Block diagonal: nothing outside the 2x2 blocks on (2i, 2i+1).
    block = torch.block_diag(*[torch.ones(2, 2)] * (d // 2)).bool()
    assert (R[~block] == 0).all(), (
        "shift_rotation must be block diagonal, one 2x2 block per pair (2i, 2i+1)")


@p2b
def test_shift_rotation_zero_is_identity():
    torch.testing.assert_close(shift_rotation(0, 8), torch.eye(8))


# --- rotary -------------------------------------------------------------------------------


@p2c
def test_rotary_frequencies_equal_sinusoidal_frequencies():
    theta = rotary_frequencies(8)
    assert theta.shape == (4,) and theta.dtype == torch.float32, (
        "rotary_frequencies must return d / 2 float32 frequencies")
    torch.testing.assert_close(theta, torch.tensor([1.0, 0.1, 0.01, 0.001]), msg=lambda m: (
        "rotary_frequencies must be theta_i = 10000^(-2i/d), the sinusoidal table's "
        f"frequencies: are they doubled, or the exponent's 2i or d wrong?\n{m}"))


def complex_rotation(x: torch.Tensor, positions: list[int]) -> torch.Tensor:
    """Independent route: pair (2i, 2i+1) as the complex x_2i + j x_2i+1 times e^{j p theta_i}."""
    *lead, T, d = x.shape
    out = torch.empty_like(x, dtype=torch.float64)
    flat, flat_out = x.reshape(-1, T, d).double(), out.view(-1, T, d)
    for b in range(flat.shape[0]):
        for t, p in enumerate(positions):
            for i in range(d // 2):
                z = complex(flat[b, t, 2 * i], flat[b, t, 2 * i + 1])
                z *= cmath.exp(1j * p * 10000 ** (-2 * i / d))
                flat_out[b, t, 2 * i], flat_out[b, t, 2 * i + 1] = z.real, z.imag
    return out


@p2c
def test_apply_rotary_matches_complex_rotation():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 3, 5, 8, generator=g)  # [..., T=5, d=8]
    positions = [0, 1, 4, 9, 100]
    out = apply_rotary(x, torch.tensor(positions))
    assert out.shape == x.shape and out.dtype == torch.float32, (
        "apply_rotary must keep the input's shape and dtype")
    torch.testing.assert_close(
        out.double(), complex_rotation(x, positions), atol=1e-5, rtol=0, msg=lambda m: (
            "apply_rotary must rotate each pair (x_2i, x_2i+1) by +p theta_i at the position p "
            f"given: does it rotate the wrong way, or count positions from 1?\n{m}"))


@p2c
def test_apply_rotary_hand_example():
    # d = 2, theta_0 = 1: (1, 0) at position p -> (cos p, sin p); (0, 1) -> (-sin p, cos p).
    x = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    out = apply_rotary(x, torch.tensor([3, 3]))
    expected = torch.tensor([[math.cos(3), math.sin(3)], [-math.sin(3), math.cos(3)]])
    torch.testing.assert_close(out, expected, atol=1e-6, rtol=0)


@p2c
def test_apply_rotary_position_zero_is_identity_and_norms_are_kept():
    x = torch.randn(4, 128, 64, generator=torch.Generator().manual_seed(1))
    out = apply_rotary(x, torch.arange(128))
    torch.testing.assert_close(out[:, 0], x[:, 0])
    torch.testing.assert_close(out.norm(dim=-1), x.norm(dim=-1), atol=1e-4, rtol=1e-5)
    pair_norms = lambda t: t.unflatten(-1, (32, 2)).norm(dim=-1)  # noqa: E731
    torch.testing.assert_close(pair_norms(out), pair_norms(x), atol=1e-5, rtol=1e-5)


@p2c
def test_rotary_score_depends_on_position_difference_only():
    g = torch.Generator().manual_seed(2)
    q, k = torch.randn(2, 64, generator=g)

    def score(a: int, b: int) -> float:
        qa = apply_rotary(q[None], torch.tensor([a]))[0]
        kb = apply_rotary(k[None], torch.tensor([b]))[0]
        return (qa @ kb).item()

    base = score(10, 3)
    for a, b in [(17, 10), (70, 63), (127, 120)]:
        assert score(a, b) == pytest.approx(base, abs=1e-4)
    assert abs(score(10, 4) - base) > 1e-2  # a different difference gives a different score


# --- score_shift_invariance ---------------------------------------------------------------


@p2c
def test_score_shift_sinusoidal_hand_value():
    # d = 2, q = (1, 0), k = (0, 0): score(a, b) = (1 + sin a) sin b + cos a cos b
    #                                          = sin b + cos(a - b),
    # so moving (10, 3) to (11, 4) changes it by |sin 4 - sin 3| = 0.8979225.
    q, k = torch.tensor([1.0, 0.0]), torch.tensor([0.0, 0.0])
    change = score_shift_invariance(q, k, 1, "sinusoidal")
    assert is_real_number(change), (  # a float of any kind: Python's, NumPy's, a 0-d tensor
        "score_shift_invariance must return one real number")
    assert float(change) == pytest.approx(abs(math.sin(4) - math.sin(3)), abs=1e-5), (
        "score_shift_invariance must return the absolute change of the score under the shift: "
        "is the sign kept, or the two positions not shifted together?")


@p2c
def test_score_shift_rotary_hand_value_is_zero():
    # d = 2: rotated (1, 0) . rotated (0, 1) = sin(a - b); rotating only one vector would
    # give sin a or -sin b instead, which changes under the shift.
    q, k = torch.tensor([1.0, 0.0]), torch.tensor([0.0, 1.0])
    assert float(score_shift_invariance(q, k, 1, "rotary")) == pytest.approx(0.0, abs=1e-6)
    assert float(score_shift_invariance(q, k, 5, "rotary", q_pos=40, k_pos=40)) == pytest.approx(
        0.0, abs=1e-6)


@p2c
def test_score_shift_random_vectors():
    g = torch.Generator().manual_seed(3)
    rotary, sinusoidal = [], []
    for shift in range(1, 21):
        q, k = torch.randn(2, 64, generator=g)
        rotary.append(float(score_shift_invariance(q, k, shift, "rotary", q_pos=30, k_pos=12)))
        sinusoidal.append(float(score_shift_invariance(q, k, shift, "sinusoidal", q_pos=30,
                                                       k_pos=12)))
    assert max(rotary) < 1e-4
    assert sum(sinusoidal) / len(sinusoidal) > 0.5


@p2c
def test_score_shift_bad_scheme_raises():
    for scheme in ["learned", "none", "Rotary", ""]:
        with pytest.raises(ValueError):
            score_shift_invariance(torch.ones(4), torch.ones(4), 1, scheme)
