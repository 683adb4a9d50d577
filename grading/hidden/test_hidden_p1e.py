"""Hidden tests, Problem 1 Part E: every head name zeroes its own columns and nothing else,
greedy pruning on other hand-made scores (recomputed costs, ties in the middle), the calls
single_head_ablation makes, and the mean attention maps against per-example averages."""

import copy
import random

import pytest
import torch

from problem1.dataset import BOS, AdditionDataset
from problem1.evaluate import (
    HEAD_NAMES,
    greedy_pruning,
    mean_attention_maps,
    remove_head,
    single_head_ablation,
)
from problem1.model import AdditionTransformer

pytestmark = pytest.mark.p1e


def module_of(model, name):
    """'dec1.cross.h2' -> (model.decoder_layers[1].cross_attn, 2), spelled out."""
    stack, kind, head = name.split(".")
    layers = {"enc": model.encoder_layers, "dec": model.decoder_layers}[stack[:3]]
    layer = layers[int(stack[3])]
    module = layer.self_attn if kind == "self" else layer.cross_attn
    return module, int(head[1])


def test_every_head_name_zeroes_its_own_columns_only():
    torch.manual_seed(0)
    base = AdditionTransformer()
    for name in HEAD_NAMES:
        model = copy.deepcopy(base)
        remove_head(model, name)
        module, h = module_of(model, name)
        target = module.W_o.weight
        for (pname, p), q in zip(model.named_parameters(), base.parameters()):
            if p is target:
                assert (p[:, 32 * h:32 * (h + 1)] == 0).all(), name
                keep = torch.ones(128, dtype=torch.bool)
                keep[32 * h:32 * (h + 1)] = False
                assert torch.equal(p[:, keep], q[:, keep]), name
            else:
                assert torch.equal(p, q), (name, pname)


def test_removing_twice_and_removing_all_heads_of_one_attention():
    torch.manual_seed(1)
    model = AdditionTransformer()
    for h in range(4):
        remove_head(model, f"enc1.self.h{h}")
    remove_head(model, "enc1.self.h2")  # already removed: nothing changes
    assert (model.encoder_layers[1].self_attn.W_o.weight == 0).all()
    assert (model.encoder_layers[0].self_attn.W_o.weight != 0).all()


# All 16 subsets of four heads; single costs rank W, X, Y, Z, but once W is gone Y is the
# cheapest, then X: the greedy order is W, Y, X, Z, the rank-once order W, X, Y, Z.
SCORES = {"": 1.0, "W": 0.9, "X": 0.8, "Y": 0.7, "Z": 0.6, "WX": 0.4, "WY": 0.6, "WZ": 0.5,
          "XY": 0.5, "XZ": 0.4, "YZ": 0.3, "WXY": 0.2, "WYZ": 0.1, "WXZ": 0.0, "XYZ": 0.0,
          "WXYZ": 0.0}


def four_head_score(removed):
    return SCORES["".join(sorted(removed))]


def test_greedy_pruning_recomputes_costs_after_every_removal():
    curve = greedy_pruning(four_head_score, heads=["W", "X", "Y", "Z"])
    assert [point["removed"] for point in curve] == [
        [], ["W"], ["W", "Y"], ["W", "Y", "X"], ["W", "Y", "X", "Z"]]
    assert [float(point["test_exact_match"]) for point in curve] == [1.0, 0.9, 0.6, 0.2, 0.0]


def test_greedy_pruning_ties_in_the_middle_go_to_the_head_listed_first():
    scores = {"": 1.0, "A": 0.5, "B": 0.9, "C": 0.9, "AB": 0.3, "BC": 0.3, "AC": 0.1,
              "ABC": 0.0}
    curve = greedy_pruning(lambda removed: scores["".join(sorted(removed))],
                           heads=["B", "A", "C"])
    assert [point["removed"] for point in curve] == [[], ["B"], ["B", "A"], ["B", "A", "C"]]
    # heads listed in another order: the tie at the first step now goes to C
    curve = greedy_pruning(lambda removed: scores["".join(sorted(removed))],
                           heads=["C", "A", "B"])
    assert [point["removed"] for point in curve][1:3] == [["C"], ["C", "B"]]


