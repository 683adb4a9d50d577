"""Instructors only: an alternative solution of problem2/positional.py's regions.

The table and the frequencies from Python's math in loops, R_s from torch.block_diag of
2x2 blocks, rotary encoding with real arithmetic on the even and odd slices (no complex
numbers), and the score shift from table rows built directly.
"""

import math

import torch


def _frequency_list(d_model: int) -> list[float]:
    """omega_i = 10000^(-2i/d) for i = 0 .. d/2 - 1, as Python floats."""
    if d_model % 2:
        raise ValueError(f"d_model must be even (pairs of dimensions), got {d_model}")
    return [10000.0 ** (-(2 * i) / d_model) for i in range(d_model // 2)]


def _encoding_row(position: int, d_model: int) -> list[float]:
    """Row `position` of the sinusoidal table as Python floats: sin, cos per pair."""
    row = []
    for omega in _frequency_list(d_model):
        row.append(math.sin(position * omega))
        row.append(math.cos(position * omega))
    return row


def sinusoidal_table(max_len: int, d_model: int) -> torch.Tensor:
    """[max_len, d_model] float32: PE[p, 2i] = sin(p omega_i), PE[p, 2i+1] = cos(p omega_i)."""
    # BEGIN SOLUTION
    rows = [_encoding_row(p, d_model) for p in range(max_len)]
    as_double = torch.tensor(rows, dtype=torch.float64).reshape(max_len, d_model)
    return as_double.to(torch.float32)
    # END SOLUTION


def shift_rotation(shift: int, d_model: int) -> torch.Tensor:
    """[d_model, d_model] float32 R_s with PE[p + s] = R_s PE[p] for every p.

    R_s is block diagonal: one 2x2 block per pair (2i, 2i+1), at rows and columns 2i and
    2i+1, and zeros elsewhere. Derive the block from the angle-addition identities for
    sin and cos; it must not depend on p.
    """
    # BEGIN SOLUTION
    # With a = p w and b = s w: sin(a + b) = cos(b) sin(a) + sin(b) cos(a) and
    # cos(a + b) = -sin(b) sin(a) + cos(b) cos(a), so (sin, cos) of pair i moves by
    # the matrix [[cos b, sin b], [-sin b, cos b]], whatever p is.
    blocks = []
    for omega in _frequency_list(d_model):
        c, s = math.cos(shift * omega), math.sin(shift * omega)
        blocks.append(torch.tensor([[c, s], [-s, c]], dtype=torch.float64))
    if not blocks:
        return torch.zeros(0, 0)
    return torch.block_diag(*blocks).to(torch.float32)
    # END SOLUTION


def rotary_frequencies(d_model: int) -> torch.Tensor:
    """[d_model / 2] float32: theta_i = omega_i = 10000^(-2i/d), the sinusoidal frequencies."""
    # BEGIN SOLUTION
    return torch.tensor(_frequency_list(d_model), dtype=torch.float64).to(torch.float32)
    # END SOLUTION


def apply_rotary(x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """Rotate each pair (2i, 2i+1) of x at position p by the angle p theta_i.

    x: [..., T, d]; positions: [T] (integers or floats). Returns a tensor of x's shape and
    dtype in which pair i at position p is

        (x_2i cos(p theta_i) - x_2i+1 sin(p theta_i),  x_2i sin(p theta_i) + x_2i+1 cos(p theta_i)).

    No vector is added: a rotated query or key keeps its norm.
    """
    # BEGIN SOLUTION
    speeds = rotary_frequencies(x.size(-1)).to(x)  # [d/2], x's dtype and device
    where = positions.to(x).reshape(-1, 1)  # [T, 1]
    angle = where * speeds.reshape(1, -1)  # [T, d/2]
    cosine, sine = torch.cos(angle), torch.sin(angle)
    first, second = x[..., 0::2], x[..., 1::2]  # [..., T, d/2] each
    rotated_first = first * cosine - second * sine
    rotated_second = first * sine + second * cosine
    return torch.stack((rotated_first, rotated_second), dim=-1).reshape(x.shape)
    # END SOLUTION


def score_shift_invariance(q: torch.Tensor, k: torch.Tensor, shift: int, scheme: str,
                           q_pos: int = 10, k_pos: int = 3) -> float:
    """|score(q_pos + shift, k_pos + shift) - score(q_pos, k_pos)| for one query and one key.

    q, k: [d] vectors. Under 'rotary' the score is R(a) q . R(b) k with both vectors rotated
    by apply_rotary at their positions a and b; under 'sinusoidal' it is
    (q + PE[a]) . (k + PE[b]). Zero (up to rounding) means the score depends on the two
    positions only through their difference. Any other scheme raises ValueError.
    """
    # BEGIN SOLUTION
    width = q.shape[-1]
    if scheme == "rotary":
        pair = torch.stack((q, k))  # [2, d]: the query and the key as a sequence of two

        def attention_score(query_at: int, key_at: int) -> torch.Tensor:
            turned = apply_rotary(pair, torch.tensor([query_at, key_at]))
            return torch.dot(turned[0], turned[1])
    elif scheme == "sinusoidal":
        def attention_score(query_at: int, key_at: int) -> torch.Tensor:
            pe_query = torch.tensor(_encoding_row(query_at, width), dtype=torch.float64)
            pe_key = torch.tensor(_encoding_row(key_at, width), dtype=torch.float64)
            return torch.dot(q + pe_query.to(q.dtype), k + pe_key.to(k.dtype))
    else:
        raise ValueError(f"unknown scheme {scheme!r}: score_shift_invariance knows 'rotary' "
                         "and 'sinusoidal'")
    moved = attention_score(q_pos + shift, k_pos + shift)
    original = attention_score(q_pos, k_pos)
    return float((moved - original).abs())
    # END SOLUTION
