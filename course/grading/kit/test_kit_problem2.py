"""Problem 2's provided code (not graded): the model, the given parts of evaluate.py (table
drift, attention windows), the figures, and the scripts' handling of bad input; and the
course's analyses around it (course/tools/problem2_analysis.py: per-position accuracy,
attention tallies, bag-of-tokens ceiling, score margins; its figure; rotary_window's
windowed forward). These run against the reference solution."""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from course.tools import problem2_analysis as analysis
from course.tools import problem2_figures
from course.tools.rotary_window import Windowed
from problem2 import evaluate, train
from problem2.dataset import IGNORE_INDEX, OffsetDataset
from problem2.model import POSITIONS, OffsetRetrievalModel
from problem2.positional import sinusoidal_table
from provided.common import DATA_DIR
from provided.plots.problem2 import make_figures
from tests.tiny import ReadsKeyAtDistance, offset_runs, script_args

pytestmark = pytest.mark.kit

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def problem2_runs(tmp_path_factory):
    """Tiny data (40 train sequences of 64: one step per epoch; 6 test sequences of 128),
    the four schemes trained for 3 steps, then evaluate.py and the course's analyses:
    (data_dir, results_dir)."""
    root = tmp_path_factory.mktemp("problem2")
    data, results = offset_runs(root, evaluate=True)
    assert analysis.main(script_args(root, data)) == 0
    return data, results


def read(path: Path):
    return json.loads(path.read_text())


def test_ignore_index_value():
    assert IGNORE_INDEX == -100


@pytest.mark.skipif(not (DATA_DIR / "offset" / "train.npy").exists(), reason="no data")
def test_offset_dataset_homework_example():
    # HOMEWORK.txt's table: the first training sequence and its targets from position 7.
    tokens, targets = OffsetDataset(DATA_DIR, "train")[0]
    assert tokens[:20].tolist() == [11, 15, 11, 11, 11, 14, 10, 14, 10, 12, 8, 9, 6, 3, 13, 13,
                                    4, 11, 2, 10]
    assert targets[7:20].tolist() == [11, 15, 11, 11, 11, 14, 10, 14, 10, 12, 8, 9, 6]


# --- the model ----------------------------------------------------------------------------


def test_bad_scheme_raises():
    with pytest.raises(ValueError):
        OffsetRetrievalModel("alibi")


@pytest.mark.parametrize("position", POSITIONS)
def test_model_is_causal(position):
    torch.manual_seed(0)
    model = OffsetRetrievalModel(position).eval()
    tokens = torch.randint(0, 16, (2, 40))
    changed = tokens.clone()
    changed[:, 20] = (changed[:, 20] + 1) % 16
    with torch.no_grad():
        before, after = model(tokens), model(changed)
    assert before.shape == (2, 40, 16)
    torch.testing.assert_close(before[:, :20], after[:, :20], atol=1e-6, rtol=0)
    assert not torch.allclose(before[:, 20:], after[:, 20:])


@pytest.mark.parametrize("position", POSITIONS)
def test_attention_weights_are_causal_softmax_rows(position):
    torch.manual_seed(1)
    model = OffsetRetrievalModel(position).eval()
    with torch.no_grad():
        logits, weights = model(torch.randint(0, 16, (3, 128)), return_attention=True)
    assert logits.shape == (3, 128, 16) and weights.shape == (3, 128, 128)
    torch.testing.assert_close(weights.sum(-1), torch.ones(3, 128))
    assert (weights.triu(1) == 0).all()


def test_max_len_and_learned_table_rows():
    model = OffsetRetrievalModel("learned")
    assert model.pos_emb.weight.shape == (128, 64)
    with pytest.raises(ValueError):
        model(torch.zeros(1, 129, dtype=torch.long))


@pytest.mark.parametrize("position", POSITIONS)
def test_model_parameters(position):
    names = {name for name, _ in OffsetRetrievalModel(position).named_parameters()}
    expected = {f"{layer}.{p}" for layer in ("W_q", "W_k", "W_v", "W_o", "head")
                for p in ("weight", "bias")} | {"tok_emb.weight"}
    if position == "learned":
        expected |= {"pos_emb.weight"}
    assert names == expected


