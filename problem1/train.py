"""Problem 1, Part D: train the addition transformer in one digit order on one training size.

Students: you write train_step, validate and steps_to_95; the rest (arguments, batching,
logs) is given and need not be read.

    python train.py --digit_order reversed --train_size 4000      (from problem1/)
    python -m problem1.train --digit_order reversed --train_size 4000   (from the root)

The configuration is fixed by the homework: Adam, learning rate 1e-3, batch size 128,
2,400 steps, validation by greedy decoding (never teacher forcing) after steps 50, 100, ...
Batches are consecutive slices of seeded random permutations of the max_pairs training
pairs, one permutation per pass, so every batch holds 128 pairs. The run is named
{digit_order}_n{train_size}. While it runs, results/training_log_{run}.partial.json holds the
log so far (to watch it); at the end the log takes its real name,
results/training_log_{run}.json, and results/model_{run}.pth holds the weights with their
Config. --steps and --seed change the run, so they need their own --results_dir; a
shortened run also validates after its last step.
"""

import argparse
import time
from dataclasses import asdict
from pathlib import Path

import torch
import torch.nn.functional as F
from tqdm import tqdm

from problem1.config import PRESCRIBED, THRESHOLD, TRAIN_SIZES, Config
from problem1.dataset import DIGIT_ORDERS, AdditionDataset
from problem1.model import score_predictions
from provided.common import (
    ArgumentParser,
    HomeworkError,
    add_common_args,
    explicit_results_dir,
    missing_data_message,
    positive_int,
    script,
    setup,
)
from provided.data_files import read_pairs
from provided.results import (
    save_run,
    unfinished,
    write_json,
)


def shuffled_batches(num_items: int, batch_size: int, generator: torch.Generator):
    """Endless stream of [batch_size] index tensors: shuffled passes over range(num_items),
    a batch running on into the next pass where one ends.

    ValueError if num_items or batch_size is below 1 (there would be no batch to draw)."""
    if num_items < 1 or batch_size < 1:
        raise ValueError(f"shuffled_batches needs num_items >= 1 and batch_size >= 1, got "
                         f"{num_items} and {batch_size}")
    pending = torch.empty(0, dtype=torch.long)
    while True:
        while len(pending) < batch_size:
            pending = torch.cat([pending, torch.randperm(num_items, generator=generator)])
        yield pending[:batch_size]
        pending = pending[batch_size:]


