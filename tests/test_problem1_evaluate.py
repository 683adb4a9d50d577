"""Problem 1, Part E: head removal, single-head ablation, greedy pruning, mean attention
maps, and evaluate.py end to end on a tiny data folder (after a 3-step training run).

The Part E functions are tested on StandInAdder (tests/tiny_problem1.py), the provided stack
over stand-in layers whose attentions have MultiHeadAttention's W_o and d_k, on stand-in
splits and on hand-made scores, so that a mistake in Parts A-D costs no points here; so is
the end-to-end run, on a run this test writes itself (an untrained StandInAdder, no training
by Part D) and on stand-in splits (stand_in_scripts)."""

import copy
import dataclasses
import json

import pytest
import torch

from problem1.dataset import BOS
from problem1.heads import HEAD_NAMES, attention_module
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

pytestmark = pytest.mark.p1e

evaluate = submission("problem1.evaluate")
greedy_pruning, mean_attention_maps = evaluate.greedy_pruning, evaluate.mean_attention_maps
remove_head, single_head_ablation = evaluate.remove_head, evaluate.single_head_ablation
HeadRemovalScorer = submission("problem1.heads").HeadRemovalScorer  # given; runs remove_head
stand_ins = submission("tests.tiny_problem1")
ALL_HEADS = tuple(HEAD_NAMES)  # as given, before any test ran (a test may share the list)


def test_remove_head_changes_exactly_one_head():
    model, _ = adder_and_twin(0)
    model.eval()
    before = model.state_dict()
    assert remove_head(model, "dec1.cross.h2") is None, (
        "remove_head must change the model in place and return None")
    after = model.state_dict()
    changed = [k for k in before if not torch.equal(before[k], after[k])]
    assert changed == ["decoder_layers.1.cross_attn.W_o.weight"], (
        "remove_head('dec1.cross.h2') must change only decoder_layers.1.cross_attn.W_o.weight "
        f"(the head's input columns of W_o), but it changed {changed}: is another projection "
        "(W_v, W_q) zeroed instead, a bias changed too, or the name mapped to the wrong "
        "module?")
    weight = after["decoder_layers.1.cross_attn.W_o.weight"]
    old = before["decoder_layers.1.cross_attn.W_o.weight"]
    zero_columns = [h for h in range(4) if (weight[:, 32 * h:32 * (h + 1)] == 0).all()]
    zero_rows = (weight[64:96] == 0).all() and not (old[64:96] == 0).all()
    assert (weight[:, 64:96] == 0).all(), (
        "remove_head('dec1.cross.h2') must zero head 2's d_k input columns of W_o, 64:96 (the "
        "inputs it reads the head from): "
        + ("its rows 64:96 are zeroed instead (W_o.weight is [out, in]: a head is columns)"
           if zero_rows else f"head {zero_columns[0]}'s columns are zeroed instead"
           if zero_columns else "no head's columns are all zero"))
    assert torch.equal(weight[:, :64], old[:, :64]), (
        "remove_head must leave the other heads' columns of W_o unchanged: is the head's "
        "slice off by one, or the wrong head's columns zeroed?")
    assert torch.equal(weight[:, 96:], old[:, 96:]), (
        "remove_head must leave the other heads' columns of W_o unchanged: is the head's "
        "slice one column too wide?")


def test_remove_head_names_map_to_their_modules():
    model, _ = adder_and_twin(1)
    remove_head(model, "enc0.self.h0")
    remove_head(model, "dec0.self.h3")
    state = model.state_dict()
    assert (state["encoder_layers.0.self_attn.W_o.weight"][:, :32] == 0).all(), (
        "remove_head('enc0.self.h0') must zero columns 0:32 of encoder_layers.0.self_attn's "
        "W_o (head 0's input columns): is another projection or module changed instead?")
    assert (state["decoder_layers.0.self_attn.W_o.weight"][:, 96:] == 0).all(), (
        "remove_head('dec0.self.h3') must zero columns 96:128 of decoder_layers.0.self_attn's "
        "W_o (head 3's input columns): is another projection or module changed instead?")
    assert (state["decoder_layers.0.cross_attn.W_o.weight"] != 0).all(), (
        "remove_head('dec0.self.h3') must leave the cross-attention (dec0.cross) as it is")


