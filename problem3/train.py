"""Train the SMILES language model (Problem 3, Part C).

Students: you write lr_at_step and train_step; the rest (arguments, the loop, logs) is
given and need not be read; the data checks and resuming are in problem3/run_files.py.

    python train.py --norm pre --lr 1e-3 --warmup 500                  # one sweep run
    python train.py --norm pre --lr 1e-3 --warmup 500 --steps 4000 --checkpoint_every 1000

Adam (betas 0.9, 0.98), batch 128, gradient clipping at norm 1.0, a linear warmup to the
peak learning rate that then holds. Every 50 steps the log records the mean training loss
since the previous record, the learning rate, and two gradient norms taken before clipping
at that step: the output head's weight and all parameters. Validation loss is measured
every 250 steps and at the last step. A run is named {norm}_lr{lr}_w{warmup}_s{steps}.

A try shorter than the homework's runs (--steps below 1,500) measures its validation loss
on the first TRY_VAL_STRINGS (1,000) validation strings only, not all 10,000, and its log
says so (val_strings); the prescribed runs always validate on all of them.

The run is resumable: every 250 steps it saves results/resume_{run}.pth (model, optimizer,
RNG state, log so far); the same command after an interruption continues from there and
ends with the same log as an uninterrupted run. A run whose loss goes non-finite keeps
going and logs null for the non-finite values.
"""

import argparse
import math
from dataclasses import asdict
from pathlib import Path

import torch
import torch.nn.functional as F
from tqdm import tqdm

from problem3.config import (
    BETAS,
    CLIP_NORM,
    LOG_EVERY,
    SWEEP_STEPS,
    VAL_EVERY,
    Config,
    checkpoint_extras,
)
from problem3.dataset import IGNORE_INDEX, SmilesDataset
from problem3.model import NORMS
from problem3.run_files import check_vocab, load_data, resume, rng_state
from provided.common import (
    EVAL_BATCH_SIZE,
    ArgumentParser,
    add_common_args,
    explicit_results_dir,
    non_negative_int,
    positive_int,
    script,
    setup,
)
from provided.results import (
    save_checkpoint,
    save_run,
)
from provided.smiles import SmilesVocab

TRY_VAL_STRINGS = 1000  # the validation strings of a run shorter than SWEEP_STEPS (a try)


def lr_at_step(step: int, peak_lr: float, warmup: int) -> float:
    """Learning rate at step (numbered from 1): linear from 0 to peak over warmup steps,
    peak_lr * min(1, step / warmup), then the peak; with warmup 0, the peak from step 1."""
    # BEGIN SOLUTION
    if warmup <= 0:
        return peak_lr
    return peak_lr * min(1.0, step / warmup)
    # END SOLUTION


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
    """One optimizer step, in training mode, at learning rate lr (set on every parameter
    group) on the mean cross-entropy over the targets other than IGNORE_INDEX, with the
    gradients of this batch alone clipped to total norm CLIP_NORM. Returns (loss,
    head_grad_norm, total_grad_norm): the L2 norms of the gradient of the output head's
    weight and of all parameters together, both before clipping. Non-finite values are
    returned as they are; the step is taken regardless."""
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


class FirstStrings:
    """The first n strings of a SmilesDataset, as evaluate_loss reads one (.inputs,
    .targets, len)."""

    def __init__(self, dataset: SmilesDataset, n: int):
        self.inputs, self.targets = dataset.inputs[:n], dataset.targets[:n]

    def __len__(self) -> int:
        return len(self.inputs)


def try_validation(config: Config, val_set: SmilesDataset):
    """The validation set a run measures its loss on: the whole of it, or for a run shorter
    than the homework's (config.steps < SWEEP_STEPS) its first TRY_VAL_STRINGS strings, and
    then that number (None: the whole set)."""
    if config.steps < SWEEP_STEPS and len(val_set) > TRY_VAL_STRINGS:
        return FirstStrings(val_set, TRY_VAL_STRINGS), TRY_VAL_STRINGS
    return val_set, None


def parse_args(argv=None) -> argparse.Namespace:
    parser = ArgumentParser(__doc__)
    parser.add_argument("--norm", choices=NORMS, required=True)
    parser.add_argument("--lr", type=float, required=True, help="peak learning rate, above 0")
    parser.add_argument("--warmup", type=non_negative_int, default=Config.warmup,
                        help="warmup steps (default %(default)s)")
    parser.add_argument("--steps", type=positive_int, default=Config.steps,
                        help="training steps (default %(default)s)")
    parser.add_argument("--checkpoint_every", type=non_negative_int,
                        default=Config.checkpoint_every,
                        help="also save results/model_{run}_step{N}.pth every N steps")
    parser.add_argument("--batch_size", type=positive_int, default=Config.batch_size,
                        help="fixed at %(default)s by the homework; smaller only for tests, "
                             "with their own --results_dir")
    add_common_args(parser, "problem3")
    args = parser.parse_args(argv)
    if not (args.lr > 0 and math.isfinite(args.lr)):
        parser.error(f"argument --lr: must be a positive number, not {args.lr}")
    return args


