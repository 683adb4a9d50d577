"""Train the offset-retrieval model under one position scheme (Problem 2, Part D).

Students: you write the three Part D functions; the rest (arguments, logs) is given and need
not be read.

    python train.py --position none | learned | sinusoidal | rotary

The configuration is fixed (Config, in config.py): Adam at learning rate 1e-3, batch size 64,
5 epochs over the 20,000 training sequences of length 64, d_model = 64, one head. Each epoch is a
seeded shuffle of the training split, taken 64 sequences at a time (the last batch of an
epoch holds the remaining 32). --steps caps the number of optimizer steps, for tests only.

After every epoch the log records the loss and accuracy over the positions with a target:
on the training split as the mean over that epoch's batches (weighted by target count, so
it includes the early part of the epoch), and on the first 64 positions of every test
sequence (positions 7..63, all inside the training length) with the weights at the end of
the epoch. Writes results/training_log_{position}.json and results/model_{position}.pth.
"""

import argparse
import time
from dataclasses import asdict

import torch
import torch.nn.functional as F
from tqdm import tqdm

from problem2.config import Config
from problem2.dataset import IGNORE_INDEX, SPLITS, OffsetDataset, check_offset_split
from problem2.model import POSITIONS
from provided.common import (
    EVAL_BATCH_SIZE,
    ArgumentParser,
    HomeworkError,
    add_common_args,
    explicit_results_dir,
    positive_int,
    script,
    setup,
)
from provided.results import save_run


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
    """{'loss', 'accuracy'} over the positions with a target of tokens/targets [N, T]:
    the cross-entropy summed over those positions and divided by their number, and the
    fraction of them whose argmax is the target (pooled over every batch, not averaged per
    batch). Runs the model in eval mode, batch_size sequences at a time."""
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
                generator: torch.Generator, batch_size: int, max_steps: float) -> dict:
    """One seeded shuffled pass over tokens/targets [N, T], at most max_steps steps, with
    the model in training mode. max_steps may be float("inf"), which train passes when no
    --steps cap is given: then the pass covers every batch. The order is
    torch.randperm(N, generator=generator): step i takes the rows
    order[i * batch_size:(i + 1) * batch_size].

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


def train(config: Config, train_set: OffsetDataset, test_set: OffsetDataset,
          device: torch.device) -> tuple[dict, torch.nn.Module]:
    """Train one run; returns (log, trained model)."""
    model = config.build_model().to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=config.lr)
    generator = torch.Generator().manual_seed(config.seed)
    tokens, targets = train_set.tokens.to(device), train_set.targets.to(device)
    n = config.test_positions
    test_tokens = test_set.tokens[:, :n].to(device)
    test_targets = test_set.targets[:, :n].to(device)

    steps_left = float("inf") if config.max_steps is None else config.max_steps
    step, records = 0, []
    for epoch in tqdm(range(1, config.epochs + 1), desc=config.run, unit="epoch"):
        if steps_left <= 0:
            break
        stats = train_epoch(model, optimizer, tokens, targets, generator,
                            config.batch_size, steps_left)
        step, steps_left = step + stats["steps"], steps_left - stats["steps"]
        test = evaluate_split(model, test_tokens, test_targets)
        records.append({"epoch": epoch, "step": step,
                        "train_loss": stats["loss"], "train_accuracy": stats["accuracy"],
                        "test_loss": test["loss"], "test_accuracy": test["accuracy"]})
        tqdm.write(f"[{config.run}] epoch {epoch} step {step}: train loss {stats['loss']:.4f} "
                   f"acc {stats['accuracy']:.4f} | test[0:{n}] loss {test['loss']:.4f} "
                   f"acc {test['accuracy']:.4f}")
    return {"run": config.run, "config": asdict(config), "log": records}, model


def parse_args(argv=None) -> argparse.Namespace:
    parser = ArgumentParser(__doc__)
    parser.add_argument("--position", required=True, choices=POSITIONS,
                        help="position scheme; also names the run")
    parser.add_argument("--steps", type=positive_int, default=None,
                        help="stop after this many optimizer steps (tests only, with their "
                             "own --results_dir; default: the full 5 epochs)")
    add_common_args(parser, "problem2")
    return parser.parse_args(argv)


def load_data(args) -> tuple[OffsetDataset, OffsetDataset]:
    """The training and test splits, or HomeworkError saying what is wrong."""
    try:
        for split in SPLITS:
            check_offset_split(args.data_dir, split)  # a bad file stops before any work
        return (OffsetDataset(args.data_dir, "train", k=Config.k),
                OffsetDataset(args.data_dir, "test", k=Config.k))
    except (FileNotFoundError, ValueError) as err:
        raise HomeworkError(str(err)) from None


@script
def main(argv=None) -> int:
    args = parse_args(argv)
    if args.steps is not None or args.seed != 0:
        explicit_results_dir(args, "problem2", f"--steps {args.steps} --seed {args.seed}")
    device = setup(args)
    train_set, test_set = load_data(args)
    config = Config(position=args.position, seed=args.seed, max_steps=args.steps,
                    train_sequences=len(train_set), train_length=train_set.tokens.shape[1])

    start = time.perf_counter()
    log, model = train(config, train_set, test_set, device)
    log_path = save_run(args.results_dir, config, log, model)
    print(f"[{config.run}] done in {time.perf_counter() - start:.1f} s; wrote {log_path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