# A score over sets of removed heads, worked out by hand. Alone, B costs least (0.05), then
# A (0.1), then C (0.5). After B is gone, removing A costs 0.75 but C only 0.35: an
# implementation that ranks heads once by their single costs removes A second; the greedy
# one, recomputing costs, removes C.
HAND_SCORES = {(): 1.0, ("A",): 0.9, ("B",): 0.95, ("C",): 0.5,
               ("A", "B"): 0.2, ("B", "C"): 0.6, ("A", "C"): 0.4, ("A", "B", "C"): 0.0}


def hand_score():
    """HAND_SCORES as a score next to the code under test."""
    return stand_ins.ScoreTable({frozenset(heads): value for heads, value in HAND_SCORES.items()})


def test_greedy_pruning_recomputes_costs():
    curve = greedy_pruning(hand_score(), heads=["A", "B", "C"])
    order = [point["removed"] for point in curve]
    why = {(): "the starting point (no head removed, score([])) is missing",
           ("B", "C"): "the curve stops with one head left: it goes on until every head is "
                       "removed (len(heads) + 1 points)",
           ("B", "A", "C"): "the heads are ranked once by their single cost, never "
                            "recomputed after a removal",
           ("C", "A", "B"): "the most useful head is removed first (the lowest score kept)"}
    shared = len(order) > 2 and all(point == order[-1] for point in order[1:])
    assert not shared, (
        f"greedy_pruning's points must each hold the heads removed so far, but got {order}: "
        "every point holds the same list object, changed after it was appended: append a "
        "copy, list(removed)")
    assert curve == [{"removed": [], "test_exact_match": 1.0},
                     {"removed": ["B"], "test_exact_match": 0.95},
                     {"removed": ["B", "C"], "test_exact_match": 0.6},
                     {"removed": ["B", "C", "A"], "test_exact_match": 0.0}], (
        "greedy_pruning must start at no head removed, then each time remove the head whose "
        f"removal keeps the highest score, recomputed after every removal: got {order}; "
        + why.get(() if not order or order[0] != [] else tuple(order[-1]),
                  "is the starting point missing, the most useful head removed, or the costs "
                  "ranked only once?"))


def test_greedy_pruning_breaks_ties_by_head_order():
    curve = greedy_pruning(stand_ins.ScoreTable({}, default=1.0), heads=["X", "Y", "Z"])
    order = [point["removed"] for point in curve]
    assert order == [[], ["X"], ["X", "Y"], ["X", "Y", "Z"]], (
        "greedy_pruning must break a tie (every head costs the same here) by the head listed "
        f"first: got {order}; does max or sorted pick the last of equal heads?")


def test_greedy_pruning_leaves_the_heads_it_is_given():
    """greedy_pruning(score) takes HEAD_NAMES by default: it prunes every head, in their
    order where all cost the same, and the module's list is whole afterwards (evaluate.py
    ablates and prunes two models with it, in one process)."""
    curve = greedy_pruning(stand_ins.ScoreTable({}, default=1.0))
    last = list(curve[-1]["removed"]) if curve else None
    assert last == list(ALL_HEADS), (
        "greedy_pruning(score) must prune every head of HEAD_NAMES (its default), in their "
        f"order where every head costs the same: its last point removed {last}")
    left = list(submission("problem1.heads").HEAD_NAMES)
    assert left == list(ALL_HEADS), (
        f"after greedy_pruning(score), HEAD_NAMES holds {len(left)} of its {len(ALL_HEADS)} "
        "heads: "
        "does it remove heads from the list it was given (copy it first, list(heads))?")


def test_single_head_ablation():
    found = single_head_ablation(hand_score(), heads=["A", "B", "C"])
    readings = {"the drop from score([]) is returned, not score([head]) itself":
                {"A": 1.0 - 0.9, "B": 1.0 - 0.95, "C": 1.0 - 0.5},
                "earlier heads are kept removed (cumulative)": {"A": 0.9, "B": 0.2, "C": 0.0}}
    why = next((why for why, values in readings.items() if isinstance(found, dict)
                and found.keys() == values.keys()
                and all(found[h] == pytest.approx(v) for h, v in values.items())),
               "it is neither the drop from score([]) nor a cumulative removal")
    assert found == {"A": 0.9, "B": 0.95, "C": 0.5}, (
        "single_head_ablation must score each head removed alone, score([head]), the others "
        f"all kept: got {found}: {why}")


