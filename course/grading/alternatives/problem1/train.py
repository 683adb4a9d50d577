"""Instructors only: an alternative solution of problem1/train.py's regions.

The loss from log-softmax and gather, greedy validation scored from integer counts, and
steps_to_95 as a filtered list.
"""

from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:  # a name of problem1/train.py itself; splice leaves this block out
    from problem1.train import THRESHOLD


def train_step(model, optimizer, src, tgt_in, tgt_out) -> float:
    """One Adam step of teacher-forced cross-entropy over the four output digits.

    src [B, 7], tgt_in [B, 4], tgt_out [B, 4]. Returns the batch's mean loss.
    """
    # BEGIN SOLUTION
    optimizer.zero_grad()
    model.train(True)
    scores = model(src, tgt_in)[0]  # [B, 4, vocab]
    log_probs = torch.log_softmax(scores, dim=-1)
    picked = log_probs.gather(-1, tgt_out.unsqueeze(-1)).squeeze(-1)  # [B, 4]
    objective = -picked.mean()
    objective.backward()
    optimizer.step()
    return float(objective.detach())
    # END SOLUTION


def validate(model, dataset, device=None) -> tuple[float, float]:
    """Greedy-decode every source of the split at once and compare with tgt_out.

    Returns (exact match: fraction of sums with all four digits right,
    token accuracy: fraction of digits right). No teacher forcing: each digit is predicted
    after the model's own earlier digits.
    """
    # BEGIN SOLUTION
    if device is None:
        device = next(iter(model.parameters())).device
    model.train(False)
    with torch.no_grad():
        guesses = model.generate(dataset.src.to(device)).to("cpu")
    hits = guesses.eq(dataset.tgt_out.to("cpu"))  # [N, 4]
    sums_right = int(hits.all(dim=-1).sum())
    digits_right = int(hits.sum())
    return sums_right / hits.shape[0], digits_right / hits.numel()
    # END SOLUTION


def steps_to_95(log: list[dict], threshold: float = THRESHOLD):
    """The first logged step whose val_exact_match reaches threshold, or None."""
    # BEGIN SOLUTION
    reached = [entry["step"] for entry in log if not entry["val_exact_match"] < threshold]
    return reached[0] if reached else None
    # END SOLUTION
