"""Hidden tests, Problem 2 Part B: the table at other sizes and the shift rotation's block,
checked by hand (the angle-addition identities) and through properties any correct R_s has.
Tolerances accept a table computed in float32."""

import math

import pytest
import torch

from tests.seam import submission

pytestmark = pytest.mark.p2b

shift_rotation = submission("problem2.positional").shift_rotation
sinusoidal_table = submission("problem2.positional").sinusoidal_table


def pe(p: int, j: int, d: int) -> float:
    omega = 10000 ** (-2 * (j // 2) / d)
    return math.sin(p * omega) if j % 2 == 0 else math.cos(p * omega)


def test_shift_rotation_block_form_d4():
    s = 2
    R = shift_rotation(s, 4)
    assert R.shape == (4, 4) and R.dtype == torch.float32
    c0, s0 = math.cos(2.0), math.sin(2.0)  # s * omega_0 = 2
    c1, s1 = math.cos(0.02), math.sin(0.02)  # s * omega_1 = 0.02
    expected = torch.tensor([[c0, s0, 0, 0], [-s0, c0, 0, 0], [0, 0, c1, s1], [0, 0, -s1, c1]])
    torch.testing.assert_close(R, expected, atol=1e-6, rtol=0, msg=lambda m: (
        "shift_rotation(2, 4) must be block-diagonal, block j [[cos s w_j, sin s w_j], "
        "[-sin s w_j, cos s w_j]] with w_j = 10000^(-2j/d): is a block transposed (the sines' "
        f"signs swapped), or w_j's exponent off (j/d, not 2j/d)?\n{m}"))


def test_shift_rotation_d2_by_hand():
    R = shift_rotation(3, 2)
    expected = torch.tensor([[math.cos(3), math.sin(3)], [-math.sin(3), math.cos(3)]])
    torch.testing.assert_close(R, expected, atol=1e-6, rtol=0, msg=lambda m: (
        "shift_rotation(3, 2) must be [[cos 3, sin 3], [-sin 3, cos 3]] (w_0 = 1): are the "
        f"sines' signs swapped?\n{m}"))


def test_shift_rotations_compose_and_are_orthogonal():
    R3, R5, R8 = (shift_rotation(s, 8) for s in (3, 5, 8))
    torch.testing.assert_close(R3 @ R5, R8, atol=1e-5, rtol=0, msg=lambda m: (
        "shift_rotation(3, 8) @ shift_rotation(5, 8) must be shift_rotation(8, 8): is the "
        f"angle s * w_j (not w_j alone, or s + w_j)?\n{m}"))
    torch.testing.assert_close(R5 @ R5.T, torch.eye(8), atol=1e-5, rtol=0, msg=lambda m: (
        "shift_rotation(5, 8) must be orthogonal (R R^T = I): is a block not a rotation "
        f"(cos and sin mixed up, or a sign lost)?\n{m}"))


def test_shift_rotation_moves_a_long_table():
    # the table of the formula, not the code's: a wrong table fails its own tests only
    table = torch.tensor([[pe(p, j, 64) for j in range(64)] for p in range(300)])
    R = shift_rotation(100, 64)
    torch.testing.assert_close(table[100:], table[:200] @ R.T, atol=1e-4, rtol=0,
                               msg=lambda m: (
        "shift_rotation(100, 64) must map PE[p] to PE[p + 100] for every p (PE the table of "
        f"the formula): is the block transposed, or on the wrong pairs?\n{m}"))


@pytest.mark.parametrize("max_len, d", [(1, 6), (3, 6), (200, 128), (17, 2)])
def test_sinusoidal_table_by_formula(max_len, d):
    table = sinusoidal_table(max_len, d)
    assert table.shape == (max_len, d) and table.dtype == torch.float32
    expected = torch.tensor([[pe(p, j, d) for j in range(d)] for p in range(max_len)])
    torch.testing.assert_close(table, expected, atol=5e-5, rtol=0, msg=lambda m: (
        f"sinusoidal_table({max_len}, {d}) must be PE[p, 2i] = sin(p w_i), PE[p, 2i + 1] = "
        "cos(p w_i), w_i = 10000^(-2i/d): sines and cosines interleaved (not in two halves), "
        f"the exponent 2i/d?\n{m}"))
    assert table[0].tolist() == pytest.approx([0.0, 1.0] * (d // 2), abs=1e-7)