@pytest.mark.parametrize("position", ["none", "learned", "sinusoidal"])
def test_residual_stream_is_unscaled_embedding_plus_position(position):
    # With W_o zeroed the attention adds nothing: logits = head(tok_emb + position term).
    torch.manual_seed(2)
    model = OffsetRetrievalModel(position).eval()
    torch.nn.init.zeros_(model.W_o.weight)
    torch.nn.init.zeros_(model.W_o.bias)
    tokens = torch.randint(0, 16, (2, 100))
    x = model.tok_emb.weight[tokens]
    if position == "learned":
        x = x + model.pos_emb.weight[:100]
    if position == "sinusoidal":
        x = x + sinusoidal_table(100, 64)
    with torch.no_grad():
        torch.testing.assert_close(model(tokens), model.head(x), atol=1e-5, rtol=1e-5)


def test_rotary_model_scores_are_relative():
    # All tokens equal: under rotary, the score of query i on key j depends on i - j only,
    # so log w[i, i-a] - log w[i, i-b] is the same for every query i, far beyond 64 too.
    torch.manual_seed(3)
    model = OffsetRetrievalModel("rotary").eval()
    with torch.no_grad():
        _, weights = model(torch.full((1, 128), 5), return_attention=True)
    log_w = weights[0].log()
    rows = torch.arange(10, 128)
    gap = log_w[rows, rows - 7] - log_w[rows, rows - 2]
    torch.testing.assert_close(gap, gap[:1].expand_as(gap), atol=1e-4, rtol=0)
    # ... while the sinusoidal model's gap moves with the absolute position.
    torch.manual_seed(3)
    model = OffsetRetrievalModel("sinusoidal").eval()
    with torch.no_grad():
        _, weights = model(torch.full((1, 128), 5), return_attention=True)
    log_w = weights[0].log()
    gap = log_w[rows, rows - 7] - log_w[rows, rows - 2]
    assert (gap - gap[0]).abs().max() > 1e-2


def test_scores_are_scaled_by_sqrt_d():
    # none, with W_q = W_k = identity and zero biases: score(i, j) = x_i . x_j / 8.
    torch.manual_seed(4)
    model = OffsetRetrievalModel("none").eval()
    for layer in (model.W_q, model.W_k):
        torch.nn.init.eye_(layer.weight)
        torch.nn.init.zeros_(layer.bias)
    tokens = torch.tensor([[1, 2]])
    with torch.no_grad():
        _, weights = model(tokens, return_attention=True)
    current, previous = model.tok_emb.weight[2], model.tok_emb.weight[1]
    s_self = (current @ current).item() / math.sqrt(64)
    s_prev = (current @ previous).item() / math.sqrt(64)
    expected = math.exp(s_prev) / (math.exp(s_prev) + math.exp(s_self))
    assert weights[0, 1, 0].item() == pytest.approx(expected, rel=1e-4)


def test_attention_tallies_with_stub_models():
    tokens = torch.tensor([[0] * 64 + [1] * 64, [1] * 128])
    targets = torch.full_like(tokens, IGNORE_INDEX)
    targets[:, 7:] = tokens[:, :-7]
    count = torch.tensor([0.0] * 7 + [2.0] * 121)
    for distance, expected in [(7, (1.0, 0.0, 0.0)), (8, (0.0, 56 / 57, 0.0)),
                               (70, (0.0, 0.0, 58 / 64))]:
        model = ReadsKeyAtDistance(distance)
        attention = analysis.attention_metrics(
            analysis.attention_tallies(model, tokens, targets, 7), count)
        got = (attention["on_target"]["in_range"], attention["on_neighbours"]["in_range"],
               attention["on_unseen_distances"]["beyond"])
        assert got == pytest.approx(expected)


