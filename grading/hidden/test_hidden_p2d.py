"""Hidden tests, Problem 2 Part D: the loss and accuracy helpers with per-row ignore
patterns, evaluate_split over uneven batches, and train_epoch's loss, step count and update
against cross-entropy computed by hand."""

import math

import pytest
import torch
import torch.nn.functional as F

from problem2.dataset import IGNORE_INDEX
from problem2.model import OffsetRetrievalModel
from problem2.train import evaluate_split, loss_and_correct, train_epoch

pytestmark = pytest.mark.p2d
I = IGNORE_INDEX


class FixedLogits(torch.nn.Module):
    """Stub model: the same logits row at every position, whatever the tokens."""

    def __init__(self, row):
        super().__init__()
        self.row = torch.nn.Parameter(torch.tensor(row))

    def forward(self, tokens, return_attention=False):
        return self.row.expand(*tokens.shape, -1)


def cross_entropy(row, target):
    return -(row[target] - math.log(sum(math.exp(v) for v in row)))


def test_loss_and_correct_with_a_different_ignore_pattern_per_row():
    logits = torch.tensor([[[3.0, 0.0, 1.0], [0.0, 2.0, 0.0]],
                           [[1.0, 1.0, 5.0], [0.5, 0.0, 0.0]]])  # [2, 2, 3]
    targets = torch.tensor([[I, 1], [0, I]])
    loss_sum, correct, count = loss_and_correct(logits, targets)
    expected = cross_entropy([0.0, 2.0, 0.0], 1) + cross_entropy([1.0, 1.0, 5.0], 0)
    assert float(loss_sum) == pytest.approx(expected, rel=1e-6)
    assert (int(correct), int(count)) == (1, 2)
    loss_sum, correct, count = loss_and_correct(logits, torch.full((2, 2), I))
    assert float(loss_sum) == pytest.approx(0.0, abs=1e-12)  # nothing to score
    assert (int(correct), int(count)) == (0, 0)


def test_evaluate_split_over_uneven_batches():
    row = [0.0, 1.0, 0.0, 0.0]  # predicts token 1
    tokens = torch.zeros(5, 4, dtype=torch.long)
    targets = torch.tensor([[I, 1, 2, 1], [I, I, 1, 1], [I, 3, 3, 3], [I, 1, I, I], [I, 0, 1, 2]])
    result = evaluate_split(FixedLogits(row), tokens, targets, batch_size=2)
    wanted = [t for line in targets.tolist() for t in line if t != I]
    assert float(result["accuracy"]) == pytest.approx(wanted.count(1) / len(wanted)), (
        "evaluate_split's accuracy must pool the counts of every batch (all correct over all "
        "targets): is it a mean of per-batch accuracies, wrong for uneven batches?")
    mean_loss = sum(cross_entropy(row, t) for t in wanted) / len(wanted)
    assert float(result["loss"]) == pytest.approx(mean_loss, rel=1e-6), (
        "evaluate_split's loss must be the batches' summed losses over the number of targets: "
        "is it a mean of per-batch means, or over every position, ignored ones included?")


def offset_batch(n=10, T=16, k=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, 16, (n, T), generator=g)
    targets = torch.full_like(tokens, I)
    targets[:, k:] = tokens[:, :-k]
    return tokens, targets


def test_train_epoch_at_learning_rate_zero_reports_the_mean_loss():
    torch.manual_seed(1)
    model = OffsetRetrievalModel("rotary", d_model=8, max_len=16)
    tokens, targets = offset_batch()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.0)
    result = train_epoch(model, optimizer, tokens, targets, torch.Generator().manual_seed(0),
                         batch_size=4, max_steps=100)
    assert int(result["steps"]) == 3  # batches of 4, 4 and 2
    with torch.no_grad():
        logits = model(tokens)
    expected = F.cross_entropy(logits.reshape(-1, 16), targets.reshape(-1), ignore_index=I)
    accuracy = ((logits.argmax(-1) == targets).sum() / (targets != I).sum()).item()
    assert float(result["loss"]) == pytest.approx(expected.item(), rel=1e-5)
    assert float(result["accuracy"]) == pytest.approx(accuracy)
    capped = train_epoch(model, optimizer, tokens, targets, torch.Generator().manual_seed(0),
                         batch_size=4, max_steps=2)
    assert int(capped["steps"]) == 2


def test_train_epoch_step_follows_the_mean_over_targets():
    # One batch holding every sequence, SGD at lr 1: the update is minus the gradient of the
    # mean cross-entropy over the positions with a target (not the sum, not all positions).
    torch.manual_seed(2)
    model = OffsetRetrievalModel("learned", d_model=8, max_len=16)
    twin = OffsetRetrievalModel("learned", d_model=8, max_len=16)
    twin.load_state_dict(model.state_dict())
    tokens, targets = offset_batch(n=6, seed=3)
    train_epoch(model, torch.optim.SGD(model.parameters(), lr=1.0), tokens, targets,
                torch.Generator().manual_seed(0), batch_size=6, max_steps=1)
    loss = F.cross_entropy(twin(tokens).reshape(-1, 16), targets.reshape(-1), ignore_index=I)
    loss.backward()
    for (name, p), q in zip(model.named_parameters(), twin.parameters()):
        torch.testing.assert_close(p, q - q.grad, atol=1e-6, rtol=1e-5, msg=name)
