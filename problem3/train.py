"""Train the SMILES language model (Problem 3, Part C).

    python train.py --norm pre --lr 1e-3 --warmup 500                  # one sweep run
    python train.py --norm pre --lr 1e-3 --warmup 500 --steps 4000 --checkpoint_every 1000

Adam (betas 0.9, 0.98), batch 128, gradient clipping at norm 1.0, a linear warmup to the
peak learning rate that then holds. Every 50 steps the log records the mean training loss
since the previous record, the learning rate, and two gradient norms taken before clipping
at that step: the output head's weight and all parameters. Validation loss is measured
every 250 steps and at the last step. A run is named {norm}_lr{lr}_w{warmup}_s{steps}.

The run is resumable: every 250 steps it saves results/resume_{run}.pth (model, optimizer,
RNG state, log so far); the same command after an interruption continues from there and
ends with the same log as an uninterrupted run. A run whose loss goes non-finite keeps
going and logs null for the non-finite values.
"""

import argparse
import math
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

if __package__ in (None, ""):  # run as `python train.py` from inside problem3/
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from problem3.dataset import IGNORE_INDEX, SmilesDataset, build_vocab  # noqa: E402
from problem3.model import NORMS, DecoderLM  # noqa: E402
from provided.common import (  # noqa: E402
    add_common_args,
    atomic_torch_save,
    fail,
    missing_data_message,
    setup,
    write_json,
)

MODEL_CONFIG = dict(d_model=128, num_layers=4, num_heads=4, d_ff=512, max_len=52, dropout=0.1)
BATCH_SIZE = 128
BETAS = (0.9, 0.98)
CLIP_NORM = 1.0
LOG_EVERY = 50
VAL_EVERY = 250
EVAL_BATCH_SIZE = 1000
TRAIN_THRESHOLD = 2.0  # a run "trains" if its final validation loss is below this


def lr_at_step(step: int, peak_lr: float, warmup: int) -> float:
    """Learning rate at step (numbered from 1): linear from 0 to peak over warmup steps."""
    # BEGIN SOLUTION
    if warmup <= 0:
        return peak_lr
    return peak_lr * min(1.0, step / warmup)
    # END SOLUTION


def run_name(norm: str, lr: float, warmup: int, steps: int) -> str:
    """e.g. pre_lr0.001_w500_s1500 (the learning rate as Python's str of the float)."""
    return f"{norm}_lr{float(lr)}_w{warmup}_s{steps}"


def finite_or_none(x: float) -> float | None:
    return x if math.isfinite(x) else None


def batch_indices(step: int, num_examples: int, batch_size: int, seed: int) -> torch.Tensor:
    """Indices of the batch of step (from 1): seeded shuffled passes over the data.

    A pure function of its arguments, so a resumed run draws exactly the batches it would
    have drawn without the interruption.
    """
    per_epoch = num_examples // batch_size  # the incomplete last batch of a pass is dropped
    epoch, position = divmod(step - 1, per_epoch)
    generator = torch.Generator().manual_seed(seed * 1_000_003 + epoch)
    order = torch.randperm(num_examples, generator=generator)
    return order[position * batch_size:(position + 1) * batch_size]


def train_step(model, optimizer, inputs, targets, lr: float) -> tuple[float, float, float]:
    """One optimizer step; returns (loss, head_grad_norm, total_grad_norm), norms before
    clipping. Non-finite values are returned as they are; the step is taken regardless."""
    # BEGIN SOLUTION
    for group in optimizer.param_groups:
        group["lr"] = lr
    model.train()
    logits = model(inputs)
    loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=IGNORE_INDEX)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    head_grad_norm = model.head.weight.grad.norm()
    total_grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP_NORM)
    optimizer.step()
    return loss.item(), head_grad_norm.item(), total_grad_norm.item()
    # END SOLUTION


@torch.no_grad()
def evaluate_loss(model, dataset: SmilesDataset, device, batch_size: int = EVAL_BATCH_SIZE):
    """Mean cross-entropy per target token (PAD excluded) over the whole dataset."""
    model.eval()
    total, count = 0.0, 0
    for start in range(0, len(dataset), batch_size):
        inputs = dataset.inputs[start:start + batch_size].to(device)
        targets = dataset.targets[start:start + batch_size].to(device)
        logits = model(inputs)
        total += F.cross_entropy(logits.flatten(0, 1), targets.flatten(),
                                 ignore_index=IGNORE_INDEX, reduction="sum").item()
        count += (targets != IGNORE_INDEX).sum().item()
    return total / count


def rng_state(device) -> dict:
    state = {"cpu": torch.get_rng_state()}
    if device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(device)
    return state


