"""Evaluate the position schemes on the 128-position test split (Problem 2, Part E).

Students: you write the seven Part E functions; the other analyses here serve the reference
report and need not be read.

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
import dataclasses
import math
import sys

import torch

from problem2.config import Config, build_model, load_model
from problem2.dataset import IGNORE_INDEX, VOCAB_SIZE, OffsetDataset, check_offset_split
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
    BadFileError,
    add_common_args,
    fail,
    script,
    setup,
    write_json,
)

TRAIN_LENGTH = 64
K = Config.k
BUCKET = 16
ATTENTION_SEQUENCE = 0  # index of the test sequence whose attention maps are saved
WINDOWS = ((0, 32), (96, 128))  # [start, end) of the query and key positions shown
CHECK_SEED = 641
SHIFT_PAIRS = [(p, s) for p in (0, 1, 5, 17, 63, 100, 127) for s in (1, 3, 7, 32, 64, 128)]
LONG_SEED = 2026  # the long-sequence check's own generator, apart from the prescribed data
LONG_SEQUENCES = 200
LONG_LENGTH = 512
LONG_BUCKET = 64
LONG_BATCH_SIZE = 50  # sequences per forward pass: 50 x 512 x 512 attention weights
LONG_SCHEMES = ("sinusoidal", "rotary")  # learned: 128 table rows; none: no position at all


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


@torch.no_grad()
def attention_tallies(model, tokens: torch.Tensor, targets: torch.Tensor, k: int,
                      batch_size: int = EVAL_BATCH_SIZE) -> dict:
    """Where the attention goes, per query position [T], summed over the sequences.

    Only queries with a target count. The attention weight of query i is summed over three
    sets of keys: 'on_target' the key i - k, 'on_neighbours' the keys at distances k-2,
    k-1, k+1, k+2, and 'on_unseen_distances' the keys at distance TRAIN_LENGTH or more, a
    distance no training sequence contains.
    """
    model.eval()
    T = tokens.shape[1]
    distance = torch.arange(T)[:, None] - torch.arange(T)[None, :]  # [T, T], query - key
    key_sets = {"on_target": distance == k,
                "on_neighbours": ((distance - k).abs() <= 2) & (distance != k),
                "on_unseen_distances": distance >= TRAIN_LENGTH}
    tallies = {name: torch.zeros(T) for name in key_sets}
    for start in range(0, tokens.shape[0], batch_size):
        _, weights = model(tokens[start:start + batch_size], return_attention=True)
        has_target = (targets[start:start + batch_size] != IGNORE_INDEX).cpu()
        weights = weights.cpu()
        for name, keys in key_sets.items():
            tallies[name] += ((weights * keys).sum(2) * has_target).sum(0)
    return tallies


def attention_metrics(tallies: dict, count: torch.Tensor) -> dict:
    """Mean attention weight per query with a target, in range and beyond, for each key set
    of attention_tallies."""
    T = count.shape[0]

    def mean_weight(name: str, start: int, end: int) -> float:
        return tallies[name][start:end].sum().item() / count[start:end].sum().item()

    return {name: {"in_range": mean_weight(name, 0, TRAIN_LENGTH),
                   "beyond": mean_weight(name, TRAIN_LENGTH, T)} for name in tallies}


def per_position_accuracy(correct: torch.Tensor, count: torch.Tensor) -> list:
    """Accuracy at each position, None where no sequence has a target."""
    return [c / n if n else None for c, n in zip(correct.tolist(), count.tolist())]


def bag_of_tokens_ceiling(tokens: torch.Tensor, k: int) -> torch.Tensor:
    """Per-position accuracy [T] (nan before k) of the best model without position information.

    Such a model sees the current token and the unordered bag of tokens 0..i. The target
    tokens[i - k] is one of the i tokens at 0..i-1, and since tokens are i.i.d. it is any one
    of them with equal probability: the best guess is the most frequent token among them,
    right with probability max_t count_t / i. Averaged over the sequences.
    """
    T = tokens.shape[1]
    counts = torch.nn.functional.one_hot(tokens).cumsum(1).float()  # [N, T, V] over 0..i
    ceiling = torch.full((T,), math.nan)
    positions = torch.arange(k, T)
    ceiling[k:] = (counts[:, positions - 1].max(-1).values / positions).mean(0)
    return ceiling


@torch.no_grad()
def position_score_margins(model, length: int, k: int) -> torch.Tensor:
    """Per-query margin [length] (nan before k) of the token-independent part of the score.

    For an additive scheme (learned, sinusoidal) with position vectors P_i, that part is
    S[i, j] = (W_q P_i + b_q) . (W_k P_j + b_k) / sqrt(d); the margin at query i is
    S[i, i - k] - max over the other keys j <= i of S[i, j]. Positive: position alone ranks
    the target key first, before the tokens enter.
    """
    if model.position == "learned":
        vectors = model.pos_emb.weight[:length]
    else:
        vectors = model.pe[:length]
    scores = model.W_q(vectors) @ model.W_k(vectors).T / math.sqrt(model.d_model)  # [T, T]
    queries = torch.arange(k, length)
    target = scores[queries, queries - k]
    others = scores.masked_fill(torch.ones_like(scores, dtype=torch.bool).triu(1), -math.inf)
    others[queries, queries - k] = -math.inf
    margins = torch.full((length,), math.nan)
    margins[k:] = (target - others[k:].max(-1).values).cpu()
    return margins


def margin_summary(margins: torch.Tensor, per_position: list) -> dict:
    """The margins of position_score_margins in range and beyond, and the beyond accuracy
    at the positions where the margin is positive and where it is not."""
    accuracy = torch.tensor([math.nan if a is None else a for a in per_position])
    beyond = slice(TRAIN_LENGTH, None)
    positive = margins[beyond] > 0
    return {"in_range_min": margins[:TRAIN_LENGTH].nan_to_num(math.inf).min().item(),
            "in_range_mean": margins[:TRAIN_LENGTH].nanmean().item(),
            "beyond_min": margins[beyond].min().item(),
            "beyond_mean": margins[beyond].mean().item(),
            "beyond_fraction_positive": positive.float().mean().item(),
            "beyond_accuracy_where_positive": accuracy[beyond][positive].mean().item(),
            "beyond_accuracy_where_not": accuracy[beyond][~positive].mean().item(),
            "per_position": margins.tolist()}


def learned_table_drift(trained: torch.Tensor, initial: torch.Tensor) -> dict:
    """How far each row of the learned position table moved in training.

    trained, initial: [max_len, d]. Adam moves a row only if it ever had a nonzero gradient,
    and row p has one only if position p occurs in a training sequence, so rows
    TRAIN_LENGTH.. should not have moved at all.
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


