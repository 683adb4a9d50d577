"""Hidden tests, Problem 1 Part E: every head name zeroes its own columns and nothing else,
greedy pruning on other hand-made scores (recomputed costs, ties in the middle), the calls
single_head_ablation makes, and the mean attention maps against per-example averages."""


import pytest
import torch

from problem1.dataset import BOS
from problem1.heads import HEAD_NAMES
from tests.seam import submission
from tests.tiny_problem1 import TorchAttention, adder_and_twin, reversed_sums, split

pytestmark = pytest.mark.p1e

evaluate = submission("problem1.evaluate")
greedy_pruning, mean_attention_maps = evaluate.greedy_pruning, evaluate.mean_attention_maps
remove_head, single_head_ablation = evaluate.remove_head, evaluate.single_head_ablation
stand_ins = submission("tests.tiny_problem1")




def table(scores):
    """{"WX": score, ...} (one letter per head) as a score next to the code under test."""
    return stand_ins.ScoreTable({frozenset(heads): value for heads, value in scores.items()})


def module_of(name):
    """'dec1.cross.h2' -> ('decoder_layers.1.cross_attn', 2), spelled out."""
    stack, kind, head = name.split(".")
    layers = {"enc": "encoder_layers", "dec": "decoder_layers"}[stack[:3]]
    module = "self_attn" if kind == "self" else "cross_attn"
    return f"{layers}.{stack[3]}.{module}", int(head[1])


def test_every_head_name_zeroes_its_own_columns_only():
    base, twin = adder_and_twin(0)
    copy_model = submission("copy").deepcopy
    for name in HEAD_NAMES:
        model = copy_model(base)
        remove_head(model, name)
        module, h = module_of(name)
        target = f"{module}.W_o.weight"
        for (pname, p), q in zip(model.state_dict().items(), twin.state_dict().values()):
            if pname == target:
                assert (p[:, 32 * h:32 * (h + 1)] == 0).all(), name
                keep = torch.ones(128, dtype=torch.bool)
                keep[32 * h:32 * (h + 1)] = False
                assert torch.equal(p[:, keep], q[:, keep]), name
            else:
                assert torch.equal(p, q), (name, pname)


def test_removing_twice_and_removing_all_heads_of_one_attention():
    model, _ = adder_and_twin(1)
    for h in range(4):
        remove_head(model, f"enc1.self.h{h}")
    remove_head(model, "enc1.self.h2")  # already removed: nothing changes
    state = model.state_dict()
    assert (state["encoder_layers.1.self_attn.W_o.weight"] == 0).all()
    assert (state["encoder_layers.0.self_attn.W_o.weight"] != 0).all()


# All 16 subsets of four heads; single costs rank W, X, Y, Z, but once W is gone Y is the
# cheapest, then X: the greedy order is W, Y, X, Z, the rank-once order W, X, Y, Z.
SCORES = {"": 1.0, "W": 0.9, "X": 0.8, "Y": 0.7, "Z": 0.6, "WX": 0.4, "WY": 0.6, "WZ": 0.5,
          "XY": 0.5, "XZ": 0.4, "YZ": 0.3, "WXY": 0.2, "WYZ": 0.1, "WXZ": 0.0, "XYZ": 0.0,
          "WXYZ": 0.0}


def test_greedy_pruning_recomputes_costs_after_every_removal():
    curve = greedy_pruning(table(SCORES), heads=["W", "X", "Y", "Z"])
    assert [point["removed"] for point in curve] == [
        [], ["W"], ["W", "Y"], ["W", "Y", "X"], ["W", "Y", "X", "Z"]]
    assert [float(point["test_exact_match"]) for point in curve] == [1.0, 0.9, 0.6, 0.2, 0.0]


def test_greedy_pruning_ties_in_the_middle_go_to_the_head_listed_first():
    scores = {"": 1.0, "A": 0.5, "B": 0.9, "C": 0.9, "AB": 0.3, "BC": 0.3, "AC": 0.1,
              "ABC": 0.0}
    curve = greedy_pruning(table(scores), heads=["B", "A", "C"])
    assert [point["removed"] for point in curve] == [[], ["B"], ["B", "A"], ["B", "A", "C"]]
    # heads listed in another order: the tie at the first step now goes to C
    curve = greedy_pruning(table(scores), heads=["C", "A", "B"])
    assert [point["removed"] for point in curve][1:3] == [["C"], ["C", "B"]]


