"""Problem 1's provided code (not graded): constants, batches, scoring, head names, greedy
generate, the embedding, the position table, and the scripts' handling of bad input; and the
course's Problem 1 commands: the error breakdown and the extra seeds' metrics. These run
against the reference solution."""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from course.tools import problem1_breakdown, problem1_seed_metrics
from course.tools.problem1_breakdown import breakdown, carries, column_carries
from problem1 import evaluate, train
from problem1.dataset import BOS, PLUS
from problem1.heads import HEAD_NAMES, greedy_reproduces
from problem1.model import AdditionTransformer, position_table, score_predictions
from problem1.train import shuffled_batches
from provided.plots.style import half_up
from tests.tiny import addition_data, script_args

pytestmark = pytest.mark.kit

REPO = Path(__file__).resolve().parents[3]


def test_constants():
    assert (PLUS, BOS) == (10, 11)


def test_figure_labels_round_as_the_tables():
    """ablation.png's labels round half up from the JSON's decimal text, as the reports'
    tables do (course/tools/tables/style.py's fmt): '%.3f' gave 0.877 and 0.901."""
    from course.tools.tables.style import fmt

    for value in (0.8775, 0.9015, 0.0005, 0.12345, 1.0, 0.0):
        assert half_up(value, 3) == fmt(value, 3), value
    assert (half_up(0.8775, 3), half_up(0.9015, 3)) == ("0.878", "0.902")


def test_score_predictions():
    target = torch.tensor([[1, 3, 5, 9], [0, 6, 0, 9]])
    predicted = torch.tensor([[1, 3, 5, 9], [0, 6, 1, 9]])
    assert score_predictions(predicted, target) == (0.5, 7 / 8)


def test_batches_are_shuffled_passes():
    batches = shuffled_batches(6, 4, torch.Generator().manual_seed(0))
    stream = torch.cat([next(batches) for _ in range(3)])  # 12 indices: two full passes
    assert sorted(stream[:6].tolist()) == list(range(6))
    assert sorted(stream[6:].tolist()) == list(range(6))


def test_head_names():
    assert len(HEAD_NAMES) == 24 and len(set(HEAD_NAMES)) == 24
    assert HEAD_NAMES[:5] == ["enc0.self.h0", "enc0.self.h1", "enc0.self.h2", "enc0.self.h3",
                              "enc1.self.h0"]
    assert HEAD_NAMES[12] == "dec0.cross.h0" and HEAD_NAMES[-1] == "dec1.cross.h3"


def test_greedy_reproduces_is_greedy_decodings_exact_match():
    torch.manual_seed(1)
    model = AdditionTransformer().eval()
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(3.0)
    src = torch.randint(0, 10, (64, 7))
    src[:, 3] = PLUS
    with torch.no_grad():
        memory, _ = model.encode(src)
        decoded = model.generate(src)
    wrong = decoded.clone()
    wrong[::3, 2] = (wrong[::3, 2] + 1) % 10  # every third row: its third digit is not greedy's
    wrong[1::3, 0] = (wrong[1::3, 0] + 1) % 10  # and for others the first digit
    for targets in (decoded, wrong):
        tgt_in = torch.cat([torch.full_like(targets[:, :1], BOS), targets[:, :-1]], dim=1)
        with torch.no_grad():
            right = greedy_reproduces(model, memory, tgt_in, targets)
        assert torch.equal(right, (decoded == targets).all(dim=1))
    assert right.sum() == 64 - 22 - 21


