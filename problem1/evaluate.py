"""Problem 1, Part E: test metrics of every trained run, and head analysis of the n4000 models.

Students: you write the four Part E functions; main, below them, is given (it scores head
sets with problem1/heads.py, which need not be read).

    python evaluate.py                (from problem1/)
    python -m problem1.evaluate       (from the root)

For each of the six runs whose weights exist it records test exact match, test token
accuracy and steps_to_95 (from the training log) in results/metrics.json. On the two
n4000 models it measures the test exact match with each of the 24 heads removed alone
(metrics.json['ablation']), prunes heads greedily down to none (metrics.json['pruning']),
and writes the mean attention maps, with the decoder fed its own greedy predictions, to
results/attention_maps.json. results/breakdown.json locates each run's test errors: digit
accuracy per place of the sum, exact match by number of carries. A missing run is
reported in one line and skipped.
"""

import argparse
import sys
import time

import torch

from problem1.config import ANALYSED_TRAIN_SIZE, PRESCRIBED, load_model
from problem1.dataset import BOS, DIGIT_ORDERS, AdditionDataset
from problem1.heads import HeadRemovalScorer, breakdown
from problem1.model import score_predictions
from provided.common import ArgumentParser, HomeworkError, add_common_args, script, setup
from provided.results import BadFileError, read_json, write_json

# The 24 heads, in the order of the report: encoder self-attention of layers 0 and 1, then
# per decoder layer its causal self-attention and its cross-attention.
ATTENTIONS = ["enc0.self", "enc1.self", "dec0.self", "dec0.cross", "dec1.self", "dec1.cross"]
HEAD_NAMES = [f"{attention}.h{h}" for attention in ATTENTIONS for h in range(4)]


def attention_module(model, attention: str):
    """'enc0.self' / 'dec1.cross' ... -> that layer's MultiHeadAttention module."""
    stack, kind = attention.split(".")
    layers = model.encoder_layers if stack.startswith("enc") else model.decoder_layers
    layer = layers[int(stack[3:])]
    return layer.self_attn if kind == "self" else layer.cross_attn


def remove_head(model, name: str) -> None:
    """Remove head `name` (e.g. 'dec1.cross.h2') in place: zero its d_k input columns of W_o."""
    # BEGIN SOLUTION
    attention, head = name.rsplit(".", 1)
    module = attention_module(model, attention)
    h = int(head[1:])
    with torch.no_grad():
        module.W_o.weight[:, h * module.d_k:(h + 1) * module.d_k] = 0.0
    # END SOLUTION


def single_head_ablation(score, heads=HEAD_NAMES) -> dict:
    """{head: score([head])}: the test exact match with each head removed alone."""
    # BEGIN SOLUTION
    return {head: score([head]) for head in heads}
    # END SOLUTION


def greedy_pruning(score, heads=HEAD_NAMES) -> list[dict]:
    """Remove heads one at a time, each time the one whose removal costs the least.

    score(removed: list of head names) -> exact match of the model without those heads.
    The cost of every remaining head is recomputed after each removal (ties go to the
    head listed first). Returns [{'removed': [...in order], 'test_exact_match': ...}] for
    0, 1, ..., len(heads) heads removed.
    """
    # BEGIN SOLUTION
    removed, remaining = [], list(heads)
    curve = [{"removed": [], "test_exact_match": score([])}]
    while remaining:
        scores = {head: score(removed + [head]) for head in remaining}
        cheapest = max(remaining, key=scores.__getitem__)  # first head of the highest score
        removed.append(cheapest)
        remaining.remove(cheapest)
        curve.append({"removed": list(removed), "test_exact_match": scores[cheapest]})
    return curve
    # END SOLUTION


def mean_attention_maps(model, dataset, device=None) -> dict:
    """Mean attention weights over the split, the decoder fed its own greedy predictions,
    with the model in eval mode (dropout off) whatever mode it was handed in.

    Returns {'encoder': [layers, h, 7, 7] self-attention, 'decoder_self': [layers, h, 4, 4],
    'decoder_cross': [layers, h, 4, 7]}, float tensors on the CPU: row j of a decoder map is
    output step j, column i of a cross map source position i.
    """
    # BEGIN SOLUTION
    device = device or next(model.parameters()).device
    model.eval()
    src = dataset.src.to(device)
    with torch.inference_mode():
        predicted = model.generate(src)  # [N, 4]
        bos = torch.full_like(predicted[:, :1], BOS)
        tgt_in = torch.cat([bos, predicted[:, :-1]], dim=1)  # what greedy decoding saw
        _, attention = model(src, tgt_in)
    return {name: torch.stack([w.mean(dim=0) for w in attention[name]]).cpu()
            for name in ("encoder", "decoder_self", "decoder_cross")}
    # END SOLUTION