def train(config: Config, vocab: SmilesVocab, train_set: SmilesDataset, val_set: SmilesDataset,
          data: dict, out: Path, resume_path: Path, device) -> tuple[dict, torch.nn.Module]:
    """Train one run; returns (log, trained model). Every VAL_EVERY steps the run's state is
    saved to resume_path, and a run that finds one there continues from it (data: the
    fingerprints of the data files, which must match); the step checkpoints of
    config.checkpoint_every go to out. A try (fewer than SWEEP_STEPS steps) validates on
    the first TRY_VAL_STRINGS strings of val_set (try_validation), and its log's
    val_strings says so."""
    run = config.run
    model = config.build_model().to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=config.lr, betas=BETAS)
    log = {"run": run, "config": asdict(config), "log": [], "val": [], "final_val_loss": None}
    start = 1
    resumed = resume(resume_path, config, data, model, optimizer, device)
    if resumed is not None:
        log, start = resumed
    val_set, val_strings = try_validation(config, val_set)
    if val_strings is not None:  # a try: never a prescribed run, whose log stays as it is
        log["val_strings"] = val_strings
        print(f"{run}: a run shorter than {SWEEP_STEPS} steps: validation on the first "
              f"{val_strings} validation strings only")

    inputs_all, targets_all = train_set.inputs.to(device), train_set.targets.to(device)
    losses = []
    progress = tqdm(range(start, config.steps + 1), desc=run, unit="step", mininterval=5,
                    initial=start - 1, total=config.steps)
    for step in progress:
        index = batch_indices(step, len(train_set), config.batch_size, config.seed).to(device)
        lr = lr_at_step(step, config.lr, config.warmup)
        loss, head_norm, total_norm = train_step(model, optimizer, inputs_all[index],
                                                 targets_all[index], lr)
        losses.append(loss)
        if step % LOG_EVERY == 0 or step == config.steps:
            mean_loss = sum(losses) / len(losses)
            log["log"].append({"step": step, "train_loss": finite_or_none(mean_loss), "lr": lr,
                               "head_grad_norm": finite_or_none(head_norm),
                               "total_grad_norm": finite_or_none(total_norm)})
            losses = []
        if step % VAL_EVERY == 0 or step == config.steps:
            val_loss = finite_or_none(evaluate_loss(model, val_set, device))
            log["val"].append({"step": step, "val_loss": val_loss})
            progress.set_postfix(train=log["log"][-1]["train_loss"], val=val_loss)
        if config.checkpoint_every and step % config.checkpoint_every == 0 and step < config.steps:
            save_checkpoint(out / f"model_{run}_step{step}.pth", config, model,
                            **checkpoint_extras(vocab, step))
        if step % VAL_EVERY == 0 and step < config.steps:
            save_checkpoint(resume_path, config, model, optimizer=optimizer.state_dict(),
                            rng=rng_state(device), log=log, data=data,
                            **checkpoint_extras(vocab, step))

    log["final_val_loss"] = log["val"][-1]["val_loss"] if log["val"] else None
    return log, model


@script(interrupted="interrupted: re-run the same command to resume from the last save "
                    f"(every {VAL_EVERY} steps)")
def main(argv=None) -> int:
    args = parse_args(argv)
    if args.batch_size != Config.batch_size or args.seed != 0:
        explicit_results_dir(args, "problem3", f"--batch_size {args.batch_size} "
                             f"--seed {args.seed}")
    device = setup(args)
    vocab, train_set, val_set, data = load_data(args.data_dir, args.batch_size)
    out = args.results_dir
    check_vocab(vocab, out)
    config = Config(norm=args.norm, lr=args.lr, warmup=args.warmup, steps=args.steps,
                    checkpoint_every=args.checkpoint_every, batch_size=args.batch_size,
                    seed=args.seed, threads=torch.get_num_threads(), vocab_size=len(vocab))

    resume_path = out / f"resume_{config.run}.pth"
    log, model = train(config, vocab, train_set, val_set, data, out, resume_path, device)
    log_path = save_run(out, config, log, model, **checkpoint_extras(vocab, config.steps))
    resume_path.unlink(missing_ok=True)
    print(f"{config.run}: final validation loss {log['final_val_loss']}; wrote {log_path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