@torch.no_grad()
def attention_windows(model, tokens: torch.Tensor, k: int) -> tuple[dict, dict]:
    """Attention weights of one sequence tokens [T] in each of WINDOWS (queries and keys
    both inside the window), rounded to 5 decimals, keyed 'start-end' (inclusive); and per
    window the weight on the target key i - k over the queries whose target key is inside."""
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


def long_sequence_tokens(num_sequences: int = LONG_SEQUENCES, length: int = LONG_LENGTH,
                         seed: int = LONG_SEED) -> torch.Tensor:
    """[num_sequences, length] uniform tokens in [0, VOCAB_SIZE) from a torch.Generator of
    their own (seeded `seed`): the same draw on every machine and in every run, and none of
    the prescribed data."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, VOCAB_SIZE, (num_sequences, length), generator=generator)


@torch.no_grad()
def long_sequence_accuracy(model, tokens: torch.Tensor, k: int, bucket: int = LONG_BUCKET,
                           batch_size: int = LONG_BATCH_SIZE) -> dict:
    """Offset-retrieval accuracy of model on tokens [N, T] (on the model's device; targets
    built here: the target at position i >= k is tokens[:, i - k]; positions 0..k-1 have
    none), in eval mode.

    Returns {'buckets': accuracy over each `bucket` positions 0..bucket-1, ..., (None where a
    bucket holds no target), 'beyond_128_255', 'beyond_256_511': pooled accuracy over those
    positions (None if the sequences are too short to reach them)}.
    """
    model.eval()
    N, T = tokens.shape
    correct = torch.zeros(T)
    for start in range(0, N, batch_size):
        batch = tokens[start:start + batch_size]
        predicted = model(batch).argmax(-1)  # [B, T]
        correct[k:] += (predicted[:, k:] == batch[:, :T - k]).sum(0).cpu().float()
    count = torch.zeros(T)
    count[k:] = N

    def pooled(first: int, end: int):
        total = count[first:end].sum().item()
        return correct[first:end].sum().item() / total if total else None

    return {"buckets": [pooled(s, s + bucket) for s in range(0, T, bucket)],
            "beyond_128_255": pooled(128, 256), "beyond_256_511": pooled(256, 512)}


def long_sequence_check(model, config, device, num_sequences: int = LONG_SEQUENCES,
                        length: int = LONG_LENGTH, seed: int = LONG_SEED) -> dict:
    """The evaluation-only length check of one sinusoidal or rotary run: its weights loaded
    into the model rebuilt from its Config with max_len = length (the sinusoidal table is a
    non-persistent buffer and rotary has no table, so the state dicts match), then
    long_sequence_accuracy on long_sequence_tokens. The entry metrics[scheme]['long_sequences']."""
    if config.position not in LONG_SCHEMES:
        raise ValueError(f"the long-sequence check covers {LONG_SCHEMES}, not "
                         f"{config.position!r} (a learned table has only {config.max_len} "
                         "rows; none has no position to extrapolate)")
    long_model = build_model(dataclasses.replace(config, max_len=length))
    long_model.load_state_dict(model.state_dict())
    long_model = long_model.to(device).eval()
    tokens = long_sequence_tokens(num_sequences, length, seed).to(device)
    return {"seed": seed, "num_sequences": num_sequences, "length": length,
            **long_sequence_accuracy(long_model, tokens, config.k)}


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
        try:
            runs[position] = load_model(path, device)
        except BadFileError as err:
            fail(str(err))
    if not runs:
        fail(f"no model_*.pth in {results_dir}: run train.py first (see the README)")
    return runs


@script
def main(argv=None) -> int:
    args = parse_args(argv)
    device = setup(args)
    try:
        check_offset_split(args.data_dir, "test")  # a bad file stops before any work
        test_set = OffsetDataset(args.data_dir, "test", k=K)
    except (FileNotFoundError, ValueError) as err:
        fail(str(err))
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
            initial = build_model(config).pos_emb.weight.detach()
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
            print(f"{'':>10}  {LONG_SEQUENCES} fresh sequences of {LONG_LENGTH} (seed "
                  f"{LONG_SEED}), per {LONG_BUCKET} positions: "
                  f"{[round(b, 4) for b in m['long_sequences']['buckets']]}")

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