def test_single_head_ablation_scores_each_head_alone_in_order():
    score = stand_ins.CountingScore(0.1)  # 0.1, 0.2, ... in the order of the calls
    result = single_head_ablation(score, heads=["h3", "h1", "h2"])
    calls = score.calls
    assert list(result) == ["h3", "h1", "h2"]
    assert sorted(calls) == [["h1"], ["h2"], ["h3"]]
    assert {head: float(value) for head, value in result.items()} == pytest.approx(
        {head: 0.1 * (calls.index([head]) + 1) for head in ["h1", "h2", "h3"]})


def test_mean_attention_maps_are_averages_of_single_examples():
    items = reversed_sums(5, seed=6)
    model, twin = adder_and_twin(7)
    model.eval()
    twin.eval()
    maps = mean_attention_maps(model, split(*items))
    assert set(maps) >= {"encoder", "decoder_self", "decoder_cross"}
    expected = {name: torch.zeros(shape) for name, shape in [
        ("encoder", (2, 4, 7, 7)), ("decoder_self", (2, 4, 4, 4)), ("decoder_cross", (2, 4, 4, 7))]}
    with torch.no_grad():
        for i in range(len(items[0])):  # one example at a time, its own greedy digits fed back
            src = items[0][i:i + 1]
            tokens = torch.tensor([[BOS]])
            for _ in range(3):
                logits, _ = twin(src, tokens)
                tokens = torch.cat([tokens, logits[:, -1, :10].argmax(-1, keepdim=True)], 1)
            _, attention = twin(src, tokens)
            for name in expected:
                expected[name] += torch.stack([w[0] for w in attention[name]]) / len(items[0])
    for name, value in expected.items():
        assert maps[name].shape == value.shape, (  # (the seam brings every tensor to the cpu)
            f"the {name} map must be a [layers, heads, T_q, T_k] tensor")
        torch.testing.assert_close(
            maps[name].float(), value, atol=1e-5, rtol=1e-4, msg=lambda m, name=name: (
                f"the {name} map must be the mean over the examples of the attention paid "
                "while the model decoded its own greedy digits: is it taken with teacher "
                f"forcing on tgt_in, or from one example only?\n{m}"))
    assert (maps["decoder_self"].triu(1) == 0).all(), (
        "the decoder_self map must be causal: zero above the diagonal")


def test_removing_a_head_removes_exactly_its_term_from_the_output():
    model, twin = adder_and_twin(0)
    model.eval()
    module = TorchAttention(128, 4)  # the attention's twin, here
    prefix = "decoder_layers.1.cross_attn."
    module.load_state_dict({name[len(prefix):]: value for name, value in
                            twin.state_dict().items() if name.startswith(prefix)})
    weight_before = module.W_o.weight.detach().clone()
    torch.manual_seed(1)
    x, memory = torch.randn(2, 4, 128), torch.randn(2, 7, 128)
    with torch.no_grad():
        q, k, v = (module.W_q(x), module.W_k(memory), module.W_v(memory))
        out_before, _ = module(x, memory, memory)
    remove_head(model, "dec1.cross.h2")
    module.load_state_dict({name[len(prefix):]: value for name, value in
                            model.state_dict().items() if name.startswith(prefix)})
    # the output loses exactly head 2's term W_o[:, 64:96] @ head_2_output
    cols = slice(64, 96)
    scores = q[..., cols] @ k[..., cols].transpose(1, 2) / 32 ** 0.5
    head = scores.softmax(-1) @ v[..., cols]  # [2, 4, 32]
    with torch.no_grad():
        out_after, _ = module(x, memory, memory)
    expected = out_before - head @ weight_before[:, cols].T
    torch.testing.assert_close(out_after, expected, atol=1e-5, rtol=1e-5, msg=lambda m: (
        "removing head 2 must remove exactly its term head_2 W_o[:, 64:96]^T from the output "
        "and change nothing else: are the output projection's columns of another head zeroed "
        f"(rows instead of columns), or the bias removed too?\n{m}"))


def test_mean_attention_maps_use_greedy_predictions():
    src, tgt_in, tgt_out = reversed_sums(24, seed=8)
    model, twin = adder_and_twin(0)
    model.eval()
    twin.eval()
    maps = mean_attention_maps(model, split(src, tgt_in, tgt_out))
    with torch.no_grad():
        predicted = twin.generate(src)
        tgt_in = torch.cat([torch.full((len(src), 1), BOS), predicted[:, :3]], dim=1)
        _, attention = twin(src, tgt_in)
    for name, layer in (("decoder_cross", 1), ("decoder_self", 0), ("encoder", 0)):
        torch.testing.assert_close(
            maps[name][layer], attention[name][layer].mean(0), msg=lambda m, name=name: (
                f"the {name} map must be the attention the model paid while reading its own "
                "greedy digits (tgt_in = BOS then the predictions), averaged over examples: is "
                f"it taken on the true tgt_in (teacher forcing)?\n{m}"))
