"""Problem 1, Part D: steps_to_95, the training step, greedy validation, and train.py end to
end on a tiny data folder with a few steps (no real training).

train_step and validate are tested on StandInAdder (tests/tiny_problem1.py), the provided
stack over stand-in layers, and on stand-in splits, so that a mistake in Parts A-C costs no
points here; so is the end-to-end run (stand_in_scripts: GivenSplits of random items and
StandInAdder in place of your dataset and model)."""

import json

import pytest
import torch
import torch.nn.functional as F

from problem1.dataset import BOS, PLUS
from problem1.model import score_predictions
from tests.seam import submission
from tests.tiny import addition_data, run_script, script_args
from tests.tiny_problem1 import (
    StandInAdder,
    adder_and_twin,
    random_items,
    split,
    stand_in_scripts,
)

TRAINING_USES = ("train_step, validate and steps_to_95 (Part D), on stand-ins of the dataset "
                 "and the model (tests/tiny_problem1.py)")
pytestmark = pytest.mark.p1d

train = submission("problem1.train")
steps_to_95, train_step, validate = train.steps_to_95, train.train_step, train.validate
optim = submission("torch.optim")  # optimizers of the model under test are made next to it
stand_ins = submission("tests.tiny_problem1")


def test_steps_to_95():
    # logged steps as a shortened or resumed run may have them, not every 50
    # (token accuracy reaches 0.95 first, at step 50, as in a real log)
    log = [{"step": step, "val_exact_match": em, "val_token_accuracy": token, "train_loss": 1.0}
           for step, em, token in [(20, 0.1, 0.6), (50, 0.9499, 0.96), (75, 0.95, 0.97),
                                   (100, 0.97, 0.98), (103, 0.5, 0.8), (110, 0.99, 0.995)]]
    found = steps_to_95(log)
    why = {100: "is the comparison strict (>)?", 110: "is the last such step returned?",
           50: "is val_token_accuracy read instead of val_exact_match?",
           None: "does the loop return None at the first entry below the threshold (an else "
                 "inside the loop)?",
           150: "is the step computed from the entry's index (every 50 steps) instead of "
                "read from its 'step'?"}
    assert found == 75, (  # the first step that reaches 0.95, inclusive
        "steps_to_95 must return the 'step' of the first log entry whose val_exact_match "
        f"reaches 0.95, 0.95 itself included (75 here), not {found}: "
        + why.get(found, "is the comparison strict (>), or the last such step returned?"))
    assert steps_to_95(log[:2]) is None, "steps_to_95 must return None if no step reaches 0.95"
    assert steps_to_95(log, threshold=0.5) == 50 and steps_to_95(log, threshold=0.999) is None, (
        "steps_to_95(log, threshold) must compare with the threshold given, not a fixed 0.95")
    assert steps_to_95([]) is None, "steps_to_95 must return None for an empty log"


def test_train_step_takes_one_step_on_the_teacher_forced_loss():
    model, twin = adder_and_twin(0, dropout=0.0)
    src = torch.tensor([[3, 9, 1, PLUS, 9, 6, 8], [0, 1, 2, PLUS, 5, 9, 7]])
    tgt_out = torch.tensor([[1, 3, 5, 9], [0, 6, 0, 9]])
    tgt_in = torch.tensor([[BOS, 1, 3, 5], [BOS, 0, 6, 0]])
    # the loss that train_step must report: cross-entropy of the logits against tgt_out
    logits, _ = twin(src, tgt_in)
    expected = F.cross_entropy(logits.reshape(-1, 12), tgt_out.reshape(-1))
    loss = train_step(model, optim.Adam(model.parameters(), lr=1e-3), src, tgt_in, tgt_out)
    assert type(loss) is float, (
        f"train_step must return the loss as a Python float (loss.item()), not a "
        f"{type(loss).__name__}: a tensor kept in the log holds its graph and device")
    against_tgt_in = F.cross_entropy(logits.reshape(-1, 12), tgt_in.reshape(-1)).item()
    summed = F.cross_entropy(logits.reshape(-1, 12), tgt_out.reshape(-1), reduction="sum")
    digits_only = F.cross_entropy(logits[..., :10].reshape(-1, 10), tgt_out.reshape(-1))
    readings = [(against_tgt_in, "the loss against tgt_in (the decoder's input), not tgt_out"),
                (summed.item(), "the loss summed instead of averaged"),
                (digits_only.item(), "the cross-entropy over the ten digit logits only, not "
                                     "all 12")]
    same = [why for value, why in readings if float(loss) == pytest.approx(value, rel=1e-5)]
    why = ("it is " + ", or ".join(same) if same else "it is none of " + ", ".join(
        f"{value:.4f} ({why})" for value, why in readings))
    assert float(loss) == pytest.approx(expected.item(), rel=1e-5), (
        "train_step must return the mean cross-entropy of the logits against tgt_out "
        f"({expected.item():.4f} here), not {float(loss):.4f}: {why}")
    changed = [name for name, p in model.state_dict().items()
               if not torch.equal(p, twin.state_dict()[name])]
    assert changed, (
        "train_step must take an optimizer step on this batch's gradient: no parameter "
        "changed, so the step saw no gradient (is optimizer.zero_grad() called between "
        "loss.backward() and optimizer.step(), optimizer.step() before loss.backward(), or "
        "no step at all?)")


