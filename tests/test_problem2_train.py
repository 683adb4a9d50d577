"""Problem 2, Part D: the loss and accuracy helpers, and train.py on tiny data (40 training
sequences of 64, one step per epoch; the schemes none and learned, which need no positional
code of Parts B and C, trained for 3 steps). The script's splits are stand-ins
(tests/tiny_problem2.py: GivenOffsetSplits, random targets), so that Part A plays no part."""

import json
import math
import statistics

import pytest
import torch

from problem2.dataset import IGNORE_INDEX
from tests.seam import submission
from tests.tiny import offset_data, run_script, script_args
from tests.tiny_problem2 import Lookup, stand_in_dataset

pytestmark = pytest.mark.p2d

train = submission("problem2.train")
stubs = submission("tests.tiny_problem2")  # stub models, next to the code under test
sandbox_torch = submission("torch")
SGD = submission("torch.optim").SGD
# train.py does not depend on the position scheme: two that need no code of Parts B and C
POSITIONS = ("none", "learned")
TRAINING_USES = "the Part D functions, on stand-in splits (tests/tiny_problem2.py)"


@pytest.fixture(scope="module")
def problem2_runs(tmp_path_factory):
    """A function that returns (data_dir, results_dir) after training the schemes none and
    learned for 3 steps on tiny data. It trains on its first call, inside a test, so that a
    failure there fails the test that called it (and the next test tries again)."""
    done = {}

    def runs():
        if not done:
            root = tmp_path_factory.mktemp("problem2")
            data = offset_data(root)
            with pytest.MonkeyPatch.context() as patch:
                stand_in_dataset(patch, data)
                for position in POSITIONS:
                    run_script("problem2/train.py", train.main,
                               ["--position", position, "--steps", "3",
                                *script_args(root, data)], TRAINING_USES)
            done["runs"] = data, root / "results"
        return done["runs"]

    return runs


def read(path):
    return json.loads(path.read_text())


def test_loss_and_correct_by_hand():
    # Two positions with a target (classes 0 and 1), one ignored.
    logits = torch.tensor([[[2.0, 0.0], [0.0, 1.0], [5.0, 0.0]]])  # [1, 3, 2]
    targets = torch.tensor([[0, 0, IGNORE_INDEX]])
    try:
        loss_sum, correct, count = train.loss_and_correct(logits, targets)
    except RuntimeError as error:
        pytest.fail(f"loss_and_correct(logits [1, 3, 2], targets [1, 3]) raised {error}: is "
                    "the argmax (or the loss) taken over the wrong dimension? The classes are "
                    "the last dimension of logits")
    expected = -math.log(math.exp(2) / (math.exp(2) + 1)) - math.log(1 / (1 + math.e))
    readings = {"the mean over the 2 targets": expected / 2,
                "the mean over all 3 positions, the ignored one included": expected / 3}
    same = [why for why, value in readings.items()
            if float(loss_sum) == pytest.approx(value, rel=1e-6)]
    assert float(loss_sum) == pytest.approx(expected, rel=1e-6), (
        "loss_and_correct must return the summed cross-entropy over the positions with a "
        f"target ({expected:.4f} here), not {float(loss_sum):.4f}: "
        + ("it is " + same[0] + ", not the sum" if same else "it is none of " + ", ".join(
            f"{why} ({value:.4f})" for why, value in readings.items())))
    assert isinstance(loss_sum, torch.Tensor), (
        "loss_and_correct must return loss_sum as a tensor (train_epoch backpropagates "
        f"through it), not {type(loss_sum).__name__}: is .item() called on it?")
    assert type(correct) is int and type(count) is int, (
        "loss_and_correct must return correct and count as Python ints (.item()), not "
        f"{type(correct).__name__} and {type(count).__name__}")
    assert (int(correct), int(count)) == (1, 2), (
        "loss_and_correct must count only the positions with a target (not IGNORE_INDEX), "
        "for both correct and count: are ignored positions counted?")


def loss_and_correct_note() -> str:
    """evaluate_split and train_epoch rely on loss_and_correct: a sentence that says to fix
    it first when it fails test_loss_and_correct_by_hand's case (a probe, so that the
    grader's message says it too), else ''."""
    logits = torch.tensor([[[2.0, 0.0], [0.0, 1.0], [5.0, 0.0]]])
    targets = torch.tensor([[0, 0, IGNORE_INDEX]])
    expected = -math.log(math.exp(2) / (math.exp(2) + 1)) - math.log(1 / (1 + math.e))
    try:
        loss_sum, correct, count = train.loss_and_correct(logits, targets)
        right = (float(loss_sum) == pytest.approx(expected, rel=1e-6)
                 and (int(correct), int(count)) == (1, 2))
    except Exception:
        right = False
    return "" if right else ("your loss_and_correct fails its own test "
                             "(test_loss_and_correct_by_hand): fix it first, this function "
                             "relies on it. ")


