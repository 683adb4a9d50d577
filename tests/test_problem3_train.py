"""Problem 3, Part C: the learning-rate schedule, the training step and its gradient norms
(on TinyLM, a stand-in LM of tests/tiny_problem3.py, so that Part B plays no part), and
train.py for a few steps (nothing trains for real) on stand-ins of Parts A and B
(stand_in_parts_a_and_b: the homework's vocabulary, random token ids, a StandInLM)."""

import json
import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from problem3.config import CLIP_NORM
from problem3.dataset import IGNORE_INDEX
from tests.seam import submission
from tests.tiny import p3_train_args, read_log, run_script, smiles_data
from tests.tiny_problem3 import TinyLM, stand_in_parts_a_and_b

TRAINING_USES = ("lr_at_step and train_step (Part C), on stand-ins of the vocabulary, the "
                 "dataset and the model (tests/tiny_problem3.py)")
pytestmark = pytest.mark.p3c

tr = submission("problem3.train")
stubs = submission("tests.tiny_problem3")  # stand-ins, next to the code under test
SGD = submission("torch.optim").SGD

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def data_dir(tmp_path) -> Path:
    """A data folder holding the 400 + 100 fixture strings as the SMILES splits."""
    return smiles_data(tmp_path)


def models(**options):
    """(a stand-in LM next to the code under test, its trusted twin here): train_step
    needs only the interface of DecoderLM (model(inputs) -> logits, model.head)."""
    model = stubs.TinyLM(**options)
    twin = TinyLM(**options)
    twin.load_state_dict(model.state_dict())
    return model, twin


LR_CASES = [  # (step, warmup, expected) at peak 1e-3
    (1, 500, 1e-3 / 500), (250, 500, 5e-4), (499, 500, 1e-3 * 499 / 500), (500, 500, 1e-3),
    (501, 500, 1e-3), (4000, 500, 1e-3), (1, 0, 1e-3), (1500, 0, 1e-3)]


