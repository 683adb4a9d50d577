"""Hidden tests, Problem 2 Part D: the loss and accuracy helpers with per-row ignore
patterns, evaluate_split over uneven batches, and train_epoch's loss, step count and update
against cross-entropy computed by hand. train_epoch trains the provided model under the
learned scheme, which runs no code of Parts B and C, so that a trusted twin of it here
gives the expected numbers."""

import math

import pytest
import torch
import torch.nn.functional as F

from problem2.dataset import IGNORE_INDEX
from problem2.model import OffsetRetrievalModel  # provided; the twins ("learned") only
from tests.seam import submission

pytestmark = pytest.mark.p2d
I = IGNORE_INDEX

train = submission("problem2.train")
evaluate_split, loss_and_correct, train_epoch = (
    train.evaluate_split, train.loss_and_correct, train.train_epoch)
FixedLogits = submission("tests.tiny_problem2").FixedLogits  # a stub, next to the code
sandbox_torch = submission("torch")
optim = submission("torch.optim")


def sandbox_model(position: str, seed: int):
    """The provided model, seeded, made next to the code under test."""
    sandbox_torch.manual_seed(seed)
    return submission("problem2.model").OffsetRetrievalModel(position, d_model=8, max_len=16)


def twin_of(model):
    """A trusted copy here of a model made by sandbox_model."""
    twin = OffsetRetrievalModel(model.position, d_model=8, max_len=16)
    twin.load_state_dict(model.state_dict())
    return twin


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
    model = sandbox_model("learned", seed=1)
    twin = twin_of(model)
    tokens, targets = offset_batch()
    optimizer = optim.Adam(model.parameters(), lr=0.0)
    result = train_epoch(model, optimizer, tokens, targets,
                         sandbox_torch.Generator().manual_seed(0), batch_size=4, max_steps=100)
    assert int(result["steps"]) == 3, (  # batches of 4, 4 and 2
        f"train_epoch over 10 rows in batches of 4 must take 3 steps, not {int(result['steps'])}")
    with torch.no_grad():
        logits = twin(tokens)
    expected = F.cross_entropy(logits.reshape(-1, 16), targets.reshape(-1), ignore_index=I)
    accuracy = ((logits.argmax(-1) == targets).sum() / (targets != I).sum()).item()
    assert float(result["loss"]) == pytest.approx(expected.item(), rel=1e-5), (
        "train_epoch at lr 0 must report the summed loss over the number of targets "
        f"({expected.item():.4f} here), not {float(result['loss']):.4f}")
    assert float(result["accuracy"]) == pytest.approx(accuracy), (
        f"train_epoch at lr 0 must report the correct predictions over the targets "
        f"({accuracy:.4f} here), not {float(result['accuracy']):.4f}")
    capped = train_epoch(model, optimizer, tokens, targets,
                         sandbox_torch.Generator().manual_seed(0), batch_size=4, max_steps=2)
    assert int(capped["steps"]) == 2, (
        f"train_epoch with max_steps=2 must take 2 steps, not {int(capped['steps'])}")


def test_train_epoch_step_follows_the_mean_over_targets():
    # One batch holding every sequence, SGD at lr 1: the update is minus the gradient of the
    # mean cross-entropy over the positions with a target (not the sum, not all positions).
    model = sandbox_model("learned", seed=2)
    twin = twin_of(model)
    tokens, targets = offset_batch(n=6, seed=3)
    train_epoch(model, optim.SGD(model.parameters(), lr=1.0), tokens, targets,
                sandbox_torch.Generator().manual_seed(0), batch_size=6, max_steps=1)
    loss = F.cross_entropy(twin(tokens).reshape(-1, 16), targets.reshape(-1), ignore_index=I)
    loss.backward()
    steps = {name: (p.detach() - q.detach(), -q.grad) for (name, p), q in
             zip(model.named_parameters(), twin.parameters())}
    step = torch.cat([taken.flatten() for taken, _ in steps.values()])
    wanted = torch.cat([minus_grad.flatten() for _, minus_grad in steps.values()])
    factor = (step @ wanted / (wanted @ wanted)).item()  # the step along minus the gradient
    count, n, positions = int((targets != I).sum()), tokens.shape[0], tokens.numel()
    factors = {f"the summed loss ({count} times the right step)": count,
               f"the summed loss over the sequences ({count / n:.4g} times)": count / n,
               f"the mean over every position, ignored ones included ({count / positions:.4g} "
               "times)": count / positions}
    same = [why for why, f in factors.items() if abs(factor - f) < 1e-4 * f]
    parallel = torch.allclose(step, factor * wanted, atol=1e-6, rtol=1e-5)
    why = ("it is the step of " + ", or ".join(same) if parallel and same else
           f"it is {factor:.4g} times the right step, not the step of " + ", or ".join(factors)
           if parallel else "it is not along minus that gradient, so it is the step of another "
           "loss or another batch")
    for name, (taken, minus_grad) in steps.items():
        torch.testing.assert_close(taken, minus_grad, atol=1e-6, rtol=1e-5,
                                   msg=lambda m, name=name: (
            "train_epoch with SGD at lr 1 on one batch of every sequence must step by minus "
            "the gradient of the mean cross-entropy over the positions with a target: "
            f"{name} moved otherwise; measured over every parameter, {why}\n{m}"))
