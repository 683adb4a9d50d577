"""Instructors only: an alternative solution of problem2/evaluate.py's regions.

Integer tallies per position, accuracies from Python loops over the positions, the shift
check one (p, s) pair at a time with torch.mv, the random draws taken first and scored
after, and the explicit rotation as a batch of 2x2 matrices through einsum. No top-level
helpers: splice would append them after this script's `__main__` guard.
"""

import math
from typing import TYPE_CHECKING

import torch

from problem2.dataset import IGNORE_INDEX
from problem2.positional import (
    apply_rotary,
    score_shift_invariance,
    shift_rotation,
    sinusoidal_table,
)
from provided.common import EVAL_BATCH_SIZE

if TYPE_CHECKING:  # names of problem2/evaluate.py itself; splice leaves this block out
    from problem2.evaluate import BUCKET, CHECK_SEED, SHIFT_PAIRS, TRAIN_LENGTH


@torch.no_grad()
def per_position_counts(model, tokens: torch.Tensor, targets: torch.Tensor,
                        batch_size: int = EVAL_BATCH_SIZE) -> dict:
    """Per-position tallies over the sequences of tokens/targets [N, T], in eval mode.

    Returns {'correct': [T], 'count': [T]} float tensors on the CPU: at position i, how many
    sequences have a target there (targets[:, i] != IGNORE_INDEX) and at how many of those
    the argmax of model(tokens) equals the target. Positions without a target count 0.
    """
    # BEGIN SOLUTION
    model.train(False)
    length = tokens.shape[1]
    hits = torch.zeros(length, dtype=torch.long)
    present = torch.zeros(length, dtype=torch.long)
    for first in range(0, len(tokens), batch_size):
        last = min(first + batch_size, len(tokens))
        guesses = model(tokens[first:last]).argmax(dim=-1).cpu()  # [b, T]
        wanted = targets[first:last].cpu()
        has_target = wanted.ne(IGNORE_INDEX)
        hits += (guesses.eq(wanted) & has_target).long().sum(dim=0)
        present += has_target.long().sum(dim=0)
    return {"correct": hits.float(), "count": present.float()}
    # END SOLUTION


def accuracy_over(correct: torch.Tensor, count: torch.Tensor, start: int, end: int):
    """Accuracy pooled over positions start..end-1 (targets only); None if there are none."""
    # BEGIN SOLUTION
    right, seen = 0.0, 0.0
    for position in range(*slice(start, end).indices(len(count))):
        right += float(correct[position])
        seen += float(count[position])
    if seen == 0:
        return None
    return right / seen
    # END SOLUTION


def position_metrics(correct: torch.Tensor, count: torch.Tensor) -> dict:
    """The accuracies of the homework from per_position_counts over the 128-position test
    split: {'in_range': positions 0-63, 'beyond': 64-127, 'beyond_buckets': [64-79, 80-95,
    96-111, 112-127], 'buckets': the eight 16-position buckets 0-15 .. 112-127}, each a
    float (None where no position has a target)."""
    # BEGIN SOLUTION
    length = len(count)
    result = {"in_range": accuracy_over(correct, count, 0, TRAIN_LENGTH),
              "beyond": accuracy_over(correct, count, TRAIN_LENGTH, length),
              "beyond_buckets": [], "buckets": []}
    for low in range(0, length, BUCKET):
        bucket = accuracy_over(correct, count, low, low + BUCKET)
        result["buckets"].append(bucket)
        if low >= TRAIN_LENGTH:
            result["beyond_buckets"].append(bucket)
    return result
    # END SOLUTION


def shift_rotation_max_error(d_model: int) -> float:
    """max over SHIFT_PAIRS of max_j |PE[p+s]_j - (R_s PE[p])_j|."""
    # BEGIN SOLUTION
    longest = max(p + s for p, s in SHIFT_PAIRS)
    table = sinusoidal_table(longest + 1, d_model)
    worst = 0.0
    for p, s in SHIFT_PAIRS:
        predicted = torch.mv(shift_rotation(s, d_model), table[p])
        worst = max(worst, float((predicted - table[p + s]).abs().amax()))
    return worst
    # END SOLUTION


