"""Evaluate the position schemes on the 128-position test split (Problem 2, Part E).

Students: you write the seven Part E functions; the rest of this file is given.

    python evaluate.py

For every run whose weights are present, results/metrics.json records under its scheme:

    in_range            accuracy over test positions 0..63 (targets at 7..63)
    beyond              accuracy over positions 64..127, never seen in training
    beyond_buckets      accuracy over 64-79, 80-95, 96-111, 112-127
    buckets             accuracy over all eight 16-position buckets 0-15 .. 112-127
                        (the bucket figure)
    table_drift         (learned only) each row's L2 distance from its initial value, and
                        its summary over rows 0-63 and 64-127 (see learned_table_drift)

and under the top-level 'checks' four numerical checks of the encodings themselves:

    shift_rotation_max_error      max |PE[p+s] - R_s PE[p]| over several (p, s)
    rotary_score_shift_error      max |score change| when query and key positions move
    sinusoidal_score_shift_error    together, over the same random (q, k, positions, shift)
    rotary_vs_pairwise_error      max |apply_rotary - an explicit per-pair 2x2 rotation|

(plus sinusoidal_score_shift_error_median and score_magnitude_median, which give them scale).

results/attention_maps.json keeps the attention weights of test sequence ATTENTION_SEQUENCE
under the sinusoidal and rotary models, in the windows 0-31 and 96-127, for the figure, and
under 'on_target' the mean (min, max) weight on the target key i - 7 in each window.
"""

import argparse
import math
import sys

import torch

from problem2.config import Config, load_model
from problem2.dataset import IGNORE_INDEX, SEQUENCE_LENGTHS, OffsetDataset, check_offset_split
from problem2.model import POSITIONS
from problem2.positional import (
    apply_rotary,
    score_shift_invariance,
    shift_rotation,
    sinusoidal_table,
)
from provided.common import (
    EVAL_BATCH_SIZE,
    ArgumentParser,
    HomeworkError,
    add_common_args,
    script,
    setup,
)
from provided.results import write_json

TRAIN_LENGTH = SEQUENCE_LENGTHS["train"]
K = Config.k
BUCKET = 16
CHECK_SEED = 641
SHIFT_PAIRS = [(p, s) for p in (0, 1, 5, 17, 63, 100, 127) for s in (1, 3, 7, 32, 64, 128)]
ATTENTION_SEQUENCE = 0  # index of the test sequence whose attention maps are saved
ATTENTION_SCHEMES = ("sinusoidal", "rotary")  # the models whose maps are saved
WINDOWS = ((0, 32), (96, 128))  # [start, end) of the query and key positions shown


@torch.no_grad()
def per_position_counts(model, tokens: torch.Tensor, targets: torch.Tensor,
                        batch_size: int = EVAL_BATCH_SIZE) -> dict:
    """Per-position tallies over the sequences of tokens/targets [N, T], in eval mode.

    Returns {'correct': [T], 'count': [T]} float tensors on the CPU: at position i, how many
    sequences have a target there (targets[:, i] != IGNORE_INDEX) and at how many of those
    the argmax of model(tokens) equals the target. Positions without a target count 0.
    """
    # BEGIN SOLUTION
    model.eval()
    T = tokens.shape[1]
    correct, count = torch.zeros(T), torch.zeros(T)
    for start in range(0, tokens.shape[0], batch_size):
        logits = model(tokens[start:start + batch_size])
        batch_targets = targets[start:start + batch_size]
        has_target = batch_targets != IGNORE_INDEX
        correct += ((logits.argmax(-1) == batch_targets) & has_target).sum(0).cpu()
        count += has_target.sum(0).cpu()
    return {"correct": correct, "count": count}
    # END SOLUTION


def accuracy_over(correct: torch.Tensor, count: torch.Tensor, start: int, end: int):
    """Accuracy pooled over positions start..end-1 (targets only); None if there are none."""
    # BEGIN SOLUTION
    total = count[start:end].sum().item()
    return correct[start:end].sum().item() / total if total else None
    # END SOLUTION


