"""Hidden tests, Problem 3 Part C: the schedule at other peaks and warmups, and the training
step's loss, learning rate and unclipped update, checked by hand."""

import math

import pytest
import torch

from problem3.dataset import IGNORE_INDEX
from tests.seam import submission
from tests.tiny_problem3 import TinyLM

pytestmark = pytest.mark.p3c
I = IGNORE_INDEX

train = submission("problem3.train")
lr_at_step, train_step = train.lr_at_step, train.train_step
stubs = submission("tests.tiny_problem3")  # stand-ins, next to the code under test
optim = submission("torch.optim")


def models(**options):
    """(a stand-in LM next to the code under test, its trusted twin here)."""
    model = stubs.TinyLM(**options)
    twin = TinyLM(**options)
    twin.load_state_dict(model.state_dict())
    return model, twin


def test_lr_at_step_other_peaks_and_warmups():
    for peak, warmup, expected in [(0.03, 4, [0.0075, 0.015, 0.0225, 0.03, 0.03, 0.03]),
                                   (0.01, 1, [0.01] * 6),
                                   (2.0, 3, [2 / 3, 4 / 3, 2.0, 2.0, 2.0, 2.0])]:
        got = [float(lr_at_step(step, peak, warmup)) for step in range(1, 7)]
        assert got == pytest.approx(expected, rel=1e-12), (peak, warmup)


def test_lr_rises_linearly_from_zero():
    rates = [float(lr_at_step(step, 1.0, 1000)) for step in range(1, 1001)]
    assert rates[0] == pytest.approx(0.001) and rates[-1] == pytest.approx(1.0)
    assert all(b - a == pytest.approx(0.001) for a, b in zip(rates, rates[1:]))


def test_train_step_loss_ignores_padding_and_sets_every_group():
    model, twin = models()
    inputs = torch.randint(3, 12, (3, 6), generator=torch.Generator().manual_seed(1))
    targets = torch.tensor([[4, 5, 6, I, I, I], [7, I, I, I, I, I], [3, 4, 5, 6, 7, 8]])
    with torch.no_grad():
        log_probs = twin(inputs).log_softmax(-1)
    scored = [(b, t) for b in range(3) for t in range(6) if targets[b, t] != I]
    expected = -sum(log_probs[b, t, targets[b, t]].item() for b, t in scored) / len(scored)
    # two parameter groups, made next to the code under test: the head, and the embeddings
    groups = [{"params": model.head.parameters()},
              {"params": submission("itertools").chain(model.tok_emb.parameters(),
                                                       model.pos_emb.parameters())}]
    optimizer = optim.Adam(groups, lr=0.0, betas=(0.9, 0.98))
    loss, head_norm, total_norm = train_step(model, optimizer, inputs, targets, lr=3e-4)
    assert float(loss) == pytest.approx(expected, rel=1e-5)
    assert [group["lr"] for group in optimizer.param_groups] == [3e-4, 3e-4]
    assert 0 < float(head_norm) <= float(total_norm)


def test_the_update_is_the_gradient_scaled_to_norm_at_most_one():
    # SGD at lr 0.5: the update is -0.5 * gradient * min(1, 1 / total norm), the gradient
    # clipped to norm 1.0, whatever its norm was.
    # "confident": every target is token 5 and the head all but certain of it, so that the
    # total norm is far below 1 and the update is the gradient itself, unclipped
    unclipped = 0
    for scale in (0.001, 1.0, 30.0, "confident"):
        model, twin = models(seed=2)
        targets = torch.randint(3, 12, (2, 5), generator=torch.Generator().manual_seed(4))
        if scale == "confident":
            bias = torch.zeros(12)
            bias[5] = 30.0
            model.load_state_dict({"head.bias": bias}, strict=False)
            targets = torch.full((2, 5), 5)
        else:
            model.load_state_dict({"head.weight": scale * twin.head.weight.detach()},
                                  strict=False)
        twin.load_state_dict(model.state_dict())
        inputs = torch.randint(3, 12, (2, 5), generator=torch.Generator().manual_seed(3))
        targets[1, 3:] = I
        loss = torch.nn.functional.cross_entropy(twin(inputs).reshape(-1, 12),
                                                 targets.reshape(-1), ignore_index=I)
        loss.backward()
        total = math.sqrt(sum(p.grad.pow(2).sum().item() for p in twin.parameters()))
        factor = min(1.0, 1.0 / total)
        unclipped += total < 1.0
        optimizer = optim.SGD(model.parameters(), lr=0.0)
        _, head_norm, total_norm = train_step(model, optimizer, inputs, targets, lr=0.5)
        after = model.state_dict()
        assert float(total_norm) == pytest.approx(total, rel=1e-5)
        assert float(head_norm) == pytest.approx(twin.head.weight.grad.norm().item(), rel=1e-5)
        for name, q in twin.named_parameters():
            torch.testing.assert_close(after[name], q - 0.5 * factor * q.grad, atol=1e-6,
                                       rtol=1e-4, msg=lambda m, name=name, scale=scale: (
                f"train_step's update of {name} (head scale {scale}) must be SGD with the "
                "gradient clipped to total norm 1 first: is the clip after the step, on each "
                f"tensor alone, or is the given lr not set on the optimizer?\n{m}"))
    assert unclipped, "the test itself must reach a gradient below the clip norm"


def test_non_finite_values_are_returned_as_they_are():
    model = stubs.TinyLM(seed=5)
    model.load_state_dict({"head.bias": torch.full((12,), float("inf"))}, strict=False)
    inputs = torch.randint(3, 12, (2, 5))
    targets = torch.randint(3, 12, (2, 5))
    loss, head_norm, total_norm = train_step(model, optim.SGD(model.parameters(), lr=0.0),
                                             inputs, targets, lr=0.1)
    assert not math.isfinite(float(loss))  # returned, not raised
