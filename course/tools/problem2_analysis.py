"""Problem 2: the analyses behind the reference report, beyond what the homework asks.

    python -m course.tools.problem2_analysis [--results_dir DIR] [--device ...] [--threads N]
    (make problem2-analysis; seeds 1-4 with seeds-problem2)

It wraps the homework from outside: problem2/evaluate.py's own per_position_counts and run
loading, on the weights of every run in the results folder (as evaluate.py finds them), and
writes results/analysis.json beside metrics.json, keyed by scheme the same way:

    per_position        accuracy at each test position (null at 0..6, which have no target)
    attention           mean attention weight per query with a target, {'in_range',
                        'beyond'} for each key set: the target key i - 7 ('on_target'),
                        its neighbours at distances 5, 6, 8, 9 ('on_neighbours'), the keys
                        at distance 64 or more ('on_unseen_distances')
    position_score_margin  (learned, sinusoidal) how far the token-independent part of the
                        score ranks the target key above the others, per query position
    long_sequences      (sinusoidal, rotary) the evaluation-only length check: accuracy on
                        LONG_SEQUENCES = 200 fresh uniform sequences of length 512 (tokens in
                        [0, 16), drawn by their own torch.Generator seeded LONG_SEED = 2026),
                        the saved weights loaded into the same model rebuilt with max_len
                        512: {'seed', 'num_sequences', 'length', 'buckets' (the eight
                        64-position buckets 0-63 .. 448-511), 'beyond_128_255',
                        'beyond_256_511'}. learned is skipped (its table has 128 rows), and
                        so is none (it has no position to extrapolate).

and the top-level 'bag_of_tokens_ceiling' ({'in_range', 'beyond', 'buckets'} of 16
positions): the best accuracy any model without position information can reach, the
yardstick for 'none'. `python -m course.tools.problem2_figures` draws them.

Instructors only (course/tools/): evidence for the report, not part of the homework.
"""

import dataclasses
import math

import torch

from problem2.dataset import IGNORE_INDEX, VOCAB_SIZE
from problem2.evaluate import (
    BUCKET,
    TRAIN_LENGTH,
    K,
    load_runs,
    load_test_split,
    per_position_counts,
)
from provided.common import EVAL_BATCH_SIZE, ArgumentParser, add_common_args, script, setup
from provided.results import write_json