def _offset_batch(n: int = 10, length: int = 12, k: int = 3):
    tokens = torch.randint(0, 16, (n, length), generator=torch.Generator().manual_seed(2))
    targets = torch.full_like(tokens, IGNORE_INDEX)
    targets[:, k:] = tokens[:, :-k]
    return tokens, targets


def sgd_epoch(state: dict, tokens, targets, order, divisor=None, clear: bool = True):
    """The table of a trusted Lookup twin that starts from state, after SGD(lr=0.5) steps over
    the batches of 4 rows of order: each step on the batch's summed loss over its targets
    divided by divisor(rows) (None: by its number of targets, the mean), the gradients
    cleared before each backward unless clear is False."""
    twin = Lookup()
    twin.load_state_dict(state)
    optimizer = torch.optim.SGD(twin.parameters(), lr=0.5)
    for start in range(0, len(order), 4):
        rows = order[start:start + 4]
        if clear:
            optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(twin(tokens[rows]).flatten(0, 1),
                                                 targets[rows].flatten(), reduction="sum")
        (loss / (divisor(rows) if divisor else (targets[rows] != IGNORE_INDEX).sum())).backward()
        optimizer.step()
    return twin.table.detach()


def test_train_epoch_takes_one_step_per_batch_in_the_seeded_order():
    """With SGD, train_epoch's weights equal those of a plain loop over the batches of
    torch.randperm(N, generator=generator), each step on its own batch's mean loss. Where
    they differ, the message says which usual mistake's loop gives them exactly, if one
    does, else how far they are from the right loop's."""
    tokens, targets = _offset_batch()
    model = stubs.Lookup()  # the code's model; the loops here run trusted twins of it
    state = {name: tensor.clone() for name, tensor in model.state_dict().items()}
    sandbox_torch.manual_seed(123)  # the global generator must play no part
    result = train.train_epoch(model, SGD(model.parameters(), lr=0.5), tokens, targets,
                               sandbox_torch.Generator().manual_seed(7), batch_size=4,
                               max_steps=100)
    assert int(result["steps"]) == 3, (
        "train_epoch must take one step per batch: 3 steps for 10 rows in batches of 4 (the "
        f"last of 2), not {int(result['steps'])}: is the incomplete last batch dropped?")
    order = torch.randperm(10, generator=torch.Generator().manual_seed(7))
    found, expected = model.table.detach(), sgd_epoch(state, tokens, targets, order)

    def why() -> str:
        mistakes = {  # the weights each usual mistake's loop gives
            "each step's summed loss is divided by the batch's number of sequences, not of "
            "its targets": sgd_epoch(state, tokens, targets, order, divisor=len),
            "each step is on the batch's summed loss, not its mean":
                sgd_epoch(state, tokens, targets, order, divisor=lambda rows: 1),
            "the batches are taken in row order, not shuffled":
                sgd_epoch(state, tokens, targets, torch.arange(10)),
            "the order is drawn from the global generator, not the one given":
                sgd_epoch(state, tokens, targets,
                          torch.randperm(10, generator=torch.Generator().manual_seed(123))),
            "the gradients are not cleared between steps":
                sgd_epoch(state, tokens, targets, order, clear=False),
            "no step changes the weights": state["table"]}
        same = [why for why, weights in mistakes.items()
                if torch.allclose(found, weights, atol=1e-6)]
        if same:
            return "they are exactly what a loop gives where " + ", or ".join(same)
        return (f"they differ from that loop's by up to {(found - expected).abs().max():.3g}, "
                "and are not what a loop gives where " + ", or ".join(mistakes))
    assert torch.allclose(found, expected, atol=1e-6), (
        "train_epoch must take one step per batch on that batch's mean loss over its targets, "
        f"in the order torch.randperm(N, generator=generator): {why()}")


def test_train_epoch_stops_after_max_steps():
    tokens, targets = _offset_batch()
    model = stubs.Lookup()
    result = train.train_epoch(model, SGD(model.parameters(), lr=0.5), tokens, targets,
                               sandbox_torch.Generator().manual_seed(7), batch_size=4,
                               max_steps=2)
    assert int(result["steps"]) == 2, (
        "train_epoch must stop after max_steps steps: is the check off by one?")


