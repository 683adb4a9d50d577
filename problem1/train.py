"""Problem 1, Part D: train the addition transformer in one digit order on one training size.

    python train.py --digit_order reversed --train_size 4000      (from problem1/)
    python -m problem1.train --digit_order reversed --train_size 4000   (from the root)

The configuration is fixed by the homework: Adam, learning rate 1e-3, batch size 128,
2,400 steps, validation by greedy decoding (never teacher forcing) after steps 50, 100, ...
Batches are consecutive slices of seeded random permutations of the max_pairs training
pairs, one permutation per pass, so every batch holds 128 pairs. The run is named
{digit_order}_n{train_size}; it writes results/training_log_{run}.json (after every
validation, so a running job can be watched) and results/model_{run}.pth at the end.
--steps shortens a run, for the tests only; a shortened run also validates after its last step.
"""

import argparse
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

if __package__ in (None, ""):  # run as `python train.py` from inside problem1/
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from problem1.dataset import DIGIT_ORDERS, AdditionDataset  # noqa: E402
from problem1.model import AdditionTransformer  # noqa: E402
from provided.common import add_common_args, atomic_torch_save, fail, setup, write_json  # noqa: E402

LR = 1e-3
BATCH_SIZE = 128
STEPS = 2400
EVAL_EVERY = 50
THRESHOLD = 0.95
TRAIN_SIZES = (1000, 2000, 4000)


def run_name(digit_order: str, train_size: int) -> str:
    return f"{digit_order}_n{train_size}"


def batch_indices(num_items: int, batch_size: int, generator: torch.Generator):
    """Endless stream of [batch_size] index tensors: shuffled passes over range(num_items)."""
    pending = torch.empty(0, dtype=torch.long)
    while True:
        while len(pending) < batch_size:
            pending = torch.cat([pending, torch.randperm(num_items, generator=generator)])
        yield pending[:batch_size]
        pending = pending[batch_size:]


def train_step(model, optimizer, src, tgt_in, tgt_out) -> float:
    """One Adam step of teacher-forced cross-entropy over the four output digits.

    src [B, 7], tgt_in [B, 4], tgt_out [B, 4]. Returns the batch's mean loss.
    """
    # BEGIN SOLUTION
    model.train()
    logits, _ = model(src, tgt_in)  # [B, 4, vocab]
    loss = F.cross_entropy(logits.flatten(0, 1), tgt_out.flatten())
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    return loss.item()
    # END SOLUTION


def validate(model, dataset, device=None) -> tuple[float, float]:
    """Greedy-decode every source of the split at once and compare with tgt_out.

    Returns (exact match: fraction of sums with all four digits right,
    token accuracy: fraction of digits right). No teacher forcing: each digit is predicted
    after the model's own earlier digits.
    """
    # BEGIN SOLUTION
    device = device or next(model.parameters()).device
    model.eval()
    with torch.inference_mode():
        predicted = model.generate(dataset.src.to(device)).cpu()  # [N, 4]
    return score_predictions(predicted, dataset.tgt_out)
    # END SOLUTION


def score_predictions(predicted, target) -> tuple[float, float]:
    """predicted, target [N, 4] -> (exact match, token accuracy), as Python floats."""
    # BEGIN SOLUTION
    correct = predicted == target  # [N, 4]
    return correct.all(dim=1).sum().item() / len(correct), correct.sum().item() / correct.numel()
    # END SOLUTION


def steps_to_95(log: list[dict], threshold: float = THRESHOLD):
    """The first logged step whose val_exact_match reaches threshold, or None."""
    # BEGIN SOLUTION
    for point in log:
        if point["val_exact_match"] >= threshold:
            return point["step"]
    return None
    # END SOLUTION


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--digit_order", required=True,
                        help=f"order of the sum's digits: one of {', '.join(DIGIT_ORDERS)}")
    parser.add_argument("--train_size", type=int, required=True,
                        help="number of training pairs (the homework uses "
                             f"{', '.join(map(str, TRAIN_SIZES))})")
    parser.add_argument("--steps", type=int, default=STEPS,
                        help="training steps (default: %(default)s; change it only in tests)")
    add_common_args(parser, "problem1")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.digit_order not in DIGIT_ORDERS:
        fail(f"--digit_order must be forward or reversed, not {args.digit_order!r}; e.g. "
             "`python -m problem1.train --digit_order reversed --train_size 4000`")
    if args.steps < 1:
        fail(f"--steps must be positive, not {args.steps}")
    device = setup(args)
    try:
        train = AdditionDataset(args.data_dir, "train", args.digit_order, args.train_size)
        val = AdditionDataset(args.data_dir, "val", args.digit_order)
    except FileNotFoundError as err:
        fail(str(err))
    except ValueError as err:
        fail(f"--train_size {args.train_size} is out of range ({err}); the homework's runs use "
             f"--train_size {', '.join(map(str, TRAIN_SIZES))}")

    run = run_name(args.digit_order, args.train_size)
    config = {"digit_order": args.digit_order, "train_size": args.train_size, "lr": LR,
              "batch_size": BATCH_SIZE, "steps": args.steps, "eval_every": EVAL_EVERY,
              "seed": args.seed, "d_model": 128, "num_heads": 4, "d_ff": 256,
              "num_layers": 2, "dropout": 0.1}
    model = AdditionTransformer().to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=LR)
    src, tgt_in, tgt_out = (t.to(device) for t in (train.src, train.tgt_in, train.tgt_out))
    batches = batch_indices(len(train), BATCH_SIZE,
                            torch.Generator().manual_seed(args.seed))
    log_path = args.results_dir / f"training_log_{run}.json"
    log, losses, start = [], [], time.perf_counter()
    for step in range(1, args.steps + 1):
        index = next(batches).to(device)
        losses.append(train_step(model, optimizer, src[index], tgt_in[index], tgt_out[index]))
        if step % EVAL_EVERY == 0 or step == args.steps:
            exact, token = validate(model, val, device)
            log.append({"step": step, "train_loss": sum(losses) / len(losses),
                        "val_exact_match": exact, "val_token_accuracy": token})
            losses = []
            write_json(log_path, {"run": run, "config": config, "log": log,
                                  "steps_to_95": steps_to_95(log)})
            print(f"{run} step {step:5d}  loss {log[-1]['train_loss']:.4f}  "
                  f"val exact {exact:.4f}  token {token:.4f}  "
                  f"({time.perf_counter() - start:.0f} s)", flush=True)
    atomic_torch_save(model.state_dict(), args.results_dir / f"model_{run}.pth")
    print(f"{run}: steps_to_95 = {steps_to_95(log)}; wrote {log_path} and "
          f"model_{run}.pth in {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