def test_lr_at_step():
    got = []
    for step, warmup, _ in LR_CASES:
        try:
            got.append(float(tr.lr_at_step(step, 1e-3, warmup)))
        except ZeroDivisionError:
            pytest.fail(f"lr_at_step({step}, 1e-3, warmup={warmup}) raised ZeroDivisionError: "
                        "with warmup 0 it must return the peak from step 1 (no warmup)")
    readings = {  # what the usual mistakes give for LR_CASES
        "step // warmup is an integer division (0 until the end of warmup)":
            [1e-3 * min(1, s // w) if w else 1e-3 for s, w, _ in LR_CASES],
        "the steps are counted from 0 (the rate at step s is peak * (s - 1) / warmup)":
            [1e-3 * min(1, (s - 1) / w) if w else 1e-3 for s, w, _ in LR_CASES],
        "the rate is never capped at the peak": [1e-3 * s / w if w else 1e-3
                                                 for s, w, _ in LR_CASES]}
    same = [why for why, values in readings.items() if got == pytest.approx(values, rel=1e-12)]
    if any(rate < 1e-3 * (1 - 1e-9) for (step, warmup, _), rate in zip(LR_CASES, got)
           if warmup and step > warmup):
        same.append("the rate falls below the peak after warmup (a decay: none is asked for)")
    why = ("it is what it is when " + ", or when ".join(same) + ":" if same else
           "it is none of the usual mistakes (" + "; ".join(readings) + "):")
    assert got == pytest.approx([expected for _, _, expected in LR_CASES], rel=1e-12), (
        "lr_at_step must rise linearly to the peak, peak * step / warmup with steps counted "
        "from 1, then stay at the peak (no warmup: the peak from step 1): "
        f"{why} (step, warmup) {[c[:2] for c in LR_CASES]} gave {got}")


def test_train_step_logs_gradient_norms_before_clipping():
    model, twin = models()
    # large logits, so the total gradient norm exceeds the clip
    model.load_state_dict({"head.weight": 30 * twin.head.weight.detach()}, strict=False)
    twin.load_state_dict(model.state_dict())
    inputs = torch.randint(3, 12, (4, 11))
    targets = torch.randint(3, 12, (4, 11))
    targets[:, 8:] = IGNORE_INDEX
    optimizer = SGD(model.parameters(), lr=0.0)  # lr set by train_step
    loss, head_norm, total_norm = tr.train_step(model, optimizer, inputs, targets, lr=1.0)

    ref_loss = F.cross_entropy(twin(inputs).reshape(-1, 12), targets.reshape(-1),
                               ignore_index=-100)
    ref_loss.backward()
    grads = [p.grad for p in twin.parameters()]
    summed = F.cross_entropy(twin(inputs).reshape(-1, 12), targets.reshape(-1),
                             ignore_index=-100, reduction="sum").item()
    assert float(loss) == pytest.approx(ref_loss.item(), rel=1e-6), (
        "train_step must return the mean cross-entropy over the positions with a target "
        f"({ref_loss.item():.4f} here), not {float(loss):.4f}: "
        + ("it is the sum over the targets, not the mean" if float(loss) == pytest.approx(
            summed, rel=1e-5) else "are the IGNORE_INDEX (padding) positions in the loss?"))
    head_grad = twin.head.weight.grad.pow(2).sum().sqrt().item()
    assert float(head_norm) == pytest.approx(head_grad, rel=1e-5), (
        "train_step must log the norm of head.weight's gradient before clipping: is it "
        "measured after clip_grad_norm_, or on another parameter?")
    expected_total = math.sqrt(sum(g.pow(2).sum().item() for g in grads))
    summed_norms = sum(g.pow(2).sum().sqrt().item() for g in grads)
    assert float(total_norm) == pytest.approx(expected_total, rel=1e-5), (
        "train_step must log the total gradient norm before clipping (what clip_grad_norm_ "
        f"returns: {expected_total:.4f} here), not {float(total_norm):.4f}: " + (
            "is it measured after clipping?" if float(total_norm) <= CLIP_NORM * (1 + 1e-5)
            else "it is the sum of the parameters' norms, not sqrt of the sum of their "
            "squares" if float(total_norm) == pytest.approx(summed_norms, rel=1e-5)
            else "the norm of all gradients together is sqrt(sum of every entry squared)"))
    assert float(total_norm) > CLIP_NORM, (  # so the step below used clipped gradients
        "the total gradient norm logged must be the unclipped one, above CLIP_NORM here")
    # SGD at lr 1: the update is the clipped gradient, of norm exactly CLIP_NORM.
    after = model.state_dict()
    update = [p0 - after[name] for name, p0 in twin.named_parameters()]
    update_norm = math.sqrt(sum(u.pow(2).sum().item() for u in update))
    why = ("no parameter moved: is the lr given never set in the optimizer's param_groups, or "
           "no step taken?" if update_norm == 0 else
           f"it is the unclipped gradient's norm ({expected_total:.4g}): the gradients are not "
           "clipped before optimizer.step() (not at all, or after it)"
           if update_norm == pytest.approx(expected_total, rel=1e-4) else
           f"neither 0 nor the unclipped gradient's norm ({expected_total:.4g})")
    assert update_norm == pytest.approx(1.0, rel=1e-4), (
        "with SGD at lr 1 the update must be the gradient clipped to norm CLIP_NORM, not of "
        f"norm {update_norm:.4g}: {why}")
    assert optimizer.param_groups[0]["lr"] == 1.0, (
        "train_step must set the lr given in every param group of the optimizer")


def test_train_end_to_end(data_dir, tmp_path, monkeypatch):
    stand_in_parts_a_and_b(monkeypatch)
    monkeypatch.setattr(tr, "LOG_EVERY", 2)
    monkeypatch.setattr(tr, "VAL_EVERY", 4)
    results = tmp_path / "results"
    run_script("problem3/train.py", tr.main,
               p3_train_args(data_dir, results, "--steps", "6", "--checkpoint_every", "3"),
               TRAINING_USES)
    log = read_log(results, "pre_lr0.001_w3_s6")
    assert log["run"] == "pre_lr0.001_w3_s6" and log["config"]["warmup"] == 3
    assert [r["step"] for r in log["log"]] == [2, 4, 6]
    assert [r["lr"] for r in log["log"]] == pytest.approx([2e-3 / 3, 1e-3, 1e-3])
    for record in log["log"]:
        assert 0 < record["train_loss"] < 10
        assert 0 < record["head_grad_norm"] <= record["total_grad_norm"]
    assert [r["step"] for r in log["val"]] == [4, 6]
    assert log["final_val_loss"] == log["val"][-1]["val_loss"] and 0 < log["final_val_loss"] < 10
    assert {p.name for p in results.glob("model_*.pth")} == {
        "model_pre_lr0.001_w3_s6.pth", "model_pre_lr0.001_w3_s6_step3.pth"}


def test_diverged_run_logs_null_and_finishes(data_dir, tmp_path, monkeypatch):
    stand_in_parts_a_and_b(monkeypatch)
    monkeypatch.setattr(tr, "LOG_EVERY", 2)
    monkeypatch.setattr(tr, "VAL_EVERY", 2)
    # head.weight filled with NaN before each step, next to the code under test
    monkeypatch.setattr(tr, "train_step", stubs.FillsHeadWithNan(tr.train_step))
    run_script("problem3/train.py", tr.main, p3_train_args(data_dir, tmp_path, "--steps", "4"),
               TRAINING_USES)
    log = read_log(tmp_path, "pre_lr0.001_w3_s4")
    assert log["final_val_loss"] is None
    assert all(r["train_loss"] is None and r["head_grad_norm"] is None for r in log["log"])
    text = (tmp_path / "training_log_pre_lr0.001_w3_s4.json").read_text()
    assert "NaN" not in text and json.loads(text)["final_val_loss"] is None


def test_train_step_clears_the_gradients_between_steps():
    """Two calls of train_step with SGD give the weights of two plain steps, each on its
    own batch's clipped gradient."""
    model, twin = models()
    generator = torch.Generator().manual_seed(3)
    batches = [(torch.randint(3, 12, (4, 11), generator=generator),
                torch.randint(3, 12, (4, 11), generator=generator)) for _ in range(2)]
    optimizer = SGD(model.parameters(), lr=0.0)
    twin_optimizer = torch.optim.SGD(twin.parameters(), lr=0.1)
    for inputs, targets in batches:
        tr.train_step(model, optimizer, inputs, targets, lr=0.1)
        twin_optimizer.zero_grad()
        F.cross_entropy(twin(inputs).reshape(-1, 12), targets.reshape(-1)).backward()
        torch.nn.utils.clip_grad_norm_(twin.parameters(), CLIP_NORM)
        twin_optimizer.step()
    after = model.state_dict()
    for name, q in twin.named_parameters():
        assert torch.allclose(after[name], q, atol=1e-6), (
            f"train_step must clear the gradients before each backward pass: after two steps "
            f"{name} differs from two plain SGD steps (are the first step's gradients still "
            "added in?)")


def test_train_step_runs_in_training_mode():
    model, twin = models(dropout=0.5)
    model.eval()  # as a validation leaves it
    inputs = torch.randint(3, 12, (4, 11))
    optimizer = SGD(model.parameters(), lr=0.0)
    modes, (loss, _, _) = stubs.modes_during(model, tr.train_step, model, optimizer, inputs,
                                             inputs, 0.1)
    assert modes == {True}, ("train_step must put the model in training mode (dropout on): it "
                             "ran in eval mode, as train.py hands it over after a validation")
    # The loss is taken before the step: only dropout (training mode) moves it away from
    # the eval-mode loss of the weights it started from.
    with torch.no_grad():
        clean = F.cross_entropy(twin.eval()(inputs).reshape(-1, 12), inputs.reshape(-1))
    assert abs(float(loss) - clean.item()) > 1e-3, (
        "train_step must put the model in training mode (dropout on): its loss is the "
        "eval-mode loss, as if it ran in the eval mode train.py hands it over in")


def test_train_step_sets_the_lr_of_every_parameter_group():
    model, _ = models()
    optimizer = SGD([{"params": model.head.parameters()},
                     {"params": model.tok_emb.parameters()},
                     {"params": model.pos_emb.parameters(), "lr": 5.0}], lr=0.0)
    inputs = torch.randint(3, 12, (2, 11), generator=torch.Generator().manual_seed(4))
    tr.train_step(model, optimizer, inputs, inputs, lr=0.25)
    rates = [group["lr"] for group in optimizer.param_groups]
    assert rates == [0.25] * 3, (
        "train_step must set the lr given on every parameter group of the optimizer (a model "
        f"may be trained with several): the groups' lr are {rates}; is only the first one "
        "set?")


def test_train_step_steps_even_when_the_loss_is_not_finite():
    """train_step's docstring: non-finite values are returned as they are and the step is
    taken regardless (an SGD here that counts its steps)."""
    model, _ = models()
    state = model.state_dict()
    state["head.weight"] = torch.full_like(state["head.weight"], float("nan"))
    model.load_state_dict(state)
    optimizer = stubs.CountsSteps(model.parameters(), lr=0.1)
    inputs = torch.randint(3, 12, (4, 11), generator=torch.Generator().manual_seed(0))
    loss, head_norm, total_norm = tr.train_step(model, optimizer, inputs, inputs, lr=0.1)
    assert not math.isfinite(loss), "with a NaN head the loss must come back NaN, as it is"
    steps = int(optimizer.steps)
    assert steps == 1, (
        f"train_step must take its optimizer step even when the loss is not finite (the "
        f"docstring: the step is taken regardless); optimizer.step() was called {steps} "
        "times: is the step skipped for a non-finite loss?")