def score_shift_errors(d_model: int, samples: int = 200, seed: int = CHECK_SEED) -> dict:
    """score_shift_invariance under both schemes on the same random draws.

    Each draw: q, k ~ N(0, I_d), a query position in [0, 64), a key position at or before
    it, and a shift in [1, 64]. Returns {'rotary_score_shift_error',
    'sinusoidal_score_shift_error': the maximum change per scheme,
    'sinusoidal_score_shift_error_median': the median change for sinusoidal,
    'score_magnitude_median': the median |q . k|, for scale}, each a float.
    """
    # BEGIN SOLUTION
    rng = torch.Generator()
    rng.manual_seed(seed)
    draws = []
    for _ in range(samples):
        vectors = torch.randn(2, d_model, generator=rng)
        query_at = torch.randint(0, TRAIN_LENGTH, (1,), generator=rng).item()
        key_at = torch.randint(0, query_at + 1, (1,), generator=rng).item()
        moved_by = torch.randint(1, TRAIN_LENGTH + 1, (1,), generator=rng).item()
        draws.append((vectors[0], vectors[1], int(query_at), int(key_at), int(moved_by)))
    changes = {"rotary": [], "sinusoidal": []}
    magnitudes = []
    for q, k, query_at, key_at, moved_by in draws:
        for scheme, values in changes.items():
            values.append(score_shift_invariance(q, k, moved_by, scheme, q_pos=query_at,
                                                 k_pos=key_at))
        magnitudes.append(abs(float(torch.dot(q, k))))

    def lower_median(values: list) -> float:  # torch.median's convention for an even count
        return sorted(values)[(len(values) - 1) // 2]

    return {"rotary_score_shift_error": max(changes["rotary"]),
            "sinusoidal_score_shift_error": max(changes["sinusoidal"]),
            "sinusoidal_score_shift_error_median": lower_median(changes["sinusoidal"]),
            "score_magnitude_median": lower_median(magnitudes)}
    # END SOLUTION


def pairwise_rotary(x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """Rotary written out: x [T, d], each pair (2i, 2i+1) at position p multiplied by the
    2x2 matrix [[cos a, -sin a], [sin a, cos a]], a = p * 10000^(-2i/d), in float64."""
    # BEGIN SOLUTION
    length, width = x.shape
    pairs = width // 2
    frequencies = torch.tensor([math.pow(10000.0, -2.0 * i / width) for i in range(pairs)],
                               dtype=torch.float64)
    angles = positions.to(torch.float64).reshape(length, 1) * frequencies  # [T, d/2]
    cos, sin = torch.cos(angles), torch.sin(angles)
    matrices = torch.stack((torch.stack((cos, -sin), dim=-1),
                            torch.stack((sin, cos), dim=-1)), dim=-2)  # [T, d/2, 2, 2]
    vectors = x.to(torch.float64).reshape(length, pairs, 2)
    return torch.einsum("tpij,tpj->tpi", matrices, vectors).reshape(length, width)
    # END SOLUTION


def rotary_vs_pairwise_error(d_model: int, length: int = 128, seed: int = CHECK_SEED) -> float:
    """max |apply_rotary(x) - pairwise_rotary(x)| on a random float32 x [length, d_model]."""
    # BEGIN SOLUTION
    rng = torch.Generator()
    rng.manual_seed(seed)
    sample = torch.randn(length, d_model, generator=rng)
    steps = torch.arange(length)
    library = apply_rotary(sample, steps).to(torch.float64)
    explicit = pairwise_rotary(sample, steps)
    per_row = (library - explicit).abs().amax(dim=1)
    return float(per_row.max())
    # END SOLUTION
