"""Problem 1, Part D: steps_to_95, the training step, greedy validation, and train.py end to
end on a tiny data folder with a few steps (no real training)."""

import json

import pytest
import torch
import torch.nn.functional as F

from problem1 import train
from problem1.dataset import BOS, PLUS, AdditionDataset
from problem1.model import AdditionTransformer
from problem1.train import steps_to_95, train_step, validate
from tests.tiny import addition_data, script_args

pytestmark = pytest.mark.p1d


def test_steps_to_95():
    log = [{"step": 50 * (i + 1), "val_exact_match": em} for i, em in
           enumerate([0.1, 0.9499, 0.95, 0.5, 0.99])]
    assert steps_to_95(log) == 150  # the first step that reaches 0.95, inclusive
    assert steps_to_95(log[:2]) is None
    assert steps_to_95([]) is None


def test_train_step_takes_one_step_on_the_teacher_forced_loss():
    torch.manual_seed(0)
    model = AdditionTransformer(dropout=0.0)
    twin = AdditionTransformer(dropout=0.0)
    twin.load_state_dict(model.state_dict())
    src = torch.tensor([[3, 9, 1, PLUS, 9, 6, 8], [0, 1, 2, PLUS, 5, 9, 7]])
    tgt_out = torch.tensor([[1, 3, 5, 9], [0, 6, 0, 9]])
    tgt_in = torch.tensor([[BOS, 1, 3, 5], [BOS, 0, 6, 0]])
    # the loss that train_step must report: cross-entropy of the logits against tgt_out
    logits, _ = twin(src, tgt_in)
    expected = F.cross_entropy(logits.reshape(-1, 12), tgt_out.reshape(-1))
    loss = train_step(model, torch.optim.Adam(model.parameters(), lr=1e-3), src, tgt_in, tgt_out)
    assert float(loss) == pytest.approx(expected.item(), rel=1e-5)
    changed = [name for name, p in model.named_parameters()
               if not torch.equal(p, twin.state_dict()[name])]
    assert changed  # the optimizer took its step


def test_validate_decodes_greedily(tmp_path):
    data = addition_data(tmp_path, n_train=8)
    dataset = AdditionDataset(data, "val", "forward")
    torch.manual_seed(0)
    model = AdditionTransformer().eval()
    with torch.no_grad():  # the argmax is a digit whether or not PLUS and BOS compete
        model.output.bias[PLUS] = model.output.bias[BOS] = -100.0
    predicted = model.generate(dataset.src)
    dataset.tgt_out = predicted.clone()  # the model's own greedy digits are all right ...
    dataset.tgt_out[0, 3] = (predicted[0, 3] + 1) % 10  # ... but for one digit of one sum
    exact, token = validate(model, dataset)
    n = len(dataset)
    assert float(exact) == pytest.approx((n - 1) / n)
    assert float(token) == pytest.approx((4 * n - 1) / (4 * n))


def test_train_end_to_end(tmp_path):
    data = addition_data(tmp_path)
    args = script_args(tmp_path, data)
    results = tmp_path / "results"
    command = ["--digit_order", "reversed", "--train_size", "4000", "--steps", "3"] + args
    assert train.main(command) == 0
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
