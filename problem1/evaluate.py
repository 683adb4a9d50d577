"""Problem 1, Part E: test metrics of every trained run, and head analysis of the n4000 models.

Students: you write the four Part E functions; main, below them, is given. HEAD_NAMES and
attention_module, which remove_head uses, come from problem1/heads.py, beside the given
scorer of head sets that main runs your functions with (the rest of heads.py need not be
read).

    python evaluate.py                (from problem1/)
    python -m problem1.evaluate       (from the root)

For each of the six runs whose weights exist it records test exact match, test token
accuracy and steps_to_95 (from the training log) in results/metrics.json, keyed by run
name. On the two n4000 models it measures the test exact match with each of the 24 heads
removed alone (metrics.json['ablation']), prunes heads greedily down to none
(metrics.json['pruning']), and writes the mean attention maps, with the decoder fed its
own greedy predictions, to results/attention_maps.json. A missing run is reported in one
line and skipped.

    python evaluate.py --quick --results_dir /tmp/try     (a try on shortened runs)

--quick takes every number on the first QUICK_PAIRS (200) pairs of the test split instead of
all 2,000: the head analysis, nearly all of the time, then takes seconds, not minutes. Its
numbers are not the homework's, so it needs a --results_dir of its own.
"""

import argparse
import sys
import time

import torch

from problem1.config import ANALYSED_TRAIN_SIZE, PRESCRIBED, load_model
from problem1.dataset import BOS, DIGIT_ORDERS, AdditionDataset
from problem1.heads import HEAD_NAMES, HeadRemovalScorer, attention_module
from problem1.model import score_predictions
from provided.common import (
    ArgumentParser,
    HomeworkError,
    add_common_args,
    explicit_results_dir,
    script,
    setup,
)
from provided.results import BadFileError, read_json, write_json

QUICK_PAIRS = 200  # --quick: the test pairs (the first of the split) every number is taken on


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

    The model may be left in eval mode afterwards (the reference leaves it so); restoring
    the mode it was handed in is equally correct. A caller that trains next sets the mode
    itself, as train_step does with model.train().

    Returns {'encoder': [layers, h, 7, 7] self-attention, 'decoder_self': [layers, h, 4, 4],
    'decoder_cross': [layers, h, 4, 7]}, float tensors on the CPU: row j of a decoder map is
    output step j, column i of a cross map source position i. device is where the sources
    are moved, the model's own device; None means the device of the model's parameters.
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
    add_common_args(parser, "problem1")
    parser.add_argument("--quick", action="store_true",
                        help=f"a try: every number on the first {QUICK_PAIRS} test pairs only "
                             "(needs its own --results_dir)")
    args = parser.parse_args(argv)
    if args.quick:
        explicit_results_dir(args, "problem1", f"an evaluation with --quick (the first "
                                               f"{QUICK_PAIRS} test pairs)")
    return args


def test_splits(data_dir, quick: bool = False) -> dict:
    """{digit order: the test split in that order}, or with quick its first QUICK_PAIRS pairs
    (all of them where it has no more); a missing or bad data file stops the script with the
    data module's message."""
    try:
        splits = {order: AdditionDataset(data_dir, "test", order) for order in DIGIT_ORDERS}
        if quick and len(splits["forward"]) > QUICK_PAIRS:
            splits = {order: AdditionDataset(data_dir, "test", order, QUICK_PAIRS)
                      for order in DIGIT_ORDERS}
        return splits
    except (FileNotFoundError, ValueError) as err:
        raise HomeworkError(str(err)) from None


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


def decoded_runs(args, device):
    """Every prescribed run whose weights are in args.results_dir, in the order of
    PRESCRIBED, greedy-decoded on the test split of its digit order.

    Yields (model, its saved Config, the test split, predicted [N, 4] on the CPU). A
    missing run is skipped with one line; none at all stops the script. With args.quick
    the test split is its first QUICK_PAIRS pairs, announced in one line.
    """
    tests = test_splits(args.data_dir, getattr(args, "quick", False))
    if getattr(args, "quick", False):
        print(f"--quick: every number below is taken on the first {len(tests['forward'])} "
              "test pairs, not the homework's whole test split")
    found = False
    for config in PRESCRIBED:
        loaded = load_run(config, args, device)
        if loaded is None:
            continue
        found = True
        model, saved, _ = loaded
        test = tests[saved.digit_order]
        with torch.inference_mode():
            predicted = model.generate(test.src.to(device)).cpu()
        yield model, saved, test, predicted
    if not found:
        raise HomeworkError(f"no trained model in {args.results_dir}: run problem1/train.py first "
                            "(see the README)")


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


def test_metrics(run: str, predicted, test, results_dir) -> dict:
    """metrics.json's entry of one run, printed in one line: its test exact match and
    token accuracy (predicted [N, 4] against test.tgt_out) and its logged steps_to_95."""
    exact, token = score_predictions(predicted, test.tgt_out)
    metrics = {"test_exact_match": exact, "test_token_accuracy": token,
               "steps_to_95": logged_steps_to_95(run, results_dir)}
    print(f"{run}: test exact match {exact:.4f}, token accuracy {token:.4f}, "
          f"steps_to_95 {metrics['steps_to_95']}")
    return metrics


def rounded(tensor) -> list:
    return torch.round(tensor, decimals=5).tolist()


def head_analysis(model, test, device, run: str) -> tuple[dict, list[dict], dict]:
    """One n4000 model's single-head ablation, greedy pruning curve and mean attention maps
    (rounded lists) on the test split, with one line on how many heads it needs."""
    start = time.perf_counter()
    score = HeadRemovalScorer(model, test, device, remove_head, desc=run)
    ablation, pruning = single_head_ablation(score), greedy_pruning(score)
    maps = {name: rounded(m) for name, m in mean_attention_maps(model, test, device).items()}
    kept = [len(HEAD_NAMES) - len(point["removed"]) for point in pruning
            if point["test_exact_match"] >= 0.95]
    print(f"{run}: {score.calls} head sets scored for ablation and pruning; fewest heads "
          f"left with test exact match >= 0.95: {min(kept) if kept else None} "
          f"({time.perf_counter() - start:.0f} s)")
    return ablation, pruning, maps


@script
def main(argv=None) -> int:
    args = parse_args(argv)
    device = setup(args)
    metrics, ablation, pruning, maps = {}, {}, {}, {}
    start = time.perf_counter()
    for model, saved, test, predicted in decoded_runs(args, device):
        run = saved.run
        metrics[run] = test_metrics(run, predicted, test, args.results_dir)
        if saved.train_size == ANALYSED_TRAIN_SIZE:
            ablation[run], pruning[run], maps[run] = head_analysis(model, test, device, run)
    write_json(args.results_dir / "metrics.json",
               {**metrics, "ablation": ablation, "pruning": pruning})
    write_json(args.results_dir / "attention_maps.json", maps)
    print(f"wrote metrics.json, attention_maps.json to {args.results_dir} in "
          f"{time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