def test_metrics_hold_the_homework_and_the_table_drift(problem2_runs):
    metrics = read(problem2_runs[1] / "metrics.json")
    assert list(metrics) == [*POSITIONS, "checks"]
    homework = ["in_range", "beyond", "beyond_buckets", "buckets"]
    for position in POSITIONS:
        assert list(metrics[position]) == homework + (["table_drift"] if position == "learned"
                                                      else [])
    drift = metrics["learned"]["table_drift"]
    assert drift["rows_64_127"]["max"] == 0.0  # positions 64.. never seen: no gradient
    assert drift["rows_0_63"]["min"] > 0 and drift["rows_0_63"]["rows_moved"] == 64


def test_analysis_json(problem2_runs):
    _, results = problem2_runs
    metrics, found = read(results / "metrics.json"), read(results / "analysis.json")
    assert list(found) == [*POSITIONS, "bag_of_tokens_ceiling"]
    for position in POSITIONS:
        entry = found[position]
        extra = {"learned": ["position_score_margin"],
                 "sinusoidal": ["position_score_margin", "long_sequences"],
                 "rotary": ["long_sequences"]}.get(position, [])
        assert list(entry) == ["per_position", "attention", *extra]
        per_position = entry["per_position"]
        assert len(per_position) == 128 and per_position[:7] == [None] * 7
        # the test sequences all have a target at 7..127: in_range is the mean over 7..63
        assert metrics[position]["in_range"] == pytest.approx(sum(per_position[7:64]) / 57)
        assert metrics[position]["beyond"] == pytest.approx(sum(per_position[64:]) / 64)
        assert set(entry["attention"]) == {"on_target", "on_neighbours", "on_unseen_distances"}
    for position in ("learned", "sinusoidal"):
        margin = found[position]["position_score_margin"]
        assert len(margin["per_position"]) == 128 and margin["per_position"][0] is None
    for position in ("sinusoidal", "rotary"):
        assert len(found[position]["long_sequences"]["buckets"]) == 8
    ceiling = found["bag_of_tokens_ceiling"]
    assert len(ceiling["buckets"]) == 8 and 1 / 16 < ceiling["beyond"] < ceiling["in_range"] < 1


