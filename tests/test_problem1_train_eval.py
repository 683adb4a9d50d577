"""Problem 1, Parts D and E: steps_to_95, head removal and pruning, and both scripts end to end
on a tiny data folder with a few steps (no real training)."""

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from problem1 import evaluate, train
from problem1.evaluate import (
    HEAD_NAMES,
    greedy_pruning,
    mean_attention_maps,
    remove_head,
    single_head_ablation,
)
from problem1.model import AdditionTransformer
from problem1.train import batch_indices, score_predictions, steps_to_95

REPO = Path(__file__).resolve().parents[1]


def test_steps_to_95():
    log = [{"step": 50 * (i + 1), "val_exact_match": em} for i, em in
           enumerate([0.1, 0.9499, 0.95, 0.5, 0.99])]
    assert steps_to_95(log) == 150  # the first step that reaches 0.95, inclusive
    assert steps_to_95(log[:2]) is None
    assert steps_to_95([]) is None


def test_score_predictions():
    target = torch.tensor([[1, 3, 5, 9], [0, 6, 0, 9]])
    predicted = torch.tensor([[1, 3, 5, 9], [0, 6, 1, 9]])
    assert score_predictions(predicted, target) == (0.5, 7 / 8)


def test_batches_are_shuffled_passes():
    batches = batch_indices(6, 4, torch.Generator().manual_seed(0))
    stream = torch.cat([next(batches) for _ in range(3)])  # 12 indices: two full passes
    assert sorted(stream[:6].tolist()) == list(range(6))
    assert sorted(stream[6:].tolist()) == list(range(6))


def test_head_names():
    assert len(HEAD_NAMES) == 24 and len(set(HEAD_NAMES)) == 24
    assert HEAD_NAMES[:5] == ["enc0.self.h0", "enc0.self.h1", "enc0.self.h2", "enc0.self.h3",
                              "enc1.self.h0"]
    assert HEAD_NAMES[12] == "dec0.cross.h0" and HEAD_NAMES[-1] == "dec1.cross.h3"


def test_remove_head_changes_exactly_one_head():
    torch.manual_seed(0)
    model = AdditionTransformer().eval()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    module = model.decoder_layers[1].cross_attn
    x, memory = torch.randn(2, 4, 128), torch.randn(2, 7, 128)
    with torch.no_grad():
        q, k, v = (module.W_q(x), module.W_k(memory), module.W_v(memory))
        out_before, _ = module(x, memory, memory)
    assert remove_head(model, "dec1.cross.h2") is None
    after = model.state_dict()
    changed = [k for k in before if not torch.equal(before[k], after[k])]
    assert changed == ["decoder_layers.1.cross_attn.W_o.weight"]
    weight = after["decoder_layers.1.cross_attn.W_o.weight"]
    assert (weight[:, 64:96] == 0).all()
    assert torch.equal(weight[:, :64], before["decoder_layers.1.cross_attn.W_o.weight"][:, :64])
    assert torch.equal(weight[:, 96:], before["decoder_layers.1.cross_attn.W_o.weight"][:, 96:])
    # the output loses exactly head 2's term W_o[:, 64:96] @ head_2_output
    cols = slice(64, 96)
    scores = q[..., cols] @ k[..., cols].transpose(1, 2) / 32 ** 0.5
    head = scores.softmax(-1) @ v[..., cols]  # [2, 4, 32]
    with torch.no_grad():
        out_after, _ = module(x, memory, memory)
    expected = out_before - head @ before["decoder_layers.1.cross_attn.W_o.weight"][:, cols].T
    torch.testing.assert_close(out_after, expected, atol=1e-5, rtol=1e-5)


def test_remove_head_names_map_to_their_modules():
    model = AdditionTransformer()
    remove_head(model, "enc0.self.h0")
    remove_head(model, "dec0.self.h3")
    assert (model.encoder_layers[0].self_attn.W_o.weight[:, :32] == 0).all()
    assert (model.decoder_layers[0].self_attn.W_o.weight[:, 96:] == 0).all()
    assert (model.decoder_layers[0].cross_attn.W_o.weight != 0).all()


# A score over sets of removed heads, worked out by hand. Alone, B costs least (0.05), then
# A (0.1), then C (0.5). After B is gone, removing A costs 0.75 but C only 0.35: an
# implementation that ranks heads once by their single costs removes A second; the greedy
# one, recomputing costs, removes C.
HAND_SCORES = {(): 1.0, ("A",): 0.9, ("B",): 0.95, ("C",): 0.5,
               ("A", "B"): 0.2, ("B", "C"): 0.6, ("A", "C"): 0.4, ("A", "B", "C"): 0.0}


def hand_score(removed):
    return HAND_SCORES[tuple(sorted(removed))]