def test_carries_and_breakdown():
    src = torch.tensor([[3, 9, 1, PLUS, 9, 6, 8],    # 391 + 968: 9+6 and 3+9+1 carry
                        [0, 1, 2, PLUS, 5, 9, 7],    # 12 + 597: only 1+9 carries
                        [9, 9, 9, PLUS, 0, 0, 1],    # 999 + 1: three carries
                        [1, 2, 3, PLUS, 4, 5, 6]])   # no carry
    assert carries(src).tolist() == [2, 1, 3, 0]
    # c0 (ones), c1 (tens), c2 (hundreds): 391 + 968 carries out of the tens and hundreds
    assert column_carries(src).tolist() == [[0, 1, 1], [0, 1, 0], [1, 1, 1], [0, 0, 0]]

    class Split:  # the two attributes breakdown reads
        tgt_out = torch.tensor([[9, 5, 3, 1], [9, 0, 6, 0], [0, 0, 0, 1], [9, 7, 5, 0]])

    Split.src = src
    predicted = Split.tgt_out.clone()
    predicted[0, 3] = 0  # wrong thousands digit of 391 + 968
    result = breakdown(predicted, Split, "reversed")
    assert result["place_accuracy"] == {"s0": 1.0, "s1": 1.0, "s2": 1.0, "s3": 0.75}
    assert result["exact_match_by_carries"] == {"0": 1.0, "1": 1.0, "2": 0.0, "3": 1.0}
    Split.tgt_out = Split.tgt_out.flip(1)  # the same errors read in forward order: column 0 is s3
    assert breakdown(predicted.flip(1), Split, "forward")["place_accuracy"]["s3"] == 0.75


def test_course_commands_write_breakdown_and_seed_metrics(tmp_path):
    """problem1_breakdown and problem1_seed_metrics on a folder with one run: the same test
    metrics as evaluate.py's, no head analysis, and a breakdown that evaluate.py leaves out."""
    data = addition_data(tmp_path)
    args = script_args(tmp_path, data)
    results = tmp_path / "results"
    assert train.main(["--digit_order", "forward", "--train_size", "4000", "--steps", "3",
                       *args]) == 0
    assert evaluate.main(args) == 0
    analysed = json.loads((results / "metrics.json").read_text())
    assert not (results / "breakdown.json").exists()
    assert problem1_seed_metrics.main(args) == 0
    assert json.loads((results / "metrics.json").read_text()) == {
        "forward_n4000": analysed["forward_n4000"], "ablation": {}, "pruning": {}}
    assert problem1_breakdown.main(args) == 0
    errors = json.loads((results / "breakdown.json").read_text())["forward_n4000"]
    assert list(errors) == ["place_accuracy", "exact_match_by_carries", "pairs_by_carries"]
    assert sum(errors["pairs_by_carries"].values()) == 24  # addition_data's test pairs


def test_seed_metrics_refuse_seed_0s_folder(capsys):
    with pytest.raises(SystemExit):
        problem1_seed_metrics.main(["--device", "cpu"])
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "seed 0" in err and "--results_dir" in err


def reference_greedy(model, src, steps=4):
    """Greedy decoding the slow way: the whole prefix through the teacher-forced path."""
    tokens = torch.full((src.size(0), 1), BOS)
    for _ in range(steps):
        logits, _ = model(src, tokens)
        tokens = torch.cat([tokens, logits[:, -1, :10].argmax(-1, keepdim=True)], dim=1)
    return tokens[:, 1:]


@pytest.mark.parametrize("seed", [0, 1])
def test_generate_matches_teacher_forced_greedy(seed):
    torch.manual_seed(seed)
    model = AdditionTransformer().eval()
    src = torch.randint(0, 10, (64, 7))
    src[:, 3] = PLUS
    predicted = model.generate(src)
    assert predicted.shape == (64, 4) and predicted.dtype == torch.long
    assert torch.equal(predicted, reference_greedy(model, src))
    assert predicted.unique().numel() > 1  # a random model's predictions vary


def test_generate_only_emits_digits():
    torch.manual_seed(0)
    model = AdditionTransformer().eval()
    with torch.no_grad():
        model.output.bias[PLUS] = 100.0  # PLUS and BOS would win an argmax over the vocabulary
        model.output.bias[BOS] = 100.0
    src = torch.tensor([[3, 9, 1, PLUS, 9, 6, 8]])
    assert model.generate(src).max().item() <= 9


def test_embedding_init_is_scaled():
    torch.manual_seed(0)
    model = AdditionTransformer()
    std = model.embedding.weight.std().item()
    assert abs(std - 128 ** -0.5) < 0.01  # not PyTorch's default N(0, 1)