MARGIN_SCHEMES = ("learned", "sinusoidal")  # additive schemes: a position-only score exists
LONG_SEED = 2026  # the long-sequence check's own generator, apart from the prescribed data
LONG_SEQUENCES = 200
LONG_LENGTH = 512
LONG_BUCKET = 64
LONG_BATCH_SIZE = 10  # sequences per forward pass: 10 x 512 x 512 attention weights
LONG_SCHEMES = ("sinusoidal", "rotary")  # learned: 128 table rows; none: no position at all


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
    of attention_tallies (count [T]: the queries with a target at each position)."""
    T = count.shape[0]

    def mean_weight(name: str, start: int, end: int) -> float:
        return tallies[name][start:end].sum().item() / count[start:end].sum().item()

    return {name: {"in_range": mean_weight(name, 0, TRAIN_LENGTH),
                   "beyond": mean_weight(name, TRAIN_LENGTH, T)} for name in tallies}


def per_position_accuracy(correct: torch.Tensor, count: torch.Tensor) -> list:
    """Accuracy at each position [T], None where no sequence has a target."""
    return [c / n if n else None for c, n in zip(correct.tolist(), count.tolist())]


def bag_of_tokens_ceiling(tokens: torch.Tensor, k: int) -> torch.Tensor:
    """Per-position accuracy [T] (nan before k) of the best model without position information.

    Such a model sees the current token and the unordered bag of tokens 0..i. The target
    tokens[i - k] is one of the i tokens at 0..i-1, and since tokens are i.i.d. it is any one
    of them with equal probability: the best guess is the most frequent token among them,
    right with probability max_t count_t / i. Averaged over the sequences tokens [N, T].
    """
    T = tokens.shape[1]
    counts = torch.nn.functional.one_hot(tokens).cumsum(1).float()  # [N, T, V] over 0..i
    ceiling = torch.full((T,), math.nan)
    positions = torch.arange(k, T)
    ceiling[k:] = (counts[:, positions - 1].max(-1).values / positions).mean(0)
    return ceiling


def ceiling_summary(ceiling: torch.Tensor) -> dict:
    """bag_of_tokens_ceiling [T] averaged in range, beyond and per BUCKET positions."""
    return {"in_range": ceiling[:TRAIN_LENGTH].nanmean().item(),
            "beyond": ceiling[TRAIN_LENGTH:].nanmean().item(),
            "buckets": [ceiling[s:s + BUCKET].nanmean().item()
                        for s in range(0, ceiling.shape[0], BUCKET)]}


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
    long_sequence_accuracy on long_sequence_tokens. The entry analysis[scheme]['long_sequences']."""
    if config.position not in LONG_SCHEMES:
        raise ValueError(f"the long-sequence check covers {LONG_SCHEMES}, not "
                         f"{config.position!r} (a learned table has only {config.max_len} "
                         "rows; none has no position to extrapolate)")
    long_model = dataclasses.replace(config, max_len=length).build_model()
    long_model.load_state_dict(model.state_dict())
    long_model = long_model.to(device).eval()
    tokens = long_sequence_tokens(num_sequences, length, seed).to(device)
    return {"seed": seed, "num_sequences": num_sequences, "length": length,
            **long_sequence_accuracy(long_model, tokens, config.k)}


def analyse_run(model, config, tokens: torch.Tensor, targets: torch.Tensor, device) -> dict:
    """analysis.json's entry of one run, on the test split's tokens and targets [N, 128]."""
    counts = per_position_counts(model, tokens, targets)
    per_position = per_position_accuracy(counts["correct"], counts["count"])
    tallies = attention_tallies(model, tokens, targets, config.k)
    entry = {"per_position": per_position,
             "attention": attention_metrics(tallies, counts["count"])}
    if config.position in MARGIN_SCHEMES:
        margins = position_score_margins(model, tokens.shape[1], config.k)
        entry["position_score_margin"] = margin_summary(margins, per_position)
    if config.position in LONG_SCHEMES:
        entry["long_sequences"] = long_sequence_check(model, config, device)
    return entry


@script
def main(argv=None) -> int:
    parser = ArgumentParser(__doc__)
    args = add_common_args(parser, "problem2").parse_args(argv)  # evaluate.py's options
    device = setup(args)
    test_set = load_test_split(args.data_dir)
    runs = load_runs(args.results_dir, device)

    tokens, targets = test_set.tokens.to(device), test_set.targets.to(device)
    analysis = {}
    for position, (model, config, _) in runs.items():
        entry = analyse_run(model, config, tokens, targets, device)
        analysis[position] = entry
        target = entry["attention"]["on_target"]
        print(f"{position:>10}: weight on the target key in range {target['in_range']:.4f}, "
              f"beyond {target['beyond']:.4f}")
        if "long_sequences" in entry:
            long = entry["long_sequences"]
            print(f"{'':>10}  {long['num_sequences']} fresh sequences of {long['length']} "
                  f"(seed {long['seed']}), per {long['length'] // len(long['buckets'])} "
                  f"positions: {[round(b, 4) for b in long['buckets']]}")
    ceiling = ceiling_summary(bag_of_tokens_ceiling(test_set.tokens, K))
    analysis["bag_of_tokens_ceiling"] = ceiling
    print(f"bag-of-tokens ceiling: in range {ceiling['in_range']:.4f}, "
          f"beyond {ceiling['beyond']:.4f}")
    write_json(args.results_dir / "analysis.json", analysis)
    print(f"wrote {args.results_dir / 'analysis.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