def test_validate_decodes_greedily():
    model, twin = adder_and_twin(0)
    twin.eval()
    with torch.no_grad():  # the argmax is a digit whether or not PLUS and BOS compete
        twin.output.bias[PLUS] = twin.output.bias[BOS] = -100.0
    model.load_state_dict(twin.state_dict())
    model.eval()
    src, tgt_in, _ = random_items(300, seed=0)  # more than a batch of 128
    predicted = twin.generate(src)
    tgt_out = predicted.clone()  # the model's own greedy digits are all right ...
    tgt_out[0, 3] = (predicted[0, 3] + 1) % 10  # ... but for one digit of one sum
    exact, token = validate(model, split(src, tgt_in, tgt_out))
    n = len(src)
    assert (float(exact), float(token)) != pytest.approx(((4 * n - 1) / (4 * n), (n - 1) / n)), (
        "validate must return (exact match, token accuracy) in this order: it returned them "
        f"swapped ({float(exact):.4f} is the token accuracy here, {float(token):.4f} the "
        "exact match)")
    with torch.no_grad():
        forced = twin(src, tgt_in)[0].argmax(-1)  # the argmax of model(src, tgt_in)
    readings = {  # what the usual mistakes give as the exact match here
        "the sums teacher-forced on tgt_in (model(src, tgt_in)'s argmax), not greedily "
        "decoded": score_predictions(forced, tgt_out)[0],
        "the exact match taken per digit position (a position right in every sum, "
        ".all(dim=0)), not per sum (all four digits of a sum right, .all(dim=1))": 3 / 4,
        "the first batch of 128 sums scored only": 127 / 128,
        "the token accuracy returned as the exact match (every digit counted alone)":
            (4 * n - 1) / (4 * n)}
    same = [why for why, value in readings.items() if float(exact) == pytest.approx(value)]
    why = ("it is what " + ", or ".join(same) + " gives" if same else "it is none of " + ", ".join(
        f"{value:.4f} ({why})" for why, value in readings.items()))
    assert float(exact) == pytest.approx((n - 1) / n), (
        f"validate must score the model's own greedy decoding (model.generate) of all {n} "
        f"sums, one of them wrong here ({(n - 1) / n:.4f}), not {float(exact):.4f}: {why}")
    assert float(token) == pytest.approx((4 * n - 1) / (4 * n)), (
        "validate's token accuracy must be over the greedily decoded digits of every sum, "
        "one digit wrong here: is it teacher-forced on tgt_in instead?")


def test_train_end_to_end(tmp_path, monkeypatch):
    stand_in_scripts(monkeypatch)  # Parts A-C's dataset and model: stand-ins
    data = addition_data(tmp_path)
    args = script_args(tmp_path, data)
    results = tmp_path / "results"
    command = ["--digit_order", "reversed", "--train_size", "4000", "--steps", "3"] + args
    run_script("problem1/train.py", train.main, command, TRAINING_USES)  # trained for 3 steps
    log = json.loads((results / "training_log_reversed_n4000.json").read_text())
    assert log["run"] == "reversed_n4000"
    assert log["config"]["lr"] == 1e-3 and log["config"]["batch_size"] == 128
    assert [point["step"] for point in log["log"]] == [3]  # a shortened run validates at its end
    assert set(log["log"][0]) == {"step", "train_loss", "val_exact_match", "val_token_accuracy"}
    assert 0 < log["log"][0]["train_loss"] < 10
    assert 0 <= log["log"][0]["val_exact_match"] <= log["log"][0]["val_token_accuracy"] <= 1
    assert "steps_to_95" in log and log["steps_to_95"] is None
    assert (results / "model_reversed_n4000.pth").exists()

    # the same command gives the same log
    first = (results / "training_log_reversed_n4000.json").read_text()
    train.main(command)
    assert (results / "training_log_reversed_n4000.json").read_text() == first


def _batches(n: int = 3):
    generator = torch.Generator().manual_seed(1)
    src = torch.randint(0, 10, (n, 4, 7), generator=generator)
    src[..., 3] = PLUS
    tgt_out = torch.randint(0, 10, (n, 4, 4), generator=generator)
    tgt_in = torch.cat([torch.full((n, 4, 1), BOS), tgt_out[..., :-1]], dim=-1)
    return list(zip(src, tgt_in, tgt_out))