def test_position_table_holds_the_sinusoidal_formula():
    table = position_table(16, 128)
    assert table.shape == (16, 128) and table.dtype == torch.float32
    expected = torch.tensor([[math.sin(p * 10000 ** (-2 * (j // 2) / 128)) if j % 2 == 0 else
                              math.cos(p * 10000 ** (-2 * (j // 2) / 128)) for j in range(128)]
                             for p in range(16)])
    torch.testing.assert_close(table, expected, atol=1e-6, rtol=0)


@pytest.mark.parametrize("d_model, max_len", [(64, 16), (96, 16), (128, 40), (32, 300)])
def test_the_stack_runs_at_any_size_without_the_sinusoidal_formula(d_model, max_len):
    """Other sizes get a fixed random table of the sinusoidal rows' scale: the same every
    time, and not the formula (which Problem 2 asks students to write)."""
    table = position_table(max_len, d_model)
    assert table.shape == (max_len, d_model) and torch.equal(table,
                                                             position_table(max_len, d_model))
    assert 0.3 < table.var().item() < 0.7
    torch.manual_seed(0)
    model = AdditionTransformer(d_model=d_model, num_heads=4, d_ff=64, max_len=max_len)
    src = torch.randint(0, 10, (3, 7))
    logits, _ = model(src, torch.randint(0, 10, (3, 4)))
    assert logits.shape == (3, 4, 12) and torch.isfinite(logits).all()
    assert model.generate(src).shape == (3, 4)


@pytest.mark.parametrize("argv, message", [
    (["--digit_order", "sideways", "--train_size", "1000"], "--digit_order"),
    (["--digit_order", "forward", "--train_size", "0"], "--train_size"),
    (["--digit_order", "forward", "--train_size", "99999"], "--train_size"),
])
def test_train_bad_input_gives_one_line(tmp_path, capsys, argv, message):
    data = addition_data(tmp_path, n_train=8)
    with pytest.raises(SystemExit) as exc:
        train.main(argv + script_args(tmp_path, data))
    assert exc.value.code != 0
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err and "Traceback" not in err


def test_missing_data_and_models_give_one_line(tmp_path, capsys):
    args = script_args(tmp_path, tmp_path / "nowhere")
    with pytest.raises(SystemExit):
        train.main(["--digit_order", "forward", "--train_size", "1000"] + args)
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "generate_datasets.py" in err
    data = addition_data(tmp_path, n_train=8)
    with pytest.raises(SystemExit):
        evaluate.main(script_args(tmp_path, data))
    err = capsys.readouterr().err.strip().splitlines()
    assert "no trained model" in err[-1] and "train" in err[-1]


def test_scripts_run_from_inside_problem1():
    env = {**os.environ, "PYTHONPATH": str(REPO)}  # this tree's code, not an installed copy
    for script in ("train.py", "evaluate.py"):
        result = subprocess.run([sys.executable, script, "--help"], cwd=REPO / "problem1",
                                capture_output=True, text=True, timeout=60, env=env)
        assert result.returncode == 0 and "--data_dir" in result.stdout


def test_carry_probe_reads_what_is_linear_and_only_that():
    from course.tools.carry_probe import probe_accuracy
    g = torch.Generator().manual_seed(0)
    x = torch.randn(600, 5, generator=g)
    separable = (x[:, 2] - 0.5 * x[:, 4] > 0.1).long()
    assert probe_accuracy(x[:400], separable[:400], x[400:], separable[400:]) > 0.95
    noise = torch.randint(0, 2, (600,), generator=g)
    assert 0.35 < probe_accuracy(x[:400], noise[:400], x[400:], noise[400:]) < 0.65


def test_carry_patching_donors_differ_in_what_they_should_only():
    from course.tools.carry_probe import donors
    g = torch.Generator().manual_seed(1)
    pool = torch.randint(0, 10, (3000, 7), generator=g)
    pool[:, 3] = PLUS
    src = pool[:40]
    c1, pool_c1 = column_carries(src)[:, 1], column_carries(pool)[:, 1]
    other_a2 = donors(src, pool, other_a2=True)
    assert (pool[other_a2, 4] == src[:, 4]).all() and (pool[other_a2, 0] != src[:, 0]).all()
    assert (pool_c1[other_a2] == c1).all()
    other_c1 = donors(src, pool, other_a2=False)
    assert (pool[other_c1][:, [0, 4]] == src[:, [0, 4]]).all()
    assert (pool_c1[other_c1] != c1).all()