def test_greedy_pruning_recomputes_costs():
    curve = greedy_pruning(hand_score, heads=["A", "B", "C"])
    assert curve == [{"removed": [], "test_exact_match": 1.0},
                     {"removed": ["B"], "test_exact_match": 0.95},
                     {"removed": ["B", "C"], "test_exact_match": 0.6},
                     {"removed": ["B", "C", "A"], "test_exact_match": 0.0}]


def test_greedy_pruning_breaks_ties_by_head_order():
    curve = greedy_pruning(lambda removed: 1.0, heads=["X", "Y", "Z"])
    assert [point["removed"] for point in curve] == [[], ["X"], ["X", "Y"], ["X", "Y", "Z"]]


def test_single_head_ablation():
    assert single_head_ablation(hand_score, heads=["A", "B", "C"]) == {
        "A": 0.9, "B": 0.95, "C": 0.5}


def test_carries_and_breakdown():
    from problem1.dataset import PLUS
    from problem1.evaluate import breakdown, carries

    src = torch.tensor([[3, 9, 1, PLUS, 9, 6, 8],    # 391 + 968: 9+6 and 3+9+1 carry
                        [0, 1, 2, PLUS, 5, 9, 7],    # 12 + 597: only 1+9 carries
                        [9, 9, 9, PLUS, 0, 0, 1],    # 999 + 1: three carries
                        [1, 2, 3, PLUS, 4, 5, 6]])   # no carry
    assert carries(src).tolist() == [2, 1, 3, 0]

    class Split:  # the three attributes breakdown reads
        digit_order = "reversed"
        tgt_out = torch.tensor([[9, 5, 3, 1], [9, 0, 6, 0], [0, 0, 0, 1], [9, 7, 5, 0]])

    Split.src = src
    predicted = Split.tgt_out.clone()
    predicted[0, 3] = 0  # wrong thousands digit of 391 + 968
    result = breakdown(predicted, Split)
    assert result["place_accuracy"] == {"s0": 1.0, "s1": 1.0, "s2": 1.0, "s3": 0.75}
    assert result["exact_match_by_carries"] == {"0": 1.0, "1": 1.0, "2": 0.0, "3": 1.0}
    Split.digit_order = "forward"  # the same errors read in forward order: column 0 is s3
    Split.tgt_out = Split.tgt_out.flip(1)
    assert breakdown(predicted.flip(1), Split)["place_accuracy"]["s3"] == 0.75


def write_tiny_data(root: Path, n_train=4000, n_eval=24) -> Path:
    rng = random.Random(0)
    folder = root / "data" / "addition"
    folder.mkdir(parents=True)
    for split, n in (("train", n_train), ("val", n_eval), ("test", n_eval)):
        lines = [f"{rng.randint(0, 999)},{rng.randint(0, 999)}" for _ in range(n)]
        (folder / f"{split}.csv").write_text("a,b\n" + "\n".join(lines) + "\n")
    return root / "data"


def test_mean_attention_maps_use_greedy_predictions(tmp_path):
    from problem1.dataset import AdditionDataset

    data = write_tiny_data(tmp_path, n_train=8)
    torch.manual_seed(0)
    model = AdditionTransformer().eval()
    test = AdditionDataset(data, "test", "forward")
    maps = mean_attention_maps(model, test)
    assert maps["encoder"].shape == (2, 4, 7, 7) and maps["decoder_cross"].shape == (2, 4, 4, 7)
    torch.testing.assert_close(maps["decoder_cross"].sum(-1), torch.ones(2, 4, 4))
    predicted = model.generate(test.src)
    tgt_in = torch.cat([torch.full((len(test), 1), 11), predicted[:, :3]], dim=1)
    _, attention = model(test.src, tgt_in)
    torch.testing.assert_close(maps["decoder_cross"][1], attention["decoder_cross"][1].mean(0))


def test_head_removal_scorer_matches_a_fresh_copy(tmp_path):
    import copy

    from problem1.dataset import AdditionDataset
    from problem1.evaluate import HeadRemovalScorer

    data = write_tiny_data(tmp_path, n_train=8, n_eval=200)
    test = AdditionDataset(data, "test", "reversed")
    torch.manual_seed(0)
    model = AdditionTransformer().eval()
    with torch.no_grad():  # a model whose outputs depend strongly on every head
        for p in model.parameters():
            p.mul_(3.0)
    score = HeadRemovalScorer(model, test, "cpu")

    def fresh_predictions(removed):
        other = copy.deepcopy(model)
        for name in removed:
            remove_head(other, name)
        return other.generate(test.src)

    # In turn, make each removal's own predictions the targets: the scorer, with its restored
    # weights and cached encoder outputs, must then score exactly 1 on that removal only.
    for removed in ([], ["enc0.self.h1"], ["dec1.cross.h0", "enc1.self.h2"], [],
                    ["dec0.self.h3"], ["enc0.self.h1"]):
        score.tgt_out = fresh_predictions(removed)
        assert score(removed) == 1.0
        assert score(["enc0.self.h0", "dec1.cross.h1"]) < 1.0
    assert torch.equal(model.encoder_layers[0].self_attn.W_o.weight,
                       score.W_o["enc0.self"])  # the model given is never changed