def position_metrics(correct: torch.Tensor, count: torch.Tensor) -> dict:
    """The accuracies of the homework from per_position_counts over the 128-position test
    split: {'in_range': positions 0-63, 'beyond': 64-127, 'beyond_buckets': [64-79, 80-95,
    96-111, 112-127], 'buckets': the eight 16-position buckets 0-15 .. 112-127}, each a
    float (None where no position has a target)."""
    # BEGIN SOLUTION
    T = count.shape[0]
    buckets = [accuracy_over(correct, count, s, s + BUCKET) for s in range(0, T, BUCKET)]
    return {
        "in_range": accuracy_over(correct, count, 0, TRAIN_LENGTH),
        "beyond": accuracy_over(correct, count, TRAIN_LENGTH, T),
        "beyond_buckets": buckets[TRAIN_LENGTH // BUCKET:],
        "buckets": buckets,
    }
    # END SOLUTION


def shift_rotation_max_error(d_model: int) -> float:
    """max over SHIFT_PAIRS of max_j |PE[p+s]_j - (R_s PE[p])_j|."""
    # BEGIN SOLUTION
    table = sinusoidal_table(max(p + s for p, s in SHIFT_PAIRS) + 1, d_model)
    return max((table[p + s] - shift_rotation(s, d_model) @ table[p]).abs().max().item()
               for p, s in SHIFT_PAIRS)
    # END SOLUTION


def score_shift_errors(d_model: int, samples: int = 200, seed: int = CHECK_SEED) -> dict:
    """score_shift_invariance under both schemes on the same random draws.

    Each draw: q, k ~ N(0, I_d), a query position in [0, 64), a key position at or before
    it, and a shift in [1, 64]. The seed fixes the draws: every call with the same seed
    draws the same q, k, positions and shifts. Returns {'rotary_score_shift_error',
    'sinusoidal_score_shift_error': the maximum change per scheme,
    'sinusoidal_score_shift_error_median': the median change for sinusoidal,
    'score_magnitude_median': the median |q . k|, for scale}, each a float.

    Call score_shift_invariance by the name this module imports from problem2.positional
    (a plain score_shift_invariance(...)): the tests replace evaluate.score_shift_invariance
    with known values to check the maximum and the median.
    """
    # BEGIN SOLUTION
    generator = torch.Generator().manual_seed(seed)
    rotary, sinusoidal, scale = [], [], []
    for _ in range(samples):
        q, k = torch.randn(2, d_model, generator=generator)
        q_pos = int(torch.randint(0, TRAIN_LENGTH, (1,), generator=generator))
        k_pos = int(torch.randint(0, q_pos + 1, (1,), generator=generator))
        shift = int(torch.randint(1, TRAIN_LENGTH + 1, (1,), generator=generator))
        positions = {"q_pos": q_pos, "k_pos": k_pos}
        rotary.append(score_shift_invariance(q, k, shift, "rotary", **positions))
        sinusoidal.append(score_shift_invariance(q, k, shift, "sinusoidal", **positions))
        scale.append(abs((q @ k).item()))
    return {"rotary_score_shift_error": max(rotary),
            "sinusoidal_score_shift_error": max(sinusoidal),
            "sinusoidal_score_shift_error_median": torch.tensor(sinusoidal).median().item(),
            "score_magnitude_median": torch.tensor(scale).median().item()}
    # END SOLUTION


def pairwise_rotary(x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """Rotary written out: x [T, d], each pair (2i, 2i+1) at position p multiplied by the
    2x2 matrix [[cos a, -sin a], [sin a, cos a]], a = p * 10000^(-2i/d), in float64."""
    # BEGIN SOLUTION
    T, d = x.shape
    out = torch.empty(T, d, dtype=torch.float64)
    for row, p in enumerate(positions.tolist()):
        for i in range(d // 2):
            angle = p * 10000.0 ** (-2 * i / d)
            block = torch.tensor([[math.cos(angle), -math.sin(angle)],
                                  [math.sin(angle), math.cos(angle)]], dtype=torch.float64)
            out[row, 2 * i:2 * i + 2] = block @ x[row, 2 * i:2 * i + 2].double()
    return out
    # END SOLUTION


def rotary_vs_pairwise_error(d_model: int, length: int = 128, seed: int = CHECK_SEED) -> float:
    """max |apply_rotary(x) - pairwise_rotary(x)| on a random float32 x [length, d_model]."""
    # BEGIN SOLUTION
    x = torch.randn(length, d_model, generator=torch.Generator().manual_seed(seed))
    positions = torch.arange(length)
    return (apply_rotary(x, positions).double() - pairwise_rotary(x, positions)).abs().max().item()
    # END SOLUTION


def checks(d_model: int) -> dict:
    """The four numerical checks of the encodings (plus two numbers that give them scale)."""
    return {"shift_rotation_max_error": shift_rotation_max_error(d_model),
            **score_shift_errors(d_model),
            "rotary_vs_pairwise_error": rotary_vs_pairwise_error(d_model)}


def learned_table_drift(trained: torch.Tensor, initial: torch.Tensor) -> dict:
    """How far each row of the learned position table moved in training.

    trained, initial: [max_len, d]. Adam moves a row only if it ever had a nonzero gradient,
    and row p has one only if position p occurs in a training sequence, so rows
    TRAIN_LENGTH.. should not have moved at all. Returns {'rows_0_63', 'rows_64_127': the
    mean, min and max distance, rows_moved and initial_row_norm_mean of those rows,
    'row_distance': [max_len] each row's L2 distance}.
    """
    distance = (trained.cpu() - initial.cpu()).norm(dim=1)  # [max_len]
    initial_norm = initial.cpu().norm(dim=1)

    def summary(rows: slice) -> dict:
        return {"mean": distance[rows].mean().item(), "min": distance[rows].min().item(),
                "max": distance[rows].max().item(), "rows_moved": int((distance[rows] > 0).sum()),
                "initial_row_norm_mean": initial_norm[rows].mean().item()}

    return {"rows_0_63": summary(slice(0, TRAIN_LENGTH)),
            "rows_64_127": summary(slice(TRAIN_LENGTH, None)),
            "row_distance": distance.tolist()}


@torch.no_grad()
def attention_windows(model, tokens: torch.Tensor, k: int) -> tuple[dict, dict]:
    """Attention weights of one sequence tokens [T] in each of WINDOWS (queries and keys
    both inside the window), rounded to 5 decimals, keyed 'start-end' (inclusive); and per
    window the weight on the target key i - k over the queries whose target key is inside:
    {'mean', 'min', 'max', 'queries'}."""
    model.eval()
    _, weights = model(tokens[None], return_attention=True)  # [1, T, T]
    weights = weights[0].cpu()
    maps, on_target = {}, {}
    for start, end in WINDOWS:
        name = f"{start}-{end - 1}"
        maps[name] = [[round(w, 5) for w in row] for row in weights[start:end, start:end].tolist()]
        queries = torch.arange(max(start + k, k), end)
        diagonal = weights[queries, queries - k]
        on_target[name] = {"mean": diagonal.mean().item(), "min": diagonal.min().item(),
                           "max": diagonal.max().item(), "queries": len(queries)}
    return maps, on_target


def parse_args(argv=None) -> argparse.Namespace:
    parser = ArgumentParser(__doc__)
    add_common_args(parser, "problem2")
    return parser.parse_args(argv)


def load_test_split(data_dir) -> OffsetDataset:
    """The 128-position test split; a missing or bad file stops the script with one line."""
    try:
        check_offset_split(data_dir, "test")  # a bad file stops before any work
        return OffsetDataset(data_dir, "test", k=K)
    except (FileNotFoundError, ValueError) as err:
        raise HomeworkError(str(err)) from None


def load_runs(results_dir, device) -> dict:
    """{position: (model, config, checkpoint)} for every run whose weights are present;
    corrupt weights stop the script with one line."""
    runs = {}
    for position in POSITIONS:
        path = results_dir / f"model_{position}.pth"
        if not path.exists():
            print(f"skipping {position}: {path} not found; train it with "
                  f"`python -m problem2.train --position {position}`", file=sys.stderr)
            continue
        runs[position] = load_model(path, device)
    if not runs:
        raise HomeworkError(f"no model_*.pth in {results_dir}: run train.py first (see the README)")
    return runs


@script
def main(argv=None) -> int:
    args = parse_args(argv)
    device = setup(args)
    test_set = load_test_split(args.data_dir)
    runs = load_runs(args.results_dir, device)

    tokens, targets = test_set.tokens.to(device), test_set.targets.to(device)
    metrics, maps = {}, {"sequence_index": ATTENTION_SEQUENCE, "k": K,
                         "tokens": test_set.tokens[ATTENTION_SEQUENCE].tolist(), "on_target": {}}
    for position, (model, config, _) in runs.items():
        counts = per_position_counts(model, tokens, targets)
        entry = position_metrics(counts["correct"], counts["count"])
        if position == "learned":
            initial = config.build_model().pos_emb.weight.detach()
            entry["table_drift"] = learned_table_drift(model.pos_emb.weight, initial)
        if position in ATTENTION_SCHEMES:
            maps[position], maps["on_target"][position] = attention_windows(
                model, tokens[ATTENTION_SEQUENCE], K)
        metrics[position] = entry
        print(f"{position:>10}: in_range {entry['in_range']:.4f}  beyond {entry['beyond']:.4f}  "
              f"buckets beyond {[round(b, 4) for b in entry['beyond_buckets']]}")

    metrics["checks"] = checks(Config.d_model)
    print("checks:", {name: f"{value:.3g}" for name, value in metrics["checks"].items()})
    write_json(args.results_dir / "metrics.json", metrics)
    write_json(args.results_dir / "attention_maps.json", maps)
    print(f"wrote {args.results_dir / 'metrics.json'} and attention_maps.json")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