def set_rng_state(state: dict, device) -> None:
    torch.set_rng_state(state["cpu"])
    if device.type == "cuda" and "cuda" in state:
        torch.cuda.set_rng_state(state["cuda"], device)


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--norm", choices=NORMS, required=True)
    parser.add_argument("--lr", type=float, required=True, help="peak learning rate")
    parser.add_argument("--warmup", type=int, default=0, help="warmup steps (default 0)")
    parser.add_argument("--steps", type=int, default=1500, help="training steps (default 1500)")
    parser.add_argument("--checkpoint_every", type=int, default=0,
                        help="also save results/model_{run}_step{N}.pth every N steps")
    parser.add_argument("--batch_size", type=int, default=BATCH_SIZE,
                        help="fixed at 128 by the homework; smaller only for tests")
    add_common_args(parser, "problem3")
    args = parser.parse_args(argv)
    if args.steps < 1 or args.warmup < 0 or args.checkpoint_every < 0 or args.batch_size < 1:
        parser.error("--steps and --batch_size must be positive, --warmup and "
                     "--checkpoint_every non-negative")
    if not args.lr > 0:
        parser.error("--lr must be positive")
    return args


def load_data(data_dir: Path):
    paths = {split: data_dir / "smiles" / f"{split}.txt" for split in ("train", "val")}
    for path in paths.values():
        if not path.exists():
            fail(missing_data_message(path))
    vocab = build_vocab(paths["train"])
    try:
        return vocab, SmilesDataset(paths["train"], vocab), SmilesDataset(paths["val"], vocab)
    except ValueError as err:
        fail(str(err))


def main(argv=None) -> dict:
    args = parse_args(argv)
    device = setup(args)
    run = run_name(args.norm, args.lr, args.warmup, args.steps)
    out = args.results_dir
    vocab, train_set, val_set = load_data(args.data_dir)
    if len(train_set) < args.batch_size:
        fail(f"the training file has {len(train_set)} strings, fewer than one batch")
    vocab.save(out / "vocab.json")

    model = DecoderLM(len(vocab), norm=args.norm, **MODEL_CONFIG).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr, betas=BETAS)
    config = dict(vars(args), **MODEL_CONFIG, run=run, vocab_size=len(vocab))
    config.update(data_dir=None, results_dir=None)  # no machine's paths in committed logs
    log = {"run": run, "config": config, "log": [], "val": [], "final_val_loss": None}
    start = 1
    resume_path = out / f"resume_{run}.pth"
    if resume_path.exists():
        state = torch.load(resume_path, map_location=device, weights_only=False)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        set_rng_state(state["rng"], device)
        log, start = state["log"], state["step"] + 1
        print(f"{run}: resuming after step {state['step']}")

    inputs_all, targets_all = train_set.inputs.to(device), train_set.targets.to(device)
    losses, began = [], time.time()
    for step in range(start, args.steps + 1):
        index = batch_indices(step, len(train_set), args.batch_size, args.seed).to(device)
        lr = lr_at_step(step, args.lr, args.warmup)
        loss, head_norm, total_norm = train_step(model, optimizer, inputs_all[index],
                                                 targets_all[index], lr)
        losses.append(loss)
        if step % LOG_EVERY == 0 or step == args.steps:
            mean_loss = sum(losses) / len(losses)
            log["log"].append({"step": step, "train_loss": finite_or_none(mean_loss), "lr": lr,
                               "head_grad_norm": finite_or_none(head_norm),
                               "total_grad_norm": finite_or_none(total_norm)})
            losses = []
        if step % VAL_EVERY == 0 or step == args.steps:
            val_loss = finite_or_none(evaluate_loss(model, val_set, device))
            log["val"].append({"step": step, "val_loss": val_loss})
            print(f"{run} step {step:5d}  train {log['log'][-1]['train_loss']}  val {val_loss}"
                  f"  ({time.time() - began:.0f} s)", flush=True)
        if args.checkpoint_every and step % args.checkpoint_every == 0 and step < args.steps:
            atomic_torch_save(model.state_dict(), out / f"model_{run}_step{step}.pth")
        if step % VAL_EVERY == 0 and step < args.steps:
            atomic_torch_save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                               "rng": rng_state(device), "log": log, "step": step}, resume_path)

    log["final_val_loss"] = log["val"][-1]["val_loss"] if log["val"] else None
    atomic_torch_save(model.state_dict(), out / f"model_{run}.pth")
    write_json(out / f"training_log_{run}.json", log)
    resume_path.unlink(missing_ok=True)
    return log


if __name__ == "__main__":
    main()