def common(tmp_path, data):
    return ["--data_dir", str(data), "--results_dir", str(tmp_path / "results"),
            "--device", "cpu", "--threads", "1"]


def test_train_and_evaluate_end_to_end(tmp_path, capsys):
    data = write_tiny_data(tmp_path)
    args = common(tmp_path, data)
    results = tmp_path / "results"
    command = ["--digit_order", "reversed", "--train_size", "4000", "--steps", "3"] + args
    assert train.main(command) == 0
    log = json.loads((results / "training_log_reversed_n4000.json").read_text())
    assert log["run"] == "reversed_n4000"
    assert log["config"]["lr"] == 1e-3 and log["config"]["batch_size"] == 128
    assert [point["step"] for point in log["log"]] == [3]  # a shortened run validates at its end
    assert set(log["log"][0]) == {"step", "train_loss", "val_exact_match", "val_token_accuracy"}
    assert "steps_to_95" in log and log["steps_to_95"] is None
    assert (results / "model_reversed_n4000.pth").exists()

    # the same command gives the same log
    first = (results / "training_log_reversed_n4000.json").read_text()
    train.main(command)
    assert (results / "training_log_reversed_n4000.json").read_text() == first

    capsys.readouterr()
    assert evaluate.main(args) == 0  # the runs that exist are evaluated, the others named
    err = capsys.readouterr().err
    assert "python -m problem1.train --digit_order forward --train_size 4000" in err
    metrics = json.loads((results / "metrics.json").read_text())
    assert set(metrics) == {"reversed_n4000", "ablation", "pruning"}
    run = metrics["reversed_n4000"]
    assert set(run) == {"test_exact_match", "test_token_accuracy", "steps_to_95"}
    assert list(metrics["ablation"]["reversed_n4000"]) == HEAD_NAMES
    curve = metrics["pruning"]["reversed_n4000"]
    assert [len(point["removed"]) for point in curve] == list(range(25))
    assert sorted(curve[-1]["removed"]) == sorted(HEAD_NAMES)
    assert curve[0]["test_exact_match"] == run["test_exact_match"]
    assert set(json.loads((results / "breakdown.json").read_text())) == {"reversed_n4000"}
    maps = json.loads((results / "attention_maps.json").read_text())
    assert torch.tensor(maps["reversed_n4000"]["encoder"]).shape == (2, 4, 7, 7)
    assert torch.tensor(maps["reversed_n4000"]["decoder_cross"]).shape == (2, 4, 4, 7)

    import matplotlib

    matplotlib.use("Agg")
    from provided.plots.problem1 import make_figures

    figures = make_figures(results, tmp_path / "figures")
    assert {p.name for p in figures} == {
        "val_exact_match.png", "test_vs_train_size.png", "ablation.png", "pruning.png",
        "cross_attention_reversed_n4000.png", "encoder_attention_reversed_n4000.png"}


@pytest.mark.parametrize("argv, message", [
    (["--digit_order", "sideways", "--train_size", "1000"], "--digit_order"),
    (["--digit_order", "forward", "--train_size", "0"], "--train_size"),
    (["--digit_order", "forward", "--train_size", "99999"], "--train_size"),
])
def test_train_bad_input_gives_one_line(tmp_path, capsys, argv, message):
    data = write_tiny_data(tmp_path, n_train=8)
    with pytest.raises(SystemExit) as exc:
        train.main(argv + common(tmp_path, data))
    assert exc.value.code != 0
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err and "Traceback" not in err


def test_missing_data_and_models_give_one_line(tmp_path, capsys):
    args = common(tmp_path, tmp_path / "nowhere")
    with pytest.raises(SystemExit):
        train.main(["--digit_order", "forward", "--train_size", "1000"] + args)
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "generate_datasets.py" in err
    data = write_tiny_data(tmp_path, n_train=8)
    with pytest.raises(SystemExit):
        evaluate.main(common(tmp_path, data))
    err = capsys.readouterr().err.strip().splitlines()
    assert "no trained model" in err[-1] and "train" in err[-1]


def test_scripts_run_from_inside_problem1():
    for script in ("train.py", "evaluate.py"):
        result = subprocess.run([sys.executable, script, "--help"], cwd=REPO / "problem1",
                                capture_output=True, text=True, timeout=60)
        assert result.returncode == 0 and "--data_dir" in result.stdout
