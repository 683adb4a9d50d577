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
from tests.tiny import expect_raises

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


# --- the formulas, and the common mistakes, computed here -----------------------------------
def omegas(d: int, exponent: str = "2i") -> torch.Tensor:
    """[d / 2] float64 omega_i = 10000^(-2i/d) (or, a mistake, 10000^(-i/d))."""
    i = torch.arange(d // 2, dtype=torch.float64)
    return 10000.0 ** (-(2 * i if exponent == "2i" else i) / d)


def table_by_formula(max_len: int, d: int, mistake: str | None = None) -> torch.Tensor:
    """[max_len, d] float64: PE[p, 2i] = sin(p omega_i), PE[p, 2i+1] = cos(p omega_i), or the
    table that one mistake gives."""
    start = 1 if mistake == "from 1" else 0
    angles = torch.arange(start, start + max_len, dtype=torch.float64)[:, None] * omegas(
        d, "i" if mistake == "exponent" else "2i")
    first, second = torch.sin(angles), torch.cos(angles)
    if mistake == "swapped":
        first, second = second, first
    if mistake == "halves":
        return torch.cat([first, second], dim=1)
    return torch.stack([first, second], dim=-1).flatten(1)


TABLE_MISTAKES = {
    "swapped": "sin and cos are swapped (cos on the even columns 2i, sin on the odd 2i+1)",
    "halves": "sin and cos sit in two halves (all sines, then all cosines) instead of "
              "interleaved pairs (2i, 2i+1)",
    "from 1": "positions are counted from 1 instead of 0",
    "exponent": "the frequencies are 10000^(-i/d) instead of 10000^(-2i/d)",
}


def table_hint(max_len: int, d: int) -> str:
    """One clause naming the mistake the code's sinusoidal_table(max_len, d) matches."""
    table = sinusoidal_table(max_len, d).double()
    for mistake, why in TABLE_MISTAKES.items():
        if torch.allclose(table, table_by_formula(max_len, d, mistake), atol=1e-4):
            return f"your table is exactly what it is when {why}"
    return ("your table matches none of the usual mistakes (sin and cos swapped, two halves, "
            "positions from 1, exponent i/d): check PE[p, 2i] = sin(p omega_i) entry by entry")


def table_is_right(max_len: int = 20, d: int = 8) -> bool:
    table = sinusoidal_table(max_len, d)
    return table.shape == (max_len, d) and torch.allclose(
        table.double(), table_by_formula(max_len, d), atol=5e-5)


def rotation_by_formula(s: int, d: int, mistake: str | None = None) -> torch.Tensor:
    """[d, d] float64 R_s, one block [[cos, sin], [-sin, cos]] (s omega_i) per pair, or the
    matrix that one mistake gives."""
    angles = s * omegas(d)
    if mistake == "one frequency":
        angles = s * omegas(d)[:1].expand(d // 2)
    if mistake == "transposed":
        angles = -angles
    R = torch.zeros(d, d, dtype=torch.float64)
    a = torch.arange(0, d, 2) if mistake != "halves" else torch.arange(d // 2)
    b = a + 1 if mistake != "halves" else a + d // 2
    R[a, a], R[a, b], R[b, a], R[b, b] = angles.cos(), angles.sin(), -angles.sin(), angles.cos()
    return R


ROTATION_MISTAKES = {
    "transposed": "the block is transposed, [[cos, -sin], [sin, cos]]: a shift by -s (it is "
                  "the block that fits a table with sin and cos swapped)",
    "halves": "the blocks sit on the pairs (i, i + d/2) instead of (2i, 2i+1)",
    "one frequency": "every block uses omega_0 instead of its own omega_i",
}


def rotation_hint(s: int, d: int) -> str:
    """One clause naming the mistake the code's shift_rotation(s, d) matches."""
    R = shift_rotation(s, d).double()
    for mistake, why in ROTATION_MISTAKES.items():
        if torch.allclose(R, rotation_by_formula(s, d, mistake), atol=1e-5):
            return f"your R_s is exactly what it is when {why}"
    return ("your R_s matches none of the usual mistakes (transposed block, blocks on "
            "(i, i + d/2), one frequency for every pair): derive the block from sin(a + b) "
            "and cos(a + b)")


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
                f"sinusoidal_table's row {p} must hold (sin p omega_i, cos p omega_i) in "
                f"interleaved pairs, positions counted from 0: {table_hint(5, 4)}\n{m}"))


@p2b
def test_sinusoidal_table_d64_against_math():
    table = sinusoidal_table(128, 64)
    assert table.shape == (128, 64), "sinusoidal_table must return a [max_len, d_model] table"
    for p, i in [(10, 10), (127, 0), (77, 31), (64, 5)]:
        omega = 10000 ** (-2 * i / 64)
        hint = (f"sinusoidal_table(128, 64)[{p}, {2 * i}:{2 * i + 2}] must be (sin, cos) of "
                f"{p} * omega_{i}: {table_hint(128, 64)}")
        assert table[p, 2 * i].item() == pytest.approx(math.sin(p * omega), abs=2e-5), hint
        assert table[p, 2 * i + 1].item() == pytest.approx(math.cos(p * omega), abs=2e-5), hint


# --- shift_rotation -----------------------------------------------------------------------


@p2b
@pytest.mark.parametrize("shift", [0, 1, 7, 50])
def test_shift_rotation_moves_every_row(shift):
    d = 64
    # the table by its formula, here: a mistake in sinusoidal_table fails its own tests only
    table = table_by_formula(128 + shift, d).float()
    R = shift_rotation(shift, d)
    assert R.shape == (d, d) and R.dtype == torch.float32, (
        "shift_rotation must return a float32 [d, d] matrix")

    def hint() -> str:
        note = "" if table_is_right() else (
            " (your sinusoidal_table fails its own tests: fix it first; this test uses the "
            "table of the formula, not yours)")
        return rotation_hint(shift, d) + note

    # PE[p + s] = R_s PE[p] for every p at once: rows are PE[p], so PE[p+s]^T = PE[p]^T R^T.
    torch.testing.assert_close(
        table[shift:shift + 128], table[:128] @ R.T, atol=5e-5, rtol=0, msg=lambda m: (
            "shift_rotation(s) must map PE[p] to PE[p + s] for every p, PE the table of the "
            f"formula: {hint()}\n{m}"))
    # Block diagonal: nothing outside the 2x2 blocks on (2i, 2i+1).
    block = torch.block_diag(*[torch.ones(2, 2)] * (d // 2)).bool()
    assert (R[~block] == 0).all(), (
        "shift_rotation must be block diagonal, one 2x2 block per pair (2i, 2i+1)")


@p2b
def test_shift_rotation_zero_is_identity():
    torch.testing.assert_close(shift_rotation(0, 8), torch.eye(8), msg=lambda m: (
        f"shift_rotation(0, d) must be the identity (a shift by 0)\n{m}"))


# --- rotary -------------------------------------------------------------------------------


@p2c
def test_rotary_frequencies_equal_sinusoidal_frequencies():
    theta = rotary_frequencies(8)
    assert theta.shape == (4,) and theta.dtype == torch.float32, (
        "rotary_frequencies must return d / 2 float32 frequencies")
    known = {"they are doubled (2 theta_i)": 2 * omegas(8),
             "the exponent is -i/d instead of -2i/d": omegas(8, "i"),
             "they are the periods 10000^(2i/d), not the frequencies": 1 / omegas(8)}
    why = next((why for why, wrong in known.items()
                if torch.allclose(theta.double(), wrong, rtol=1e-5)),
               "is the exponent's 2i or d wrong?")
    torch.testing.assert_close(theta, torch.tensor([1.0, 0.1, 0.01, 0.001]), msg=lambda m: (
        "rotary_frequencies must be theta_i = 10000^(-2i/d), the sinusoidal table's "
        f"frequencies: {why}\n{m}"))


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


def rotary_by_formula(x: torch.Tensor, positions: list, mistake: str | None = None):
    """x rotated pair by pair in float64 (the docstring's formula), or as one mistake does."""
    d, T = x.shape[-1], x.shape[-2]
    where = torch.tensor([float(p) for p in positions], dtype=torch.float64)
    if mistake == "from 1":
        where = where + 1
    if mistake == "ignores positions":
        where = torch.arange(T, dtype=torch.float64)
    theta = omegas(d, "i" if mistake == "exponent" else "2i")
    if mistake == "doubled":
        theta = 2 * theta
    angles = where[:, None] * theta  # [T, d/2]
    sign = -1.0 if mistake == "wrong way" else 1.0
    cos, sin = angles.cos(), sign * angles.sin()
    x = x.double()
    if mistake == "halves":
        first, second = x[..., :d // 2], x[..., d // 2:]
        return torch.cat([first * cos - second * sin, first * sin + second * cos], dim=-1)
    first, second = x[..., 0::2], x[..., 1::2]
    return torch.stack([first * cos - second * sin, first * sin + second * cos], -1).flatten(-2)


ROTARY_MISTAKES = {
    "halves": "the pairs are (i, i + d/2), the half-split layout of many libraries, instead "
              "of the interleaved pairs (2i, 2i+1) the homework asks for",
    "wrong way": "each pair is rotated the wrong way (by -p theta_i: the signs of the sines "
                 "swapped)",
    "from 1": "positions are counted from 1 (p + 1) instead of taken as given",
    "ignores positions": "the positions given are ignored (0 .. T-1 used instead)",
    "doubled": "the frequencies are doubled (2 theta_i)",
    "exponent": "the frequencies are 10000^(-i/d) instead of 10000^(-2i/d)",
}


def frequencies_are_right() -> bool:
    theta = rotary_frequencies(8)
    return theta.shape == (4,) and torch.allclose(theta.double(), omegas(8), rtol=1e-6)


def rotary_hint(x: torch.Tensor, positions: list) -> str:
    """One clause naming the mistake the code's apply_rotary(x, positions) matches."""
    out = apply_rotary(x, torch.tensor(positions)).double()
    for mistake, why in ROTARY_MISTAKES.items():
        expected = rotary_by_formula(x, positions, mistake)
        if out.shape == expected.shape and torch.allclose(out, expected, atol=1e-4):
            return f"your result is exactly what it is when {why}"
    if not frequencies_are_right():
        return ("rotary_frequencies fails its own test (test_rotary_frequencies_equal_"
                "sinusoidal_frequencies): fix it first, apply_rotary likely uses it")
    return ("your result matches none of the usual mistakes (half-split pairs, the wrong "
            "direction, positions shifted or ignored, frequencies): compare one pair by hand")


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
            f"given: {rotary_hint(x, positions)}\n{m}"))


@p2c
def test_apply_rotary_hand_example():
    # d = 2, theta_0 = 1: (1, 0) at position p -> (cos p, sin p); (0, 1) -> (-sin p, cos p).
    x = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    out = apply_rotary(x, torch.tensor([3, 3]))
    expected = torch.tensor([[math.cos(3), math.sin(3)], [-math.sin(3), math.cos(3)]])
    torch.testing.assert_close(out, expected, atol=1e-6, rtol=0, msg=lambda m: (
        "apply_rotary at d = 2 must turn (1, 0) at position 3 into (cos 3, sin 3) and (0, 1) "
        f"into (-sin 3, cos 3): {rotary_hint(x, [3, 3])}\n{m}"))


@p2c
def test_apply_rotary_position_zero_is_identity_and_norms_are_kept():
    x = torch.randn(4, 128, 64, generator=torch.Generator().manual_seed(1))
    out = apply_rotary(x, torch.arange(128))
    torch.testing.assert_close(out[:, 0], x[:, 0], msg=lambda m: (
        f"apply_rotary must leave position 0 unchanged (a rotation by angle 0)\n{m}"))
    # and rotate the others: pair 0 at position 1 turns by theta_0 * 1 = 1 radian
    first, second = x[:, 1, 0].double(), x[:, 1, 1].double()
    turned = torch.stack([first * math.cos(1) - second * math.sin(1),
                          first * math.sin(1) + second * math.cos(1)], dim=-1)
    unchanged = torch.allclose(out[:, 1, :2].double(), x[:, 1, :2].double(), atol=1e-5)
    why = ("it is left as it is: are the positions ignored, or x returned unchanged?"
           if unchanged else "is it paired with another coordinate (pairs (x_i, x_i+d/2), "
           "the half-split layout, instead of (x_2i, x_2i+1)), or turned by another angle?")
    torch.testing.assert_close(out[:, 1, :2].double(), turned, atol=1e-5, rtol=0, msg=lambda m: (
        "apply_rotary must rotate pair (x_0, x_1) at position 1 by 1 radian (theta_0 = 1): "
        f"{why}\n{m}"))
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


def rotary_is_right() -> bool:
    x = torch.randn(2, 3, 6, generator=torch.Generator().manual_seed(5))
    out = apply_rotary(x, torch.tensor([0, 2, 7]))
    return out.shape == x.shape and torch.allclose(
        out.double(), rotary_by_formula(x, [0, 2, 7]), atol=1e-5)


@pytest.fixture
def sinusoidal_rows(monkeypatch):
    """score_shift_invariance's sinusoidal table (Part B's sinusoidal_table) answered from
    the formula's table, computed here (tests/tiny_problem2.py's TableRows), so that a
    mistake in Part B costs no points in Part C."""
    rows = {d: table_by_formula(128, d) for d in (2, 4, 8, 64)}
    monkeypatch.setattr(positional, "sinusoidal_table",
                        submission("tests.tiny_problem2").TableRows(rows))


def upstream_note(scheme: str) -> str:
    """What score_shift_invariance relies on that fails its own tests, or '' (the sinusoidal
    table is the formula's: sinusoidal_rows)."""
    if scheme == "rotary" and not rotary_is_right():
        return " Your apply_rotary fails its own tests: fix it first, the score uses it."
    return ""


@p2c
@pytest.mark.usefixtures("sinusoidal_rows")
def test_score_shift_sinusoidal_hand_value():
    # d = 2, q = (1, 0), k = (0, 0): score(a, b) = (1 + sin a) sin b + cos a cos b
    #                                          = sin b + cos(a - b),
    # so moving (10, 3) to (11, 4) changes it by |sin 4 - sin 3| = 0.8979225.
    q, k = torch.tensor([1.0, 0.0]), torch.tensor([0.0, 0.0])
    change = score_shift_invariance(q, k, 1, "sinusoidal")
    assert is_real_number(change), (  # a float of any kind: Python's, NumPy's, a 0-d tensor
        "score_shift_invariance must return one real number")
    mistakes = {  # what the common mistakes give here, worked out the same way
        math.sin(4) - math.sin(3): "the change keeps its sign (take the absolute value)",
        abs(math.cos(8) - math.cos(7)): "only the query's position is shifted, not both",
        abs(math.sin(4) + math.cos(6) - math.sin(3) - math.cos(7)): "only the key's "
        "position is shifted, not both",
        0.0: "the table row is added to the query only (the score must be (q + PE[a]) . "
             "(k + PE[b]))",
        abs(math.sin(4) - math.sin(3)) / math.sqrt(2): "the score is divided by sqrt(d): "
                                                       "it is the plain dot product",
    }
    found = next((why for value, why in mistakes.items()
                  if float(change) == pytest.approx(value, abs=1e-5)), None)
    assert float(change) == pytest.approx(abs(math.sin(4) - math.sin(3)), abs=1e-5), (
        "score_shift_invariance(q, k, 1, 'sinusoidal') must be |score(11, 4) - score(10, 3)| "
        f"= 0.8979 here, not {float(change):.4f}: "
        + (found or "are both positions shifted and the table added to both vectors?")
        + upstream_note("sinusoidal"))


@p2c
@pytest.mark.usefixtures("sinusoidal_rows")
def test_score_shift_rotary_hand_value_is_zero():
    # d = 2: rotated (1, 0) . rotated (0, 1) = sin(a - b); rotating only one vector would
    # give sin a or -sin b instead, which changes under the shift.
    q, k = torch.tensor([1.0, 0.0]), torch.tensor([0.0, 1.0])
    unshifted = float(score_shift_invariance(q, k, 0, "rotary"))  # the same score twice: 0
    message = ("score_shift_invariance under 'rotary' must rotate both q and k at their own "
               "positions and shift both positions together, so that the score, sin(a - b) "
               "here, does not change: " + (
                   f"with shift 0 it changed by {unshifted:.4f}: does apply_rotary rotate its "
                   "input in place, so that the second score rotates an already rotated q?"
                   if math.isfinite(unshifted) and abs(unshifted) > 1e-6 else
                   "is only one vector rotated, or only one position shifted?")
               + upstream_note("rotary"))
    assert float(score_shift_invariance(q, k, 1, "rotary")) == pytest.approx(
        0.0, abs=1e-6), message
    assert float(score_shift_invariance(q, k, 5, "rotary", q_pos=40, k_pos=40)) == pytest.approx(
        0.0, abs=1e-6), message
    # the same vectors under 'sinusoidal': score(a, b) = sin b + cos a + cos(a - b) changes
    expected = abs(math.sin(4) - math.sin(3) + math.cos(11) - math.cos(10))  # 0.0544
    assert float(score_shift_invariance(q, k, 1, "sinusoidal")) == pytest.approx(
        expected, abs=1e-5), (
        f"score_shift_invariance(q, k, 1, 'sinusoidal') must be {expected:.4f} here, not 0 "
        "(the table's rows change the score with the positions): is 0 returned whatever the "
        "scheme?" + upstream_note("sinusoidal"))


@p2c
@pytest.mark.usefixtures("sinusoidal_rows")
def test_score_shift_random_vectors():
    g = torch.Generator().manual_seed(3)
    rotary, sinusoidal = [], []
    for shift in range(1, 21):
        q, k = torch.randn(2, 64, generator=g)
        rotary.append(float(score_shift_invariance(q, k, shift, "rotary", q_pos=30, k_pos=12)))
        sinusoidal.append(float(score_shift_invariance(q, k, shift, "sinusoidal", q_pos=30,
                                                       k_pos=12)))
    assert max(rotary) < 1e-4, (
        "score_shift_invariance under 'rotary' must be about 0 for any q, k and shift: the "
        "score depends on the positions only through their difference"
        + upstream_note("rotary"))
    assert sum(sinusoidal) / len(sinusoidal) > 0.5, (
        "score_shift_invariance under 'sinusoidal' must change with the shift for random q, "
        "k (mean change above 0.5): is the table added to both vectors, at their positions?"
        + upstream_note("sinusoidal"))


@p2c
@pytest.mark.usefixtures("sinusoidal_rows")
def test_score_shift_bad_scheme_raises():
    # the two schemes work (the hand values of the tests above): not every scheme raises
    q, k = torch.tensor([1.0, 0.0]), torch.tensor([0.0, 0.0])
    assert float(score_shift_invariance(q, k, 1, "sinusoidal")) == pytest.approx(
        abs(math.sin(4) - math.sin(3)), abs=1e-5), (
        "score_shift_invariance(q, k, 1, 'sinusoidal') must be |score(11, 4) - score(10, 3)| = "
        "0.8979 for q = (1, 0), k = (0, 0): is the valid scheme 'sinusoidal' rejected?"
        + upstream_note("sinusoidal"))
    assert float(score_shift_invariance(q, k, 1, "rotary")) == pytest.approx(0.0, abs=1e-6), (
        "score_shift_invariance(q, k, 1, 'rotary') must be about 0: is the valid scheme "
        "'rotary' rejected?" + upstream_note("rotary"))
    for scheme in ["learned", "none", "Rotary", ""]:
        expect_raises(ValueError, score_shift_invariance, torch.ones(4), torch.ones(4), 1,
                      scheme, what=f"score_shift_invariance with scheme {scheme!r} (only "
                                   "'rotary' and 'sinusoidal' exist)")


@p2c
def test_apply_rotary_keeps_a_float64_input_float64():
    """apply_rotary returns x's dtype: a float64 x stays float64, to float64 precision (the
    rotation of pair 0 at position 3 by 3 rad, written out here)."""
    x = torch.tensor([[0.0, 0.0, 0.0, 0.0], [0.1, 0.2, 0.0, 0.0]], dtype=torch.float64)
    out = apply_rotary(x, torch.tensor([0, 3]))
    assert out.dtype == torch.float64, (
        f"apply_rotary must return x's dtype, float64 here, not {out.dtype}: is x (or the "
        "rotation) cast to float32 on the way?")
    expected = [0.1 * math.cos(3) - 0.2 * math.sin(3), 0.1 * math.sin(3) + 0.2 * math.cos(3)]
    assert out[1, :2].tolist() == pytest.approx(expected, abs=1e-12), (
        "apply_rotary on float64 must keep float64 precision: is it computed in float32?")
