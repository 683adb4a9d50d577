"""Instructors only: an alternative solution of problem2/train.py's regions.

The loss from log-softmax over the selected target positions, per-batch tallies collected
in lists and summed at the end (math.fsum), and the epoch as a loop over torch.split of the
shuffled order. No top-level helpers: splice would append them after the `__main__` guard.
"""

import math

import torch

from problem2.dataset import IGNORE_INDEX
from provided.common import EVAL_BATCH_SIZE


def loss_and_correct(logits: torch.Tensor, targets: torch.Tensor):
    """Summed cross-entropy, number of correct argmax predictions, and number of targets.

    logits [B, T, V], targets [B, T] with IGNORE_INDEX where there is no target; only the
    positions with a target count. Returns (loss_sum tensor, correct int, count int).
    """
    # BEGIN SOLUTION
    classes = logits.shape[-1]
    flat_targets = targets.reshape(-1)
    scored = flat_targets.ne(IGNORE_INDEX)
    chosen_logits = logits.reshape(-1, classes)[scored]  # [n, V]
    chosen_targets = flat_targets[scored]  # [n]
    log_probs = torch.log_softmax(chosen_logits, dim=-1)
    total_loss = -log_probs.gather(1, chosen_targets.unsqueeze(1)).sum()
    right = int(chosen_logits.argmax(dim=1).eq(chosen_targets).sum())
    return total_loss, right, int(chosen_targets.numel())
    # END SOLUTION


@torch.no_grad()
def evaluate_split(model, tokens: torch.Tensor, targets: torch.Tensor,
                   batch_size: int = EVAL_BATCH_SIZE) -> dict:
    """{'loss', 'accuracy'} over the positions with a target of tokens/targets [N, T]."""
    # BEGIN SOLUTION
    model.train(False)
    losses, rights, counts = [], [], []
    for token_batch, target_batch in zip(torch.split(tokens, batch_size),
                                         torch.split(targets, batch_size)):
        summed, right, count = loss_and_correct(model(token_batch), target_batch)
        losses.append(float(summed))
        rights.append(right)
        counts.append(count)
    seen = sum(counts)
    return {"loss": math.fsum(losses) / seen, "accuracy": sum(rights) / seen}
    # END SOLUTION


def train_epoch(model, optimizer, tokens: torch.Tensor, targets: torch.Tensor,
                generator: torch.Generator, batch_size: int, max_steps: int) -> dict:
    """One seeded shuffled pass over tokens/targets [N, T], at most max_steps steps.

    Each step minimizes the mean cross-entropy over the batch's positions with a target.
    Returns {'loss', 'accuracy', 'steps'}: the loss and accuracy summed over the epoch's
    batches and divided by the number of targets seen, and the number of steps taken.
    """
    # BEGIN SOLUTION
    model.train(True)
    shuffled = torch.randperm(len(tokens), generator=generator)
    losses, rights, counts = [], [], []
    for taken, chunk in enumerate(torch.split(shuffled, batch_size)):
        if taken >= max_steps:
            break
        chunk = chunk.to(tokens.device)
        summed, right, count = loss_and_correct(model(tokens[chunk]), targets[chunk])
        optimizer.zero_grad()
        mean_loss = summed / count
        mean_loss.backward()
        optimizer.step()
        losses.append(float(summed.detach()))
        rights.append(right)
        counts.append(count)
    seen = sum(counts)
    return {"loss": math.fsum(losses) / seen, "accuracy": sum(rights) / seen,
            "steps": len(counts)}
    # END SOLUTION
