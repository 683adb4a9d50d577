"""Evaluate the position schemes on the 128-position test split (Problem 2, Part E).

Students: you write the seven Part E functions; main records them with the report's own
analyses (problem2/analysis.py), which need not be read.

    python evaluate.py

For every run whose weights are present, results/metrics.json records under its scheme:

    in_range            accuracy over test positions 0..63 (targets at 7..63)
    beyond              accuracy over positions 64..127, never seen in training
    beyond_buckets      accuracy over 64-79, 80-95, 96-111, 112-127
    buckets             accuracy over all eight 16-position buckets 0-15 .. 112-127
    per_position        accuracy at each position (null at 0..6, which have no target)
    attention           mean attention weight on the target key i - 7, on its neighbours
                        (distances 5, 6, 8, 9), and on keys at distance 64 or more
    table_drift         (learned only) each row's L2 distance from its initial value
    position_score_margin  (learned, sinusoidal) how far the token-independent part of the
                        score ranks the target key above the others, per query position

and under the top-level 'checks' four numerical checks of the encodings themselves:

    shift_rotation_max_error      max |PE[p+s] - R_s PE[p]| over several (p, s)
    rotary_score_shift_error      max |score change| when query and key positions move
    sinusoidal_score_shift_error    together, over the same random (q, k, positions, shift)
    rotary_vs_pairwise_error      max |apply_rotary - an explicit per-pair 2x2 rotation|

and, for sinusoidal and rotary only, an evaluation-only length check outside the
prescribed data:

    long_sequences      accuracy on LONG_SEQUENCES = 200 fresh uniform sequences of length
                        512 (tokens in [0, 16), drawn by their own torch.Generator seeded
                        LONG_SEED = 2026), the saved weights loaded into the same model rebuilt
                        with max_len 512: {'seed', 'num_sequences', 'length', 'buckets' (the
                        eight 64-position buckets 0-63 .. 448-511), 'beyond_128_255',
                        'beyond_256_511'}. The learned scheme is skipped (its table has 128
                        rows), and so is none (it has no position to extrapolate).

The top-level 'bag_of_tokens_ceiling' is the best accuracy any model without position
information can reach (see bag_of_tokens_ceiling), the yardstick for 'none'.

results/attention_maps.json keeps the attention weights of one test sequence under the
sinusoidal and rotary models, in the windows 0-31 and 96-127, for the figures.
"""

import argparse
import math
import sys

import torch

from problem2.analysis import (
    ATTENTION_SEQUENCE,
    LONG_SCHEMES,
    attention_metrics,
    attention_tallies,
    attention_windows,
    bag_of_tokens_ceiling,
    learned_table_drift,
    long_sequence_check,
    margin_summary,
    per_position_accuracy,
    position_score_margins,
)
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
    it, and a shift in [1, 64]. Returns {'rotary_score_shift_error',
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


def parse_args(argv=None) -> argparse.Namespace:
    parser = ArgumentParser(__doc__)
    add_common_args(parser, "problem2")
    return parser.parse_args(argv)


def load_runs(results_dir, device) -> dict:
    """{position: (model, config)} for every run whose weights are present; corrupt weights
    stop the script with one line."""
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
    try:
        check_offset_split(args.data_dir, "test")  # a bad file stops before any work
        test_set = OffsetDataset(args.data_dir, "test", k=K)
    except (FileNotFoundError, ValueError) as err:
        raise HomeworkError(str(err)) from None
    runs = load_runs(args.results_dir, device)

    tokens, targets = test_set.tokens.to(device), test_set.targets.to(device)
    metrics, maps = {}, {"sequence_index": ATTENTION_SEQUENCE, "k": K,
                         "tokens": test_set.tokens[ATTENTION_SEQUENCE].tolist(), "on_target": {}}
    for position, (model, config) in runs.items():
        counts = per_position_counts(model, tokens, targets)
        metrics[position] = {
            **position_metrics(counts["correct"], counts["count"]),
            "per_position": per_position_accuracy(counts["correct"], counts["count"]),
            "attention": attention_metrics(attention_tallies(model, tokens, targets, K),
                                           counts["count"])}
        if position == "learned":
            initial = config.build_model().pos_emb.weight.detach()
            metrics[position]["table_drift"] = learned_table_drift(model.pos_emb.weight, initial)
        if position in ("learned", "sinusoidal"):
            margins = position_score_margins(model, tokens.shape[1], K)
            metrics[position]["position_score_margin"] = margin_summary(
                margins, metrics[position]["per_position"])
        if position in ("sinusoidal", "rotary"):
            maps[position], maps["on_target"][position] = attention_windows(
                model, tokens[ATTENTION_SEQUENCE], K)
        m = metrics[position]
        print(f"{position:>10}: in_range {m['in_range']:.4f}  beyond {m['beyond']:.4f}  "
              f"buckets beyond {[round(b, 4) for b in m['beyond_buckets']]}")
        if position in LONG_SCHEMES:
            m["long_sequences"] = long_sequence_check(model, config, device)
            long = m["long_sequences"]
            print(f"{'':>10}  {long['num_sequences']} fresh sequences of {long['length']} "
                  f"(seed {long['seed']}), per {long['length'] // len(long['buckets'])} "
                  f"positions: {[round(b, 4) for b in long['buckets']]}")

    ceiling = bag_of_tokens_ceiling(test_set.tokens, K)
    metrics["bag_of_tokens_ceiling"] = {
        "in_range": ceiling[:TRAIN_LENGTH].nanmean().item(),
        "beyond": ceiling[TRAIN_LENGTH:].nanmean().item(),
        "buckets": [ceiling[s:s + BUCKET].nanmean().item()
                    for s in range(0, ceiling.shape[0], BUCKET)]}
    metrics["checks"] = checks(Config.d_model)
    print("checks:", {name: f"{value:.3g}" for name, value in metrics["checks"].items()})
    write_json(args.results_dir / "metrics.json", metrics)
    write_json(args.results_dir / "attention_maps.json", maps)
    print(f"wrote {args.results_dir / 'metrics.json'} and attention_maps.json")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