def parse_args(argv=None) -> argparse.Namespace:
    parser = ArgumentParser(__doc__)
    parser.add_argument("--heads", choices=("analyse", "skip"), default="analyse",
                        help="'skip' records only the test metrics, without the head analysis "
                             "of the n4000 runs (the extra seeds use it)")
    add_common_args(parser, "problem1")
    return parser.parse_args(argv)


def load_run(config, args, device):
    """The trained model of a prescribed run, or None (with one line saying what to run)
    if its weights are missing. Corrupt weights raise BadFileError."""
    path = args.results_dir / f"model_{config.run}.pth"
    if not path.exists():
        print(f"skipping {config.run}: {path} not found; train it with `python -m "
              f"problem1.train --digit_order {config.digit_order} --train_size "
              f"{config.train_size}`", file=sys.stderr)
        return None
    return load_model(path, device)


def logged_steps_to_95(run: str, results_dir):
    path = results_dir / f"training_log_{run}.json"
    if not path.exists():
        print(f"{run}: {path} not found, steps_to_95 recorded as null", file=sys.stderr)
        return None
    try:
        return read_json(path)["steps_to_95"]
    except (BadFileError, KeyError, TypeError):
        raise HomeworkError(f"{path} is not a finished training log: delete it and re-run "
                            "the run") from None


def rounded(tensor) -> list:
    return torch.round(tensor, decimals=5).tolist()


@script
def main(argv=None) -> int:
    args = parse_args(argv)
    device = setup(args)
    metrics, ablation, pruning, maps, errors = {}, {}, {}, {}, {}
    start = time.perf_counter()
    try:
        tests = {order: AdditionDataset(args.data_dir, "test", order) for order in DIGIT_ORDERS}
    except (FileNotFoundError, ValueError) as err:
        raise HomeworkError(str(err)) from None
    for config in PRESCRIBED:
        loaded = load_run(config, args, device)
        if loaded is None:
            continue
        model, saved = loaded
        run, test = saved.run, tests[saved.digit_order]
        with torch.inference_mode():
            predicted = model.generate(test.src.to(device)).cpu()
        exact, token = score_predictions(predicted, test.tgt_out)
        errors[run] = breakdown(predicted, test, saved.digit_order)
        metrics[run] = {"test_exact_match": exact, "test_token_accuracy": token,
                        "steps_to_95": logged_steps_to_95(run, args.results_dir)}
        print(f"{run}: test exact match {exact:.4f}, token accuracy {token:.4f}, "
              f"steps_to_95 {metrics[run]['steps_to_95']}")
        if saved.train_size == ANALYSED_TRAIN_SIZE and args.heads == "analyse":
            score = HeadRemovalScorer(model, test, device, desc=run)
            ablation[run] = single_head_ablation(score)
            pruning[run] = greedy_pruning(score)
            maps[run] = {name: rounded(m) for name, m in
                         mean_attention_maps(model, test, device).items()}
            kept = [len(HEAD_NAMES) - len(point["removed"]) for point in pruning[run]
                    if point["test_exact_match"] >= 0.95]
            print(f"{run}: {score.calls} head sets scored for ablation and pruning; fewest heads "
                  f"left with test exact match >= 0.95: {min(kept) if kept else None} "
                  f"({time.perf_counter() - start:.0f} s)")
    if not metrics:
        raise HomeworkError(f"no trained model in {args.results_dir}: run problem1/train.py first "
                            "(see the README)")
    metrics["ablation"] = ablation
    metrics["pruning"] = pruning
    write_json(args.results_dir / "metrics.json", metrics)
    written = ["metrics.json", "breakdown.json"]
    write_json(args.results_dir / "breakdown.json", errors)
    if args.heads == "analyse":
        write_json(args.results_dir / "attention_maps.json", maps)
        written.append("attention_maps.json")
    print(f"wrote {', '.join(written)} to {args.results_dir} in "
          f"{time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