def test_train_epoch_without_a_cap_takes_every_batch():
    """train passes max_steps=float("inf") when no --steps cap is given (the docstring)."""
    tokens, targets = _offset_batch()
    model = stubs.Lookup()
    result = train.train_epoch(model, SGD(model.parameters(), lr=0.5), tokens, targets,
                               sandbox_torch.Generator().manual_seed(7), batch_size=4,
                               max_steps=float("inf"))
    steps = int(result["steps"])
    why = ("is the incomplete last batch (2 rows) dropped?" if steps == 2 else
           "range(max_steps) or int(max_steps) fails on the infinite cap every real run passes")
    assert steps == 3, (
        "train_epoch with max_steps=float('inf') must take every batch (3 of 4 rows from 10), "
        f"not {steps}: {why}")


def test_evaluate_split_pools_uneven_batches():
    row = [0.0, 2.0, 0.0, 1.0]  # the same logits everywhere: predicts token 1
    I = IGNORE_INDEX
    tokens = torch.zeros(5, 4, dtype=torch.long)
    targets = torch.tensor([[I, 1, 3, 1], [I, I, I, 1], [I, 0, 3, 3], [I, 1, I, I],
                            [I, 2, 1, 1]])
    result = train.evaluate_split(stubs.FixedLogits(row), tokens, targets, batch_size=2)
    logsumexp = math.log(sum(math.exp(v) for v in row))

    def losses(rows: slice) -> list[float]:
        """The targets' losses in these rows."""
        return [logsumexp - row[t] for line in targets[rows].tolist() for t in line if t != I]
    wanted = [t for line in targets.tolist() for t in line if t != I]
    mean_loss, total = statistics.mean(losses(slice(None))), sum(losses(slice(None)))
    batch_means = [statistics.mean(losses(slice(start, start + 2))) for start in range(0, 5, 2)]
    readings = {statistics.mean(batch_means): "the mean of the per-batch means, wrong for "
                                              "uneven batches",
                statistics.mean(losses(slice(0, 4))): "the loss of rows 0-3 only: the last, "
                "incomplete batch (row 4) is never evaluated",
                total / 5: "divided by the number of sequences",
                total / 20: "divided by the number of positions, ignored ones included"}
    found = float(result["loss"])
    why = next((f"it is {why}" for value, why in readings.items()
                if found == pytest.approx(value, rel=1e-6)),
               "it is none of " + "; ".join(f"{v:.4f} ({w})" for v, w in readings.items()))
    assert found == pytest.approx(mean_loss, rel=1e-6), (
        f"{loss_and_correct_note()}"
        "evaluate_split's loss must be the batches' summed losses divided by the number of "
        f"targets ({mean_loss:.4f} here), not {found:.4f}: {why}")
    assert float(result["accuracy"]) == pytest.approx(wanted.count(1) / len(wanted)), (
        f"{loss_and_correct_note()}"
        "evaluate_split's accuracy must pool the counts of every batch (all correct over all "
        "targets): is it a mean of per-batch accuracies?")


def test_train_epoch_draws_each_epochs_order_from_the_generator_given():
    """Two epochs with one generator: the second's order is the generator's next
    torch.randperm(N) (a generator remade from its seed would repeat the first's)."""
    tokens, targets = _offset_batch()
    model = stubs.Lookup()
    state = {name: tensor.clone() for name, tensor in model.state_dict().items()}
    generator = sandbox_torch.Generator().manual_seed(7)
    for _ in range(2):
        train.train_epoch(model, SGD(model.parameters(), lr=0.5), tokens, targets, generator,
                          batch_size=4, max_steps=100)
    trusted = torch.Generator().manual_seed(7)
    first, second = (torch.randperm(10, generator=trusted) for _ in range(2))
    after_first = {"table": sgd_epoch(state, tokens, targets, first)}
    found = model.table.detach()
    repeated = torch.allclose(found, sgd_epoch(after_first, tokens, targets, first), atol=1e-6)
    assert torch.allclose(found, sgd_epoch(after_first, tokens, targets, second), atol=1e-6), (
        "train_epoch must draw each epoch's order from the generator it is given, which then "
        "advances: the second epoch takes its next torch.randperm(N), not "
        + ("the first epoch's order again: is a new generator made from its seed at each "
           "call?" if repeated else "this order (is another generator used?)"))