def test_mean_attention_maps_shapes_and_means():
    items = random_items(6, seed=0)
    model, _ = adder_and_twin(0)
    model.eval()
    maps = mean_attention_maps(model, split(*items))
    shapes = ("mean_attention_maps must give one [layers, heads, T_q, T_k] map per kind: "
              "encoder [2, 4, 7, 7], decoder_self [2, 4, 4, 4], decoder_cross [2, 4, 4, 7]")
    assert (maps["encoder"].shape == (2, 4, 7, 7)
            and maps["decoder_cross"].shape == (2, 4, 4, 7)), shapes
    assert maps["decoder_self"].shape == (2, 4, 4, 4), shapes
    for name in ("encoder", "decoder_self", "decoder_cross"):  # means of softmax rows
        torch.testing.assert_close(
            maps[name].sum(-1), torch.ones(maps[name].shape[:-1]), msg=lambda m, name=name: (
                f"every row of the {name} map must sum to 1, as a mean of softmax rows does"
                f"\n{m}"))
    assert (maps["decoder_self"].triu(1) == 0).all(), (  # causal
        "the decoder_self map must be causal: zero above the diagonal")
    # the mean over six sums is the mean of the means over their two halves
    first = mean_attention_maps(model, split(*(t[:3] for t in items)))
    second = mean_attention_maps(model, split(*(t[3:] for t in items)))
    for name in ("encoder", "decoder_self", "decoder_cross"):
        torch.testing.assert_close(
            maps[name], (first[name] + second[name]) / 2, msg=lambda m, name=name: (
                f"the {name} map must be the mean over every example of the dataset: is it "
                f"one example's map (the first) or a mean over part of the dataset only?\n{m}"))


def test_head_removal_scorer_matches_greedy_decoding():
    src, _, _ = random_items(200, seed=1)
    model, twin = adder_and_twin(0)
    twin.eval()
    with torch.no_grad():  # a model whose outputs depend strongly on every head
        for p in twin.parameters():
            p.mul_(3.0)
    model.load_state_dict(twin.state_dict())
    model.eval()
    before = model.state_dict()

    def greedy(removed):  # the twin's greedy decoding without those heads, here
        other = copy.deepcopy(twin)
        with torch.no_grad():  # W_o's input columns, viewed [d_model, heads, d_k]
            for name in removed:
                *path, head = name.split(".")
                by_head = attention_module(other, ".".join(path)).W_o.weight.view(128, 4, 32)
                by_head[:, int(head.removeprefix("h"))] = 0.0
        return other.generate(src)

    # Targets that some head sets get partly right: even rows from the full model, odd rows
    # from the model without dec0.self.h3.
    targets = greedy([])
    targets[1::2] = greedy(["dec0.self.h3"])[1::2]
    bos = torch.full_like(targets[:, :1], BOS)
    score = HeadRemovalScorer(model, split(src, torch.cat([bos, targets[:, :-1]], dim=1),
                                           targets), "cpu", remove_head)
    # Sets in an order that makes the scorer restore weights and switch cached encoder
    # outputs; each score must be greedy decoding's exact match against the targets.
    sets = ([], ["enc0.self.h1"], ["dec1.cross.h0", "enc1.self.h2"], [], ["dec0.self.h3"],
            ["enc0.self.h1"], ["enc0.self.h0", "dec1.cross.h1"], ["dec0.self.h3"])
    scores = []
    for removed in sets:
        expected, _ = score_predictions(greedy(removed), targets)
        scores.append(score(removed))
        assert scores[-1] == expected, (  # HeadRemovalScorer is given code: remove_head is yours
            f"HeadRemovalScorer (given code) removes heads with your remove_head: without "
            f"{removed} it must score greedy decoding's exact match {expected:.3f}, not "
            f"{scores[-1]:.3f}: does remove_head zero exactly that head's d_k input columns "
            "of W_o (see test_remove_head_changes_exactly_one_head)?")
    assert 0.5 <= scores[0] < 1 and 0.5 <= scores[4] < 1  # the halves the targets took
    assert len(set(scores)) >= 4 and min(scores) < 0.5
    for name, tensor in model.state_dict().items():  # the model given is never changed
        assert torch.equal(tensor, before[name]), name


def write_run(results, digit_order: str = "reversed", train_size: int = 4000):
    """The files of a 3-step run as train.py writes them, written here: its log and the
    weights of an untrained StandInAdder (which the script under test loads as one)."""
    from problem1.config import Config  # given code
    from provided.results import save_run

    config = Config(digit_order=digit_order, train_size=train_size, steps=3)
    log = {"run": config.run, "config": dataclasses.asdict(config), "steps_to_95": None,
           "log": [{"step": 3, "train_loss": 2.4, "val_exact_match": 0.0,
                    "val_token_accuracy": 0.1}]}
    torch.manual_seed(0)
    save_run(results, config, log, StandInAdder())