def test_single_head_ablation_scores_each_head_alone_in_order():
    calls = []

    def score(removed):
        calls.append(list(removed))
        return 0.1 * len(calls)

    result = single_head_ablation(score, heads=["h3", "h1", "h2"])
    assert list(result) == ["h3", "h1", "h2"]
    assert sorted(calls) == [["h1"], ["h2"], ["h3"]]
    assert {head: float(value) for head, value in result.items()} == pytest.approx(
        {head: 0.1 * (calls.index([head]) + 1) for head in ["h1", "h2", "h3"]})


def test_mean_attention_maps_are_averages_of_single_examples(tmp_path):
    folder = tmp_path / "addition"
    folder.mkdir()
    rng = random.Random(6)
    (folder / "test.csv").write_text("a,b\n" + "".join(
        f"{rng.randint(0, 999)},{rng.randint(0, 999)}\n" for _ in range(5)))
    dataset = AdditionDataset(tmp_path, "test", "reversed")
    torch.manual_seed(7)
    model = AdditionTransformer().eval()
    maps = mean_attention_maps(model, dataset)
    assert set(maps) >= {"encoder", "decoder_self", "decoder_cross"}
    expected = {name: torch.zeros(shape) for name, shape in [
        ("encoder", (2, 4, 7, 7)), ("decoder_self", (2, 4, 4, 4)), ("decoder_cross", (2, 4, 4, 7))]}
    with torch.no_grad():
        for i in range(len(dataset)):  # one example at a time, its own greedy digits fed back
            src = dataset.src[i:i + 1]
            tokens = torch.tensor([[BOS]])
            for _ in range(3):
                logits, _ = model(src, tokens)
                tokens = torch.cat([tokens, logits[:, -1, :10].argmax(-1, keepdim=True)], 1)
            _, attention = model(src, tokens)
            for name in expected:
                expected[name] += torch.stack([w[0] for w in attention[name]]) / len(dataset)
    for name, value in expected.items():
        assert maps[name].shape == value.shape and maps[name].device.type == "cpu", (
            f"the {name} map must be a [layers, heads, T_q, T_k] tensor on the cpu")
        torch.testing.assert_close(
            maps[name].float(), value, atol=1e-5, rtol=1e-4, msg=lambda m, name=name: (
                f"the {name} map must be the mean over the examples of the attention paid "
                "while the model decoded its own greedy digits: is it taken with teacher "
                f"forcing on tgt_in, or from one example only?\n{m}"))
    assert (maps["decoder_self"].triu(1) == 0).all(), (
        "the decoder_self map must be causal: zero above the diagonal")


def test_removing_a_head_removes_exactly_its_term_from_the_output():
    torch.manual_seed(0)
    model = AdditionTransformer().eval()
    module = model.decoder_layers[1].cross_attn
    weight_before = module.W_o.weight.detach().clone()
    x, memory = torch.randn(2, 4, 128), torch.randn(2, 7, 128)
    with torch.no_grad():
        q, k, v = (module.W_q(x), module.W_k(memory), module.W_v(memory))
        out_before, _ = module(x, memory, memory)
    remove_head(model, "dec1.cross.h2")
    # the output loses exactly head 2's term W_o[:, 64:96] @ head_2_output
    cols = slice(64, 96)
    scores = q[..., cols] @ k[..., cols].transpose(1, 2) / 32 ** 0.5
    head = scores.softmax(-1) @ v[..., cols]  # [2, 4, 32]
    with torch.no_grad():
        out_after, _ = module(x, memory, memory)
    expected = out_before - head @ weight_before[:, cols].T
    torch.testing.assert_close(out_after, expected, atol=1e-5, rtol=1e-5)


def test_mean_attention_maps_use_greedy_predictions(tmp_path):
    folder = tmp_path / "addition"
    folder.mkdir()
    rng = random.Random(8)
    (folder / "test.csv").write_text("a,b\n" + "".join(
        f"{rng.randint(0, 999)},{rng.randint(0, 999)}\n" for _ in range(24)))
    torch.manual_seed(0)
    model = AdditionTransformer().eval()
    test = AdditionDataset(tmp_path, "test", "forward")
    maps = mean_attention_maps(model, test)
    predicted = model.generate(test.src)
    tgt_in = torch.cat([torch.full((len(test), 1), BOS), predicted[:, :3]], dim=1)
    _, attention = model(test.src, tgt_in)
    torch.testing.assert_close(maps["decoder_cross"][1], attention["decoder_cross"][1].mean(0))
    torch.testing.assert_close(maps["decoder_self"][0], attention["decoder_self"][0].mean(0))
    torch.testing.assert_close(maps["encoder"][0], attention["encoder"][0].mean(0))