def test_train_epoch_reports_the_loss_and_accuracy_over_the_targets_seen():
    tokens, targets = _offset_batch()
    model, twin = stubs.Lookup(), Lookup()
    twin.load_state_dict(model.state_dict())
    result = train.train_epoch(model, SGD(model.parameters(), lr=0.0), tokens, targets,
                               sandbox_torch.Generator().manual_seed(3), batch_size=4,
                               max_steps=100)  # at lr 0 the weights stay: the twin's loss
    with torch.no_grad():
        logits = twin(tokens)
    losses = torch.nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten(),
                                               reduction="none").view(10, -1)
    seen = (targets != IGNORE_INDEX).sum().item()
    expected = losses.sum().item() / seen
    accuracy = ((logits.argmax(-1) == targets).sum() / (targets != IGNORE_INDEX).sum()).item()
    assert int(result["steps"]) == 3, (
        "train_epoch must take one step per batch, the last one smaller (4, 4 and 2 rows of "
        f"10 here), not {int(result['steps'])}: is the incomplete last batch dropped?")
    order = torch.randperm(10, generator=torch.Generator().manual_seed(3))
    readings = {  # what the usual mistakes report here
        "the summed loss divided by the number of steps (3)": losses.sum().item() / 3,
        "the summed loss divided by the number of sequences (10)": losses.sum().item() / 10,
        "the mean of the batches' mean losses": sum(
            losses[order[i:i + 4]].mean().item() for i in range(0, 10, 4)) / 3}
    loss = float(result["loss"])
    same = [why for why, value in readings.items() if loss == pytest.approx(value, rel=1e-5)]
    why = ("it is " + ", or ".join(same) if same else "it is none of " + ", ".join(
        f"{why} ({value:.4f})" for why, value in readings.items()))
    assert loss == pytest.approx(expected, rel=1e-5), (
        "train_epoch's loss must be the batches' summed losses divided by the number of "
        f"targets seen ({seen}; {expected:.4f} here), not {loss:.4f}: {why}")
    assert float(result["accuracy"]) == pytest.approx(accuracy), (
        "train_epoch's accuracy must be the correct predictions over the targets seen")


def clean_loss(model, tokens, targets) -> float:
    """The eval-mode (dropout off) mean loss over the targets of the code's Lookup model, by a
    trusted twin here that holds its weights."""
    twin = Lookup()
    twin.load_state_dict(model.state_dict())
    logits = twin.eval()(tokens)
    return torch.nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten()).item()


def test_train_epoch_trains_and_evaluate_split_evaluates_in_their_modes():
    tokens, targets = _offset_batch()
    # At learning rate 0 the weights stay: only dropout (training mode) moves the loss
    # train_epoch reports away from the eval-mode loss.
    model = stubs.Lookup(dropout=0.5).eval()
    modes, result = stubs.modes_during(
        model, train.train_epoch, model, SGD(model.parameters(), lr=0.0), tokens, targets,
        sandbox_torch.Generator().manual_seed(7), batch_size=4, max_steps=100)
    assert modes == {True}, ("train_epoch must put the model in training mode: it ran in "
                             "eval mode, as train.py hands it over after an evaluation")
    assert abs(float(result["loss"]) - clean_loss(model, tokens, targets)) > 1e-3, (
        "train_epoch must put the model in training mode: its loss is the eval-mode loss "
        "(dropout off), as if it ran in the eval mode train.py hands it over in")
    model.train()
    modes, result = stubs.modes_during(model, train.evaluate_split, model, tokens, targets)
    assert modes == {False}, ("evaluate_split must run in eval mode (dropout off): it ran in "
                              "training mode")
    assert float(result["loss"]) == pytest.approx(clean_loss(model, tokens, targets),
                                                  rel=1e-6), (
        "evaluate_split must run in eval mode (dropout off): its loss is not the eval-mode "
        "loss of the model's logits (if test_evaluate_split_pools_uneven_batches fails too, "
        "fix how the loss is averaged first)")


def test_training_log(problem2_runs):
    _, results = problem2_runs()
    for position in POSITIONS:
        log = read(results / f"training_log_{position}.json")
        assert log["run"] == position
        assert log["config"]["lr"] == 1e-3 and log["config"]["batch_size"] == 64
        assert log["config"]["epochs"] == 5 and log["config"]["d_model"] == 64
        assert [r["epoch"] for r in log["log"]] == [1, 2, 3]
        assert [r["step"] for r in log["log"]] == [1, 2, 3]
        for record in log["log"]:
            for key in ("train_loss", "train_accuracy", "test_loss", "test_accuracy"):
                assert math.isfinite(record[key])
            assert 0 <= record["train_accuracy"] <= 1 and 0 <= record["test_accuracy"] <= 1
            assert 1.0 < record["train_loss"] < 10.0  # about log(16) = 2.77 untrained
        assert (results / f"model_{position}.pth").exists()


def test_training_loss_goes_down_and_is_deterministic(problem2_runs, tmp_path, monkeypatch):
    data, results = problem2_runs()
    args = ["--position", "learned", "--steps", "3", "--data_dir", str(data),
            "--results_dir", str(tmp_path), "--device", "cpu", "--threads", "1"]
    stand_in_dataset(monkeypatch, data)
    run_script("problem2/train.py", train.main, args, TRAINING_USES)
    first = (tmp_path / "training_log_learned.json").read_text()
    assert first == (results / "training_log_learned.json").read_text()
    losses = [r["train_loss"] for r in json.loads(first)["log"]]
    assert losses[-1] < losses[0]