def test_analysis_without_models_fails_cleanly(problem2_runs, tmp_path, capsys):
    data, _ = problem2_runs
    with pytest.raises(SystemExit):
        analysis.main(["--data_dir", str(data), "--results_dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert "train.py" in err and "Traceback" not in err
    with pytest.raises(SystemExit):
        problem2_figures.main(["--results_dir", str(tmp_path)])
    assert "course.tools.problem2_analysis" in capsys.readouterr().err


def test_train_missing_data_fails_cleanly(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        train.main(["--position", "none", "--data_dir", str(tmp_path),
                    "--results_dir", str(tmp_path / "r")])
    assert exit_info.value.code != 0
    assert "generate_datasets.py" in capsys.readouterr().err


def test_scripts_run_from_inside_problem2():
    env = {**os.environ, "PYTHONPATH": str(REPO)}  # this tree's code, not an installed copy
    for script in ("train.py", "evaluate.py"):
        done = subprocess.run([sys.executable, script, "--help"], cwd=REPO / "problem2",
                              capture_output=True, text=True, timeout=60, env=env)
        assert done.returncode == 0 and "usage" in done.stdout


def test_bag_of_tokens_ceiling_by_hand():
    # k = 1, tokens 0 0 1 1: at i = 1 the bag {0} -> 1; i = 2 {0, 0} -> 1; i = 3 {0, 0, 1} -> 2/3.
    ceiling = analysis.bag_of_tokens_ceiling(torch.tensor([[0, 0, 1, 1]]), k=1)
    assert math.isnan(ceiling[0])
    assert ceiling[1:].tolist() == pytest.approx([1.0, 1.0, 2 / 3])


def test_position_score_margins_by_hand():
    # sinusoidal, W_q = W_k = identity, no biases: S[i, j] = PE_i . PE_j / 8
    # = sum_m cos((i - j) omega_m) / 8, largest at j = i, so the margin at every query is
    # S at distance 7 minus S at distance 0 = (sum_m cos(7 omega_m) - 32) / 8.
    model = OffsetRetrievalModel("sinusoidal")
    for layer in (model.W_q, model.W_k):
        torch.nn.init.eye_(layer.weight)
        torch.nn.init.zeros_(layer.bias)
    margins = analysis.position_score_margins(model, 128, 7)
    expected = (sum(math.cos(7 * 10000 ** (-2 * m / 64)) for m in range(32)) - 32) / 8
    assert torch.isnan(margins[:7]).all()
    torch.testing.assert_close(margins[7:], torch.full((121,), expected), atol=1e-4, rtol=0)


def test_learned_table_drift_by_hand():
    initial = torch.zeros(128, 2)
    trained = initial.clone()
    trained[0] = torch.tensor([3.0, 4.0])
    trained[1] = torch.tensor([0.0, 1.0])
    drift = evaluate.learned_table_drift(trained, initial)
    assert drift["row_distance"][:3] == [5.0, 1.0, 0.0]
    assert drift["rows_0_63"]["max"] == 5.0 and drift["rows_0_63"]["rows_moved"] == 2
    assert drift["rows_64_127"]["max"] == 0.0 and drift["rows_64_127"]["rows_moved"] == 0


def test_attention_maps(problem2_runs):
    maps = read(problem2_runs[1] / "attention_maps.json")
    assert maps["k"] == 7 and len(maps["tokens"]) == 128
    for scheme in ("sinusoidal", "rotary"):
        assert set(maps[scheme]) == {"0-31", "96-127"}
        for window in maps[scheme].values():
            assert np.array(window).shape == (32, 32)
        # In 0-31 every query's keys lie inside the window: rows are whole softmax rows.
        np.testing.assert_allclose(np.array(maps[scheme]["0-31"]).sum(1), 1, atol=1e-3)
        diagonal = [maps[scheme]["0-31"][q][q - 7] for q in range(7, 32)]
        assert maps["on_target"][scheme]["0-31"]["mean"] == pytest.approx(np.mean(diagonal),
                                                                          abs=1e-4)
        assert maps["on_target"][scheme]["96-127"]["queries"] == 25


def test_evaluate_without_models_fails_cleanly(problem2_runs, tmp_path, capsys):
    data, _ = problem2_runs
    with pytest.raises(SystemExit):
        evaluate.main(["--data_dir", str(data), "--results_dir", str(tmp_path)])
    assert "train.py" in capsys.readouterr().err


def test_figures(problem2_runs, tmp_path):
    paths = make_figures(problem2_runs[1], tmp_path)
    assert {p.name for p in paths} == {"accuracy_by_bucket.png", "attention_maps.png",
                                       "learned_table_drift.png"}
    assert all(p.stat().st_size > 10_000 for p in paths)


def test_research_figure(problem2_runs, tmp_path):
    results = problem2_runs[1]
    assert problem2_figures.main(["--results_dir", str(results), "--out_dir", str(tmp_path)]) == 0
    assert (tmp_path / "accuracy_by_position.png").stat().st_size > 10_000


def test_windowed_rotary_hides_exactly_the_far_keys():
    """course/tools/rotary_window.py's forward: query i sees keys i - d + 1 .. i, and with
    every key in reach it is the model's own forward, bit for bit."""
    torch.manual_seed(0)
    model = OffsetRetrievalModel("rotary", max_len=12).eval()
    tokens = torch.randint(0, 16, (2, 12))
    with torch.no_grad():
        logits, full = model(tokens, return_attention=True)
        assert all(torch.equal(a, b) for a, b in zip(
            Windowed(model, 12)(tokens, return_attention=True), (logits, full)))
        _, windowed = Windowed(model, 3)(tokens, return_attention=True)
    i, j = torch.meshgrid(torch.arange(12), torch.arange(12), indexing="ij")
    assert torch.all(windowed[:, (i - j >= 3) | (j > i)] == 0)
    assert torch.all(windowed[:, (i - j < 3) & (j <= i)] > 0)
    torch.testing.assert_close(full[:, :3, :3], windowed[:, :3, :3])
    with pytest.raises(ValueError, match="rotary"):
        Windowed(OffsetRetrievalModel("sinusoidal"), 3)
