"""Sinusoidal and rotary position encodings (Problem 2, Parts B and C).

Students: you write every function here except _omega, which is given.

Both use the frequencies omega_i = 10000^(-2i/d) for i = 0 .. d/2 - 1 and the same
interleaved layout: dimensions (2i, 2i+1) form pair i.

    sinusoidal   PE[p, 2i] = sin(p omega_i),  PE[p, 2i+1] = cos(p omega_i), added to x
    rotary       pair i of a query or key at position p rotated by the angle p omega_i

Dtypes: sinusoidal_table, shift_rotation and rotary_frequencies return float32 tensors, and
apply_rotary returns x's dtype (float32 for float32 input). Computing in float32 or in
float64 and rounding at the end are both fine.
"""

import torch

SCHEMES = ("rotary", "sinusoidal")


def _omega(d_model: int) -> torch.Tensor:
    """[d_model / 2] float64: omega_i = 10000^(-2i/d) for i = 0 .. d/2 - 1."""
    return 10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)


def sinusoidal_table(max_len: int, d_model: int) -> torch.Tensor:
    """[max_len, d_model] float32: PE[p, 2i] = sin(p omega_i), PE[p, 2i+1] = cos(p omega_i)."""
    # BEGIN SOLUTION
    omega = _omega(d_model)  # [d/2]
    positions = torch.arange(max_len, dtype=torch.float64)
    angles = positions[:, None] * omega[None, :]  # [max_len, d/2]
    table = torch.empty(max_len, d_model, dtype=torch.float64)
    table[:, 0::2] = torch.sin(angles)
    table[:, 1::2] = torch.cos(angles)
    return table.float()
    # END SOLUTION


def shift_rotation(shift: int, d_model: int) -> torch.Tensor:
    """[d_model, d_model] float32 R_s with PE[p + s] = R_s PE[p] for every p.

    R_s is block diagonal: one 2x2 block per pair (2i, 2i+1), at rows and columns 2i and
    2i+1, and zeros elsewhere. Derive the block from the angle-addition identities for
    sin and cos; it must not depend on p.
    """
    # BEGIN SOLUTION
    # sin((p+s)w) = sin(pw) cos(sw) + cos(pw) sin(sw) and cos((p+s)w) = cos(pw) cos(sw)
    # - sin(pw) sin(sw): pair i of PE[p + s] is [[cos sw, sin sw], [-sin sw, cos sw]] times
    # pair i of PE[p], the same block for every p.
    angles = shift * _omega(d_model)  # [d/2]
    cos, sin = torch.cos(angles), torch.sin(angles)
    rotation = torch.zeros(d_model, d_model, dtype=torch.float64)
    even = torch.arange(0, d_model, 2)
    rotation[even, even] = cos
    rotation[even, even + 1] = sin
    rotation[even + 1, even] = -sin
    rotation[even + 1, even + 1] = cos
    return rotation.float()
    # END SOLUTION


def rotary_frequencies(d_model: int) -> torch.Tensor:
    """[d_model / 2] float32: theta_i = omega_i = 10000^(-2i/d), the sinusoidal frequencies."""
    # BEGIN SOLUTION
    return _omega(d_model).float()
    # END SOLUTION


def apply_rotary(x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """Rotate each pair (2i, 2i+1) of x at position p by the angle p theta_i.

    x: [..., T, d]; positions: [T] (integers or floats). Returns a tensor of x's shape and
    dtype in which pair i at position p is

        (x_2i cos(p theta_i) - x_2i+1 sin(p theta_i),  x_2i sin(p theta_i) + x_2i+1 cos(p theta_i)).

    No vector is added: a rotated query or key keeps its norm.
    """
    # BEGIN SOLUTION
    # The complex number x_2i + j x_2i+1 times exp(j p theta_i): one complex product instead
    # of six strided real ones, several times faster on CPU, forward and backward.
    theta = rotary_frequencies(x.shape[-1]).to(device=x.device, dtype=x.dtype)  # [d/2]
    angles = positions.to(device=x.device, dtype=x.dtype)[:, None] * theta  # [T, d/2]
    rotation = torch.complex(torch.cos(angles), torch.sin(angles))  # exp(j p theta_i)
    pairs = torch.view_as_complex(x.unflatten(-1, (-1, 2)).contiguous())  # [..., T, d/2]
    return torch.view_as_real(pairs * rotation).flatten(-2)  # [..., T, d], pairs interleaved
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
    if scheme not in SCHEMES:
        raise ValueError(f"scheme must be one of {SCHEMES}, got {scheme!r}")
    d_model = q.shape[-1]

    def score(a: int, b: int) -> torch.Tensor:
        if scheme == "rotary":
            q_at = apply_rotary(q[None, :], torch.tensor([a]))[0]
            k_at = apply_rotary(k[None, :], torch.tensor([b]))[0]
        else:
            table = sinusoidal_table(max(a, b) + 1, d_model).to(q.dtype)
            q_at, k_at = q + table[a], k + table[b]
        return q_at @ k_at

    return abs(score(q_pos + shift, k_pos + shift) - score(q_pos, k_pos)).item()
    # END SOLUTION