# Adam as the tests take it: eps 1e-3, so that a gradient that is zero but for rounding (the
# keys' biases: a softmax ignores a shift shared by every key) moves no weight; with the
# default 1e-8 such noise makes a full step, and an equal loss summed in another order (say
# over [B, 12, 4] logits) ends 2e-4 away after three steps
ADAM = {"lr": 1e-3, "eps": 1e-3}


def adam_steps(start: dict, batches, accumulate: bool = False) -> dict:
    """The state of a trusted StandInAdder that starts from start, after one Adam step
    (ADAM) per batch on its teacher-forced loss, the gradients cleared before each backward
    pass unless accumulate."""
    twin = StandInAdder(dropout=0.0)
    twin.load_state_dict(start)
    optimizer = torch.optim.Adam(twin.parameters(), **ADAM)
    for src, tgt_in, tgt_out in batches:
        if not accumulate:
            optimizer.zero_grad()
        logits, _ = twin(src, tgt_in)
        F.cross_entropy(logits.reshape(-1, 12), tgt_out.reshape(-1)).backward()
        optimizer.step()
    return twin.state_dict()


def test_train_step_clears_the_gradients_between_steps():
    """Three calls of train_step give the weights of three Adam steps, each on its own
    batch's gradient; where they do not, the message says whether they are those of steps
    on the gradients added up over the calls."""
    model, twin = adder_and_twin(0, dropout=0.0)
    start = {name: tensor.clone() for name, tensor in twin.state_dict().items()}
    batches = _batches()
    optimizer = optim.Adam(model.parameters(), **ADAM)
    for src, tgt_in, tgt_out in batches:
        train_step(model, optimizer, src, tgt_in, tgt_out)
    found = dict(model.state_dict().items())
    expected = adam_steps(start, batches)
    differ = [name for name in expected
              if not torch.allclose(found[name], expected[name], atol=1e-6)]
    if not differ:
        return
    summed = adam_steps(start, batches, accumulate=True)

    def gap(state: dict) -> float:
        return max((found[name] - state[name]).abs().max().item() for name in state)
    why = ("they are those of Adam steps on the gradients added up over the calls: clear "
           "them before each backward pass (optimizer.zero_grad())" if gap(summed) < 1e-6
           else f"they are {gap(expected):.3g} away from them at most, and {gap(summed):.3g} "
                "from steps on the gradients added up over the calls")
    assert not differ, (
        "train_step must take one Adam step (the optimizer given) on each batch's own "
        f"gradient: after three calls {differ[0]} ({len(differ)} tensors in all) differs "
        f"from three such steps: {why}")


def test_train_step_runs_in_training_mode():
    """train.py validates between steps, which leaves the model in eval mode."""
    model, twin = adder_and_twin(0, dropout=0.5)
    model.eval()
    src, tgt_in, tgt_out = _batches(1)[0]
    optimizer = optim.SGD(model.parameters(), lr=0.0)  # the weights stay the twin's
    message = ("train_step must put the model in training mode (dropout on): it ran in eval "
               "mode, as the model was handed over after a validation")
    modes, _ = stand_ins.modes_during(model, train_step, model, optimizer, src, tgt_in,
                                      tgt_out)
    assert modes == {True}, message
    # the loss it reports is the training-mode loss, dropout's masks drawn from the same seed
    model.eval()
    submission("torch").manual_seed(1)
    loss = train_step(model, optimizer, src, tgt_in, tgt_out)
    torch.manual_seed(1)
    logits, _ = twin.train()(src, tgt_in)
    expected = F.cross_entropy(logits.reshape(-1, 12), tgt_out.reshape(-1)).item()
    with torch.no_grad():
        logits, _ = twin.eval()(src, tgt_in)
    eval_loss = F.cross_entropy(logits.reshape(-1, 12), tgt_out.reshape(-1)).item()
    assert expected != pytest.approx(eval_loss, rel=1e-3)  # dropout shows in the loss
    assert float(loss) == pytest.approx(expected, rel=1e-5), message


def test_validate_runs_in_eval_mode():
    """train.py hands validate a model in training mode, with dropout."""
    model, twin = adder_and_twin(0, dropout=0.5)
    model.train()
    src, tgt_in, _ = random_items(24, seed=1)
    targets = twin.eval().generate(src)  # what eval-mode greedy decoding gives
    dataset = split(src, tgt_in, targets)
    message = ("validate must decode in eval mode (dropout off): it ran in training mode, so "
               "its score changes from call to call")
    modes, _ = stand_ins.modes_during(model, validate, model, dataset)
    assert modes == {False}, message
    torch.manual_seed(2)  # training-mode decoding, with dropout, misses some digits
    assert score_predictions(twin.train().generate(src), targets)[0] < 1
    model.train()
    assert [float(x) for x in validate(model, dataset)] == [1.0, 1.0], message
