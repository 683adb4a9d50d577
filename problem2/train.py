"""Train the offset-retrieval model under one position scheme (Problem 2, Part D).

    python train.py --position none | learned | sinusoidal | rotary

The configuration is fixed (CONFIG): Adam at learning rate 1e-3, batch size 64, 5 epochs
over the 20,000 training sequences of length 64, d_model = 64, one head. Each epoch is a
seeded shuffle of the training split, taken 64 sequences at a time (the last batch of an
epoch holds the remaining 32). --steps caps the number of optimizer steps, for tests only.

After every epoch the log records the loss and accuracy over the positions with a target:
on the training split as the mean over that epoch's batches (weighted by target count, so
it includes the early part of the epoch), and on the first 64 positions of every test
sequence (positions 7..63, all inside the training length) with the weights at the end of
the epoch. Writes results/training_log_{position}.json and results/model_{position}.pth.
"""

import argparse
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

if __package__ in (None, ""):  # run as `python train.py` from inside problem2/
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from problem2.dataset import IGNORE_INDEX, OffsetDataset  # noqa: E402
from problem2.model import POSITIONS, OffsetRetrievalModel  # noqa: E402
from provided.common import (  # noqa: E402
    add_common_args,
    atomic_torch_save,
    fail,
    setup,
    write_json,
)

CONFIG = {
    "optimizer": "Adam",
    "lr": 1e-3,
    "batch_size": 64,
    "epochs": 5,
    "d_model": 64,
    "num_heads": 1,
    "k": 7,
    "max_len": 128,
    "test_positions": 64,
}
EVAL_BATCH_SIZE = 500


def build_model(position: str, seed: int) -> OffsetRetrievalModel:
    """The untrained model of a run: torch's generator is reseeded right before construction,
    so evaluate.py rebuilds exactly the initial weights (e.g. the learned table) from the seed."""
    torch.manual_seed(seed)
    return OffsetRetrievalModel(position, d_model=CONFIG["d_model"], max_len=CONFIG["max_len"])


def loss_and_correct(logits: torch.Tensor, targets: torch.Tensor):
    """Summed cross-entropy, number of correct argmax predictions, and number of targets.

    logits [B, T, V], targets [B, T] with IGNORE_INDEX where there is no target; only the
    positions with a target count. Returns (loss_sum tensor, correct int, count int).
    """
    # BEGIN SOLUTION
    has_target = targets != IGNORE_INDEX
    loss_sum = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), reduction="sum",
                               ignore_index=IGNORE_INDEX)
    correct = ((logits.argmax(-1) == targets) & has_target).sum().item()
    return loss_sum, correct, has_target.sum().item()
    # END SOLUTION


@torch.no_grad()
def evaluate_split(model, tokens: torch.Tensor, targets: torch.Tensor,
                   batch_size: int = EVAL_BATCH_SIZE) -> dict:
    """{'loss', 'accuracy'} over the positions with a target of tokens/targets [N, T]."""
    # BEGIN SOLUTION
    model.eval()
    loss_sum, correct, count = 0.0, 0, 0
    for start in range(0, tokens.shape[0], batch_size):
        logits = model(tokens[start:start + batch_size])
        batch_loss, batch_correct, batch_count = loss_and_correct(
            logits, targets[start:start + batch_size])
        loss_sum += batch_loss.item()
        correct += batch_correct
        count += batch_count
    return {"loss": loss_sum / count, "accuracy": correct / count}
    # END SOLUTION


def train_epoch(model, optimizer, tokens: torch.Tensor, targets: torch.Tensor,
                generator: torch.Generator, batch_size: int, max_steps: int) -> dict:
    """One seeded shuffled pass over tokens/targets [N, T], at most max_steps steps.

    Each step minimizes the mean cross-entropy over the batch's positions with a target.
    Returns {'loss', 'accuracy', 'steps'}: the loss and accuracy summed over the epoch's
    batches and divided by the number of targets seen, and the number of steps taken.
    """
    # BEGIN SOLUTION
    model.train()
    order = torch.randperm(tokens.shape[0], generator=generator).to(tokens.device)
    loss_sum, correct, count, steps = 0.0, 0, 0, 0
    for start in range(0, tokens.shape[0], batch_size):
        if steps == max_steps:
            break
        batch = order[start:start + batch_size]
        batch_loss, batch_correct, batch_count = loss_and_correct(model(tokens[batch]),
                                                                  targets[batch])
        optimizer.zero_grad(set_to_none=True)
        (batch_loss / batch_count).backward()
        optimizer.step()
        loss_sum += batch_loss.item()
        correct += batch_correct
        count += batch_count
        steps += 1
    return {"loss": loss_sum / count, "accuracy": correct / count, "steps": steps}
    # END SOLUTION


def train(position: str, train_set: OffsetDataset, test_set: OffsetDataset,
          device: torch.device, seed: int, max_steps: int | None = None) -> tuple[dict, dict]:
    """Train one run; returns (log, state_dict)."""
    model = build_model(position, seed).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=CONFIG["lr"])
    generator = torch.Generator().manual_seed(seed)
    tokens, targets = train_set.tokens.to(device), train_set.targets.to(device)
    n = CONFIG["test_positions"]
    test_tokens = test_set.tokens[:, :n].to(device)
    test_targets = test_set.targets[:, :n].to(device)

    steps_left = float("inf") if max_steps is None else max_steps
    step, records = 0, []
    for epoch in range(1, CONFIG["epochs"] + 1):
        if steps_left <= 0:
            break
        start = time.perf_counter()
        stats = train_epoch(model, optimizer, tokens, targets, generator,
                            CONFIG["batch_size"], steps_left)
        step, steps_left = step + stats["steps"], steps_left - stats["steps"]
        test = evaluate_split(model, test_tokens, test_targets)
        records.append({"epoch": epoch, "step": step,
                        "train_loss": stats["loss"], "train_accuracy": stats["accuracy"],
                        "test_loss": test["loss"], "test_accuracy": test["accuracy"]})
        print(f"[{position}] epoch {epoch} step {step}: train loss {stats['loss']:.4f} "
              f"acc {stats['accuracy']:.4f} | test[0:{n}] loss {test['loss']:.4f} "
              f"acc {test['accuracy']:.4f} ({time.perf_counter() - start:.1f} s)", flush=True)

    log = {"run": position,
           "config": {**CONFIG, "position": position, "seed": seed, "max_steps": max_steps,
                      "train_sequences": len(train_set), "train_length": train_set.tokens.shape[1]},
           "log": records}
    return log, model.state_dict()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--position", required=True, choices=POSITIONS,
                        help="position scheme; also names the run")
    parser.add_argument("--steps", type=int, default=None,
                        help="stop after this many optimizer steps (tests only; default: "
                             "the full 5 epochs)")
    add_common_args(parser, "problem2")
    args = parser.parse_args(argv)
    if args.steps is not None and args.steps < 1:
        fail("--steps must be at least 1")
    device = setup(args)
    try:
        train_set = OffsetDataset(args.data_dir, "train", k=CONFIG["k"])
        test_set = OffsetDataset(args.data_dir, "test", k=CONFIG["k"])
    except FileNotFoundError as err:
        fail(str(err))

    start = time.perf_counter()
    log, state = train(args.position, train_set, test_set, device, args.seed, args.steps)
    write_json(args.results_dir / f"training_log_{args.position}.json", log)
    atomic_torch_save(state, args.results_dir / f"model_{args.position}.pth")
    print(f"[{args.position}] done in {time.perf_counter() - start:.1f} s; wrote "
          f"{args.results_dir / f'training_log_{args.position}.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
