"""Hidden tests, Problem 1 Part D: the training step against an Adam step taken by hand on
the teacher-forced loss, greedy validation that never reads tgt_in, and steps_to_95's edges."""


import pytest
import torch
import torch.nn.functional as F

from problem1.dataset import BOS, PLUS
from tests.seam import submission
from tests.tiny_problem1 import adder_and_twin, reversed_sums, split

pytestmark = pytest.mark.p1d

train = submission("problem1.train")
steps_to_95, train_step, validate = train.steps_to_95, train.train_step, train.validate
optim = submission("torch.optim")  # optimizers of the model under test are made next to it




def test_train_step_is_one_adam_step_on_the_teacher_forced_loss():
    model, twin = adder_and_twin(1, dropout=0.0)
    src, tgt_in, tgt_out = reversed_sums()
    # eps 1e-3: a gradient that is zero but for rounding (the keys' biases) moves no weight,
    # so that an equal loss summed in another order passes (with 1e-8 it ends 1e-4 away)
    optimizer = optim.Adam(model.parameters(), lr=1e-3, eps=1e-3)
    twin_optimizer = torch.optim.Adam(twin.parameters(), lr=1e-3, eps=1e-3)
    for _ in range(2):  # two steps: the optimizer state carries over between calls
        loss = train_step(model, optimizer, src, tgt_in, tgt_out)
        logits, _ = twin(src, tgt_in)
        expected = F.cross_entropy(logits.reshape(-1, 12), tgt_out.reshape(-1))
        twin_optimizer.zero_grad()
        expected.backward()
        twin_optimizer.step()
        assert float(loss) == pytest.approx(expected.item(), rel=1e-5), (
            f"train_step must return the teacher-forced loss before its step "
            f"({expected.item():.5f} here), not {float(loss):.5f}")
    for (name, p), q in zip(model.state_dict().items(), twin.state_dict().values()):
        torch.testing.assert_close(p, q, atol=1e-6, rtol=1e-5, msg=lambda m, name=name: (
            "train_step must take one step of the optimizer given on the teacher-forced "
            f"loss at each call: after two calls {name} differs from two Adam steps taken "
            f"by hand\n{m}"))


def test_train_step_loss_is_the_mean_over_the_four_digits():
    model, twin = adder_and_twin(2, dropout=0.0)
    src, tgt_in, tgt_out = reversed_sums(n=1, seed=3)
    with torch.no_grad():
        log_probs = twin(src, tgt_in)[0].log_softmax(-1)[0]  # [4, 12]
    expected = -sum(log_probs[j, tgt_out[0, j]].item() for j in range(4)) / 4
    optimizer = optim.SGD(model.parameters(), lr=0.0)
    assert float(train_step(model, optimizer, src, tgt_in, tgt_out)) == pytest.approx(
        expected, rel=1e-5)


def test_validate_never_reads_tgt_in():
    src, tgt_in, _ = reversed_sums(n=40, seed=4)
    model, twin = adder_and_twin(5)
    twin.eval()
    with torch.no_grad():  # the argmax is a digit whether or not PLUS and BOS compete
        twin.output.bias[PLUS] = twin.output.bias[BOS] = -100.0
    model.load_state_dict(twin.state_dict())
    model.eval()
    greedy = twin.generate(src)
    tgt_out = greedy.clone()
    tgt_in = torch.full_like(tgt_in, 7)  # nonsense: teacher forcing would fail
    tgt_in[:, 0] = BOS
    exact, token = validate(model, split(src, tgt_in, tgt_out), torch.device("cpu"))
    assert (float(exact), float(token)) == (1.0, 1.0)
    tgt_out[:10, 1] = (greedy[:10, 1] + 5) % 10  # 10 sums wrong in one digit
    tgt_out[:5, 2] = (greedy[:5, 2] + 5) % 10    # 5 of them in a second digit
    exact, token = validate(model, split(src, tgt_in, tgt_out))
    assert float(exact) == pytest.approx(30 / 40)
    assert float(token) == pytest.approx(1 - 15 / 160)


def test_steps_to_95_edges():
    log = [{"step": 50, "val_exact_match": 0.95, "train_loss": 1.0},
           {"step": 100, "val_exact_match": 0.2, "train_loss": 0.5}]
    assert steps_to_95(log) == 50  # reached at the very first point
    assert steps_to_95([{"step": 3, "val_exact_match": 1.0}]) == 3
    log = [{"step": 10 * (i + 1), "val_exact_match": em} for i, em in
           enumerate([0.3, 0.6, 0.49, 0.5, 0.96])]
    assert steps_to_95(log, threshold=0.5) == 20
    assert steps_to_95(log, threshold=0.99) is None
    assert steps_to_95(log) == 50