def test_evaluate_end_to_end(tmp_path, monkeypatch):
    stand_in_scripts(monkeypatch)  # Parts A-C's dataset and model: stand-ins
    data = addition_data(tmp_path)
    args = script_args(tmp_path, data)
    results = tmp_path / "results"
    write_run(results)  # a run to evaluate, the others missing
    # the runs that exist are evaluated, the others skipped
    run_script("problem1/evaluate.py", evaluate.main, args,
               "the Part E functions, on stand-ins of the dataset and the model "
               "(tests/tiny_problem1.py)")
    metrics = json.loads((results / "metrics.json").read_text())
    assert set(metrics) == {"reversed_n4000", "ablation", "pruning"}
    run = metrics["reversed_n4000"]
    assert set(run) == {"test_exact_match", "test_token_accuracy", "steps_to_95"}
    assert list(metrics["ablation"]["reversed_n4000"]) == HEAD_NAMES
    curve = metrics["pruning"]["reversed_n4000"]
    assert [len(point["removed"]) for point in curve] == list(range(25))
    assert sorted(curve[-1]["removed"]) == sorted(HEAD_NAMES)
    assert curve[0]["test_exact_match"] == run["test_exact_match"]
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


def test_remove_head_uses_the_attentions_own_head_width():
    model, _ = adder_and_twin(2, d_model=16, d_ff=32)  # d_k = 16 / 4 = 4, not 32
    before = model.state_dict()["encoder_layers.1.self_attn.W_o.weight"]
    remove_head(model, "enc1.self.h1")
    after = model.state_dict()["encoder_layers.1.self_attn.W_o.weight"]
    expected = before.clone()
    expected[:, 4:8] = 0.0
    assert torch.equal(after, expected), (
        "remove_head must zero the head's d_k columns of W_o, d_k = d_model / num_heads of "
        "that attention (columns 4:8 for head 1 at d_model 16): is the head width hard-coded "
        "(32, the homework's d_k)?")


def test_mean_attention_maps_follow_greedy_decoding():
    src, tgt_in, tgt_out = random_items(8, seed=3)  # tgt_in: not what greedy decoding saw
    model, twin = adder_and_twin(3, d_model=32, d_ff=64)
    model.eval()
    twin.eval()
    maps = mean_attention_maps(model, split(src, tgt_in, tgt_out))
    with torch.no_grad():
        predicted = twin.generate(src)
        seen = torch.cat([torch.full_like(predicted[:, :1], BOS), predicted[:, :-1]], dim=1)
        greedy = twin(src, seen)[1]
        readings = {"it is the map under teacher forcing on the dataset's tgt_in":
                    twin(src, tgt_in)[1],
                    "it is the map of the decoder fed the predicted digits themselves, not BOS "
                    "and the first three": twin(src, predicted)[1]}
    for name in ("encoder", "decoder_self", "decoder_cross"):
        expected = torch.stack([w.mean(0) for w in greedy[name]])
        hint = next((why for why, attention in readings.items() if torch.allclose(
            maps[name], torch.stack([w.mean(0) for w in attention[name]]), atol=1e-5)),
            "it is neither the map under teacher forcing nor that of the unshifted "
            "predictions: is it averaged over the wrong dimension?")
        torch.testing.assert_close(maps[name], expected, msg=lambda m, name=name, hint=hint: (
            f"mean_attention_maps' {name} map must be the mean over the examples of the "
            "attention while the decoder reads its own greedy predictions (BOS + "
            f"model.generate's first three digits): {hint}\n{m}"))


def test_mean_attention_maps_run_the_model_in_eval_mode():
    """Handed a model in training mode, mean_attention_maps still gives the maps with
    dropout off (the docstring: eval mode), as greedy decoding does."""
    src, tgt_in, tgt_out = random_items(8, seed=4)
    model, twin = adder_and_twin(4, d_model=32, d_ff=64, dropout=0.5)
    model.train()
    twin.eval()
    maps = mean_attention_maps(model, split(src, tgt_in, tgt_out))
    with torch.no_grad():
        predicted = twin.generate(src)
        seen = torch.cat([torch.full_like(predicted[:, :1], BOS), predicted[:, :-1]], dim=1)
        expected = torch.stack([w.mean(0) for w in twin(src, seen)[1]["decoder_cross"]])
    torch.testing.assert_close(maps["decoder_cross"], expected, msg=lambda m: (
        "mean_attention_maps must put the model in eval mode (model.eval()) before it "
        f"decodes: with the model left in training mode, dropout changes the maps\n{m}"))