def train_step(model, optimizer, src, tgt_in, tgt_out) -> float:
    """One Adam step of teacher-forced cross-entropy over the four output digits, with the
    model in training mode (a validation before it leaves the model in eval mode).

    src [B, 7], tgt_in [B, 4], tgt_out [B, 4]. The cross-entropy of each output position is
    taken over all 12 logits (the whole vocabulary, PLUS and BOS included), and averaged
    over the B * 4 positions. Returns the batch's mean loss.
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
    """Greedy-decode every source of the split at once, in eval mode (no dropout), and
    compare with tgt_out.

    Returns (exact match: fraction of sums with all four digits right,
    token accuracy: fraction of digits right). No teacher forcing: each digit is predicted
    after the model's own earlier digits. device is where the sources are moved for
    decoding, the model's own device; None means the device of the model's parameters.
    """
    # BEGIN SOLUTION
    device = device or next(model.parameters()).device
    model.eval()
    with torch.inference_mode():
        predicted = model.generate(dataset.src.to(device)).cpu()  # [N, 4]
    return score_predictions(predicted, dataset.tgt_out)
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
    parser = ArgumentParser(__doc__)
    parser.add_argument("--digit_order", required=True, choices=DIGIT_ORDERS,
                        help="order of the sum's digits")
    parser.add_argument("--train_size", type=positive_int, required=True,
                        help="number of training pairs (the homework uses "
                             f"{', '.join(map(str, TRAIN_SIZES))})")
    parser.add_argument("--steps", type=positive_int, default=Config.steps,
                        help="training steps (default: %(default)s; fewer only for tests, "
                             "with their own --results_dir)")
    add_common_args(parser, "problem1")
    return parser.parse_args(argv)


def load_data(args) -> tuple[AdditionDataset, AdditionDataset]:
    """The training pairs and the validation split, or HomeworkError saying what is wrong: a
    missing or bad data file (named, with the line), or a --train_size beyond the pairs of
    the training split."""
    paths = {split: args.data_dir / "addition" / f"{split}.csv" for split in ("train", "val")}
    try:
        counts = {split: len(read_pairs(path)) for split, path in paths.items()}
    except FileNotFoundError as err:
        missing = Path(err.filename or paths["train"])
        raise HomeworkError(missing_data_message(missing)) from None
    except ValueError as err:
        raise HomeworkError(f"the data file is wrong: {err}") from None
    if not 1 <= args.train_size <= counts["train"]:
        sizes = ", ".join(map(str, TRAIN_SIZES))
        raise HomeworkError(f"--train_size {args.train_size} is out of range: {paths['train']} "
                            f"holds {counts['train']} pairs (the homework uses {sizes})")
    if counts["val"] == 0:
        raise HomeworkError(f"{paths['val']} holds no pairs: run `python generate_datasets.py "
                            "--only addition --force`")
    try:
        train = AdditionDataset(args.data_dir, "train", args.digit_order, args.train_size)
        val = AdditionDataset(args.data_dir, "val", args.digit_order)
    except FileNotFoundError as err:
        raise HomeworkError(str(err)) from None
    except ValueError as err:
        raise HomeworkError(f"the data is wrong: {err}") from None
    if len(train) != args.train_size:
        raise HomeworkError(f"AdditionDataset(max_pairs={args.train_size}) holds {len(train)} "
                            f"pairs, not {args.train_size}: it must keep the first max_pairs "
                            f"pairs of {paths['train']}")
    return train, val


def training_log(config: Config, log: list[dict]) -> dict:
    return {"run": config.run, "config": asdict(config), "log": log,
            "steps_to_95": steps_to_95(log)}


def train(config: Config, train_set: AdditionDataset, val_set: AdditionDataset,
          device: torch.device, watch_path: Path) -> tuple[dict, torch.nn.Module]:
    """Train one run; returns (log, trained model). The log so far is rewritten to
    watch_path at every validation, so that a long run can be watched."""
    model = config.build_model().to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=config.lr)
    src, tgt_in, tgt_out = (t.to(device)
                            for t in (train_set.src, train_set.tgt_in, train_set.tgt_out))
    batches = shuffled_batches(len(train_set), config.batch_size,
                               torch.Generator().manual_seed(config.seed))
    log, losses = [], []
    progress = tqdm(range(1, config.steps + 1), desc=config.run, unit="step", mininterval=2)
    for step in progress:
        index = next(batches).to(device)
        losses.append(train_step(model, optimizer, src[index], tgt_in[index], tgt_out[index]))
        if step % config.eval_every == 0 or step == config.steps:
            exact, token = validate(model, val_set, device)
            log.append({"step": step, "train_loss": sum(losses) / len(losses),
                        "val_exact_match": exact, "val_token_accuracy": token})
            losses = []
            write_json(watch_path, training_log(config, log))
            progress.set_postfix(loss=f"{log[-1]['train_loss']:.3f}", val_exact=f"{exact:.3f}")
    return training_log(config, log), model


@script
def main(argv=None) -> int:
    args = parse_args(argv)
    config = Config(digit_order=args.digit_order, train_size=args.train_size, steps=args.steps,
                    seed=args.seed)
    if config not in PRESCRIBED:
        explicit_results_dir(args, "problem1", f"--train_size {args.train_size} "
                             f"--steps {args.steps} --seed {args.seed}")
    device = setup(args)
    train_set, val_set = load_data(args)

    start = time.perf_counter()
    watch_path = unfinished(args.results_dir / f"training_log_{config.run}.json")
    log, model = train(config, train_set, val_set, device, watch_path)
    log_path = save_run(args.results_dir, config, log, model)
    watch_path.unlink(missing_ok=True)
    print(f"{config.run}: steps_to_95 = {log['steps_to_95']}; wrote {log_path} and "
          f"model_{config.run}.pth in {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
