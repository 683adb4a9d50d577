"""Problem 2, Part E: the accuracies by position, the numerical checks of the encodings, and
evaluate.py end to end on tiny data (untrained runs of the four schemes). Where Part E's
code runs another part's (the dataset, the positional code), it runs a stand-in of
tests/tiny_problem2.py instead, so that a mistake there costs no points here."""

import dataclasses
import json
import math
import statistics

import pytest
import torch

from problem2.dataset import IGNORE_INDEX
from problem2.model import POSITIONS
from tests.seam import submission
from tests.tiny import offset_data, run_script, script_args
from tests.tiny_problem2 import orthogonal, stand_in_dataset

pytestmark = pytest.mark.p2e

evaluate = submission("problem2.evaluate")
ReadsKeyAtDistance = submission("tests.tiny").ReadsKeyAtDistance  # next to the code
stubs = submission("tests.tiny_problem2")


# The stand-ins of Parts B and C in evaluate.py's checks, and what they make the checks give
ROTARY_CHANGES = [1e-6 * (i % 7) for i in range(200)]  # score_shift_invariance, rotary
SINUSOIDAL_CHANGES = [0.5 + (i % 13) / 10 for i in range(200)]  # ... and sinusoidal
PAIRWISE_GAP = 0.25  # apply_rotary: pairwise_rotary + 0.25


def stand_ins_of_parts_a_to_d(patch, data, results) -> None:
    """evaluate.py, under test, on stand-ins of the other parts' code (tests/tiny_problem2.py):
    its test split GivenOffsetSplits, the models' positional code PowerTable's table
    (sinusoidal) and LeavesUnrotated (rotary), and in the checks PowerTable (sinusoidal_table,
    shift_rotation), ScriptedScoreShifts (score_shift_invariance, 200 changes per scheme) and
    pairwise_rotary + PAIRWISE_GAP (apply_rotary). The four runs are untrained models of
    their schemes, saved here as train.py saves them (no training by Part D)."""
    stand_in_dataset(patch, data, scripts=("problem2.evaluate",))
    power = stubs.PowerTable({64: orthogonal(64, seed=1)})
    model = submission("problem2.model")
    patch.setattr(model, "sinusoidal_table", power.table)
    patch.setattr(model, "apply_rotary", stubs.LeavesUnrotated())
    patch.setattr(evaluate, "sinusoidal_table", power.table)
    patch.setattr(evaluate, "shift_rotation", power.rotation)
    patch.setattr(evaluate, "score_shift_invariance", stubs.ScriptedScoreShifts(
        {"rotary": ROTARY_CHANGES, "sinusoidal": SINUSOIDAL_CHANGES}))
    patch.setattr(evaluate, "apply_rotary",
                  stubs.PlusConstant(evaluate.pairwise_rotary, PAIRWISE_GAP))
    from problem2.config import Config  # given code, for the logs

    config_class = submission("problem2.config").Config
    save_run = submission("provided.results").save_run
    for position in POSITIONS:
        options = {"position": position, "max_steps": 3, "train_sequences": 40,
                   "train_length": 64}
        log = {"run": position, "config": dataclasses.asdict(Config(**options)), "log": []}
        config = config_class(**options)
        save_run(results, config, log, config.build_model())


@pytest.fixture(scope="module")
def problem2_runs(tmp_path_factory):
    """A function that returns (data_dir, results_dir) after evaluate.py has run on tiny
    data, with untrained runs of the four schemes, on stand-ins of Parts A-D
    (stand_ins_of_parts_a_to_d). It does the work on its first call, inside a test, so that a
    failure there fails the test that called it."""
    done = {}

    def runs():
        if not done:
            root = tmp_path_factory.mktemp("problem2")
            data = offset_data(root)
            args = script_args(root, data)
            with pytest.MonkeyPatch.context() as patch:
                stand_ins_of_parts_a_to_d(patch, data, root / "results")
                run_script("problem2/evaluate.py", evaluate.main, args,
                           "the Part E functions, on stand-ins of the dataset, the models and "
                           "the positional code (tests/tiny_problem2.py)")
            done["runs"] = data, root / "results"
        return done["runs"]

    return runs


def read(path):
    return json.loads(path.read_text())


def as_float(value):
    return None if value is None else float(value)


def test_accuracy_over_and_position_metrics_by_hand():
    T = 128
    count = torch.ones(T)
    count[:7] = 0
    count[112:] = 3  # the last bucket has more targets: pooling is not a mean of buckets
    correct = torch.zeros(T)
    correct[7:64] = 1  # everything right in range
    correct[64:80] = 1  # first beyond bucket right, the rest wrong
    part = as_float(evaluate.accuracy_over(correct, count, 76, 84))
    assert part == pytest.approx(0.5), (
        "accuracy_over(correct, count, 76, 84) must pool positions 76..83 (4 right of 8 here, "
        f"0.5), not {part}: is position end included, or start left out?")
    assert evaluate.accuracy_over(correct, count, 0, 7) is None, (
        "accuracy_over must be None over positions without any target")
    m = evaluate.position_metrics(correct, count)
    assert as_float(m["in_range"]) == 1.0, (
        "position_metrics' in_range must pool positions 0..63 (all right here)")
    pooled = as_float(m["beyond"])
    assert pooled == pytest.approx(16 / 96), (
        "position_metrics' beyond must pool the counts of positions 64..127 (16 right of 96 "
        f"targets here, 0.1667), not {pooled}"
        + (": it is the mean of the four buckets' accuracies" if pooled == pytest.approx(0.25)
           else ""))
    buckets = [as_float(b) for b in m["buckets"]]
    assert buckets == [1.0] * 4 + [1.0, 0.0, 0.0, 0.0], (
        "position_metrics' buckets must be the eight 16-position buckets 0-15 .. 112-127, "
        f"[1, 1, 1, 1, 1, 0, 0, 0] here, not {buckets}")
    beyond = [as_float(b) for b in m["beyond_buckets"]]
    assert beyond == [1.0, 0.0, 0.0, 0.0], (
        "position_metrics' beyond_buckets must be the last four buckets, 64-79 .. 112-127 "
        f"([1, 0, 0, 0] here), not {beyond}: are they the first four?")
    correct[63] = 0  # the last position below the training length now wrong
    in_range = as_float(evaluate.position_metrics(correct, count)["in_range"])
    assert in_range == pytest.approx(56 / 57), (
        "position_metrics' in_range must pool every position below the training length, the "
        f"last one (63) included: 56 right of 57 here, not {in_range}: does its range stop "
        "one short?")


def test_per_position_counts_with_a_stub_model():
    tokens = torch.tensor([[0] * 64 + [1] * 64, [1] * 128])
    targets = torch.full_like(tokens, IGNORE_INDEX)
    targets[:, 7:] = tokens[:, :-7]
    counts = evaluate.per_position_counts(ReadsKeyAtDistance(7), tokens, targets, batch_size=1)
    kinds = {name: counts[name].dtype for name in ("correct", "count")}
    assert all(kind.is_floating_point for kind in kinds.values()), (
        f"per_position_counts must return float tensors, not {kinds}: are the tallies made "
        "with torch.zeros(T, dtype=torch.long)?")
    got = counts["count"].tolist()
    why = ("it is the last batch's count only: are the batches' counts summed (+=), or "
           "overwritten (=)?" if got == [0] * 7 + [1] * 121 else
           "are positions without a target (IGNORE_INDEX) counted?")
    assert got == [0] * 7 + [2] * 121, (
        "per_position_counts' count must be the number of targets at each position, summed "
        f"over the sequences and batches (batches of one sequence here): {why}")
    # Token 0 is the target in sequence 0 at positions 7..70: 57 + 7 of 121 targets.
    assert counts["correct"].tolist() == [0] * 7 + [1] * 64 + [0] * 57, (
        "per_position_counts' correct must count the right predictions at each position, "
        "summed over the sequences and batches, positions without a target never right")
    m = evaluate.position_metrics(counts["correct"], counts["count"])
    assert as_float(m["in_range"]) == pytest.approx(57 / 114), (
        "in_range must pool the counts of the positions below the training length")
    assert as_float(m["beyond"]) == pytest.approx(7 / 128), (
        "beyond must pool the counts of the positions from the training length on")


def test_pairwise_rotary_by_hand():
    # d = 4: theta = (1, 0.01); (1, 0, 0, 1) at p = 2 -> (cos 2, sin 2, -sin .02, cos .02).
    out = evaluate.pairwise_rotary(torch.tensor([[1.0, 0.0, 0.0, 1.0]]), torch.tensor([2]))
    expected = [math.cos(2), math.sin(2), -math.sin(0.02), math.cos(0.02)]
    mistakes = {  # the same vector under the common mistakes, by hand
        "it rotates the wrong way (the signs of the sines swapped)":
            [math.cos(2), -math.sin(2), math.sin(0.02), math.cos(0.02)],
        "its angles use 10000^(-i/d) instead of 10000^(-2i/d) (theta_1 = 0.1, not 0.01)":
            [math.cos(2), math.sin(2), -math.sin(0.2), math.cos(0.2)],
        "it rotates the half-split pairs (i, i + d/2) instead of (2i, 2i+1)":
            [math.cos(2), -math.sin(0.02), math.sin(2), math.cos(0.02)]}
    got = [float(v) for v in out[0]]
    why = next((why for why, value in mistakes.items()
                if got == pytest.approx(value, abs=1e-6)), "compare one pair by hand")
    assert got == pytest.approx(expected, abs=1e-12), (
        "pairwise_rotary must rotate each pair (x_2i, x_2i+1) by the angle +p theta_i, "
        f"theta_i = 10000^(-2i/d), in float64, as apply_rotary does: {why}")


def test_metrics(problem2_runs):
    _, results = problem2_runs()
    metrics = read(results / "metrics.json")
    assert set(metrics) == {*POSITIONS, "checks"}
    for position in POSITIONS:
        m = metrics[position]
        assert 0 <= m["in_range"] <= 1 and 0 <= m["beyond"] <= 1, (
            "in_range and beyond must be accuracies between 0 and 1 (position scheme "
            f"{position})")
        assert len(m["beyond_buckets"]) == 4 and m["buckets"][4:] == m["beyond_buckets"], (
            "buckets must hold the four in-range buckets, then the four beyond_buckets "
            f"(position scheme {position})")
        # Equal-sized buckets: beyond is their mean.
        assert m["beyond"] == pytest.approx(sum(m["beyond_buckets"]) / 4), (
            "beyond must pool the positions of its four equal-sized buckets: do its range and "
            f"the buckets' ranges differ (position scheme {position})?")
        # in_range pools positions 7..63: 9 targets per sequence in bucket 0-15, 16 in the
        # other three
        in_range = (9 * m["buckets"][0] + 16 * sum(m["buckets"][1:4])) / 57
        assert m["in_range"] == pytest.approx(in_range), (
            "in_range must pool the positions of the four buckets below the training length, "
            f"the last position (63) included: does its range stop one short (position "
            f"scheme {position})?")


def test_checks(problem2_runs):
    """metrics.json's checks, on the stand-ins of stand_ins_of_parts_a_to_d: a table and
    rotations that fit together, known score changes, apply_rotary off by PAIRWISE_GAP."""
    checks = read(problem2_runs()[1] / "metrics.json")["checks"]
    assert checks["shift_rotation_max_error"] < 1e-5, (
        "checks' shift_rotation_max_error must be about 0 for a table and rotations that fit "
        "(PE[p + s] = R_s PE[p] for the stand-ins), not "
        f"{checks['shift_rotation_max_error']:.3g}: is R_s applied transposed (PE[p] @ R_s, a "
        "row vector times R_s) instead of R_s @ PE[p], or the rows p and p + s mixed up?")
    assert checks["rotary_score_shift_error"] == pytest.approx(max(ROTARY_CHANGES)), (
        "checks' rotary_score_shift_error must be the largest rotary change "
        f"({max(ROTARY_CHANGES):.3g} here): is score_shift_errors' maximum taken per scheme?")
    assert checks["sinusoidal_score_shift_error"] == pytest.approx(max(SINUSOIDAL_CHANGES)), (
        "checks' sinusoidal_score_shift_error must be the largest sinusoidal change "
        f"({max(SINUSOIDAL_CHANGES):.3g} here), not {checks['sinusoidal_score_shift_error']}")
    median = torch.tensor(SINUSOIDAL_CHANGES).median().item()
    assert checks["sinusoidal_score_shift_error_median"] == pytest.approx(median), (
        f"checks' sinusoidal_score_shift_error_median must be the median change ({median:.3g} "
        "here): is it a mean?")
    assert checks["rotary_vs_pairwise_error"] == pytest.approx(PAIRWISE_GAP, abs=1e-5), (
        "checks' rotary_vs_pairwise_error must be max |apply_rotary(x) - pairwise_rotary(x)|, "
        f"{PAIRWISE_GAP} here (the stand-in apply_rotary is pairwise_rotary + {PAIRWISE_GAP}), "
        f"not {checks['rotary_vs_pairwise_error']}: is the absolute value or the maximum "
        "missing, or the two called on different inputs?")


def test_accuracy_over_pools_the_counts():
    """Positions with more targets weigh more: the pooled fraction, not a mean of means."""
    correct, count = torch.tensor([2.0, 0.0, 1.0, 1.0]), torch.tensor([2.0, 1.0, 1.0, 4.0])
    assert as_float(evaluate.accuracy_over(correct, count, 0, 4)) == pytest.approx(0.5), (
        "accuracy_over must pool the counts (4 right of 8 targets = 0.5): 0.5625 is the mean "
        "of the per-position accuracies")


def test_per_position_counts_runs_in_eval_mode():
    tokens = torch.tensor([[0] * 64 + [1] * 64])
    targets = torch.full_like(tokens, IGNORE_INDEX)
    targets[:, 7:] = tokens[:, :-7]
    # The stub predicts token 0 in eval mode (right at 7..70) and token 1 in training mode.
    model = stubs.PredictsZeroInEvalMode().train()
    modes, counts = stubs.modes_during(model, evaluate.per_position_counts, model, tokens,
                                       targets)
    assert modes == {False}, "per_position_counts must run the model in eval mode"
    assert counts["correct"].tolist() == [0] * 7 + [1] * 64 + [0] * 57, (
        "per_position_counts must run the model in eval mode: its counts are those of the "
        "model's training-mode predictions")


def test_score_shift_errors_reports_the_maximum_and_the_median(monkeypatch):
    """With score_shift_invariance replaced by known values: max and median per the
    docstring (a mean would give 34.33 for the median here)."""
    values = {"rotary": [0.1, 0.3, 0.2], "sinusoidal": [1.0, 100.0, 2.0]}
    monkeypatch.setattr(evaluate, "score_shift_invariance", stubs.ScriptedScoreShifts(values))
    found = evaluate.score_shift_errors(8, samples=3)
    assert as_float(found["rotary_score_shift_error"]) == pytest.approx(0.3), (
        "rotary_score_shift_error must be the maximum of the rotary changes (0.3 here)")
    assert as_float(found["sinusoidal_score_shift_error"]) == pytest.approx(100.0), (
        "sinusoidal_score_shift_error must be the maximum of the sinusoidal changes (100)")
    median = as_float(found["sinusoidal_score_shift_error_median"])
    assert median == pytest.approx(2.0), (
        "sinusoidal_score_shift_error_median must be the median of the sinusoidal changes "
        f"(2.0 here), not {median}: is it their mean or maximum, or the rotary changes' "
        "median?")


def test_score_shift_errors_gives_the_median_magnitude_of_its_draws(monkeypatch):
    """score_magnitude_median: the median |q . k| over the draws (each draw's q and k as
    handed to score_shift_invariance, recorded here; 101 draws, so every median agrees)."""
    recorder = stubs.RecordsScoreShifts()
    monkeypatch.setattr(evaluate, "score_shift_invariance", recorder)
    found = as_float(evaluate.score_shift_errors(4, samples=101, seed=3)["score_magnitude_median"])
    scores = recorder.scores[::2]  # one per draw: both schemes get the same q and k
    readings = {statistics.median(abs(s) for s in scores): None,
                statistics.median(scores): "the median of the signed q . k: is the abs missing?",
                statistics.mean(abs(s) for s in scores): "the mean |q . k|, not the median"}
    expected = next(iter(readings))
    assert found == pytest.approx(expected, rel=1e-4), (
        f"score_magnitude_median must be the median |q . k| over the draws ({expected:.4f} "
        f"here), not {found:.4f}: " + next(
            (why for value, why in readings.items() if why and found == pytest.approx(
                value, rel=1e-4)),
            "it matches neither the median of the signed q . k nor the mean |q . k|"))


def test_score_shift_errors_draws_over_the_promised_ranges(monkeypatch):
    """The draws cover exactly the docstring's ranges: a query position in [0, 64), a key
    position in [0, q_pos], a shift in [1, 64], both ends of each reached and nothing outside
    (3,000 draws: a correct draw misses a value of [1, 64] with probability below 1e-18).
    The shifts and positions are read off the calls to score_shift_invariance, replaced by
    a recorder, so any correct way of drawing them (torch, random, numpy) passes."""
    recorder = stubs.RecordsScoreShifts()
    monkeypatch.setattr(evaluate, "score_shift_invariance", recorder)
    samples = 3000
    evaluate.score_shift_errors(2, samples=samples, seed=5)
    calls = recorder.calls
    by_scheme = {scheme: sorted(c[1:] for c in calls if c[0] == scheme)
                 for scheme in ("rotary", "sinusoidal")}
    assert (len(by_scheme["rotary"]), len(by_scheme["sinusoidal"]), len(calls)) == (
        samples, samples, 2 * samples), (
        f"score_shift_errors(samples={samples}) must call score_shift_invariance once per draw "
        "and scheme ('rotary' and 'sinusoidal'), by that name: it made "
        f"{len(by_scheme['rotary'])} rotary and {len(by_scheme['sinusoidal'])} sinusoidal "
        f"calls of {len(calls)}")
    assert by_scheme["rotary"] == by_scheme["sinusoidal"], (
        "score_shift_errors must evaluate both schemes on the same draws (the same shift, "
        "q_pos and k_pos for rotary and sinusoidal)")
    shifts = {shift for shift, _, _ in by_scheme["rotary"]}
    q_positions = {q_pos for _, q_pos, _ in by_scheme["rotary"]}

    def summary(values: set) -> str:
        return f"{min(values)}..{max(values)}, {len(values)} distinct values"

    assert shifts == set(range(1, 65)), (
        "score_shift_errors must draw each shift from [1, 64], both ends included, as its "
        f"docstring says; over {samples} draws its shifts were {summary(shifts)}: "
        + ("64 is never drawn: is the upper bound of the draw exclusive (torch.randint(1, 64) "
           "draws 1..63; use 65, i.e. TRAIN_LENGTH + 1)?" if max(shifts) == 63 else
           "is the range of the shift's draw off by one, or the shift not passed to "
           "score_shift_invariance?"))
    assert q_positions == set(range(64)), (
        "score_shift_errors must draw each query position from [0, 64) (0..63), both ends "
        f"reached; over {samples} draws its query positions were {summary(q_positions)}: is "
        "the range of the query position's draw off by one, or q_pos not passed to "
        "score_shift_invariance by keyword or position?")
    outside = [(q_pos, k_pos) for _, q_pos, k_pos in by_scheme["rotary"]
               if not 0 <= k_pos <= q_pos]
    assert not outside, (
        "score_shift_errors must draw each key position at or before its query position, in "
        f"[0, q_pos]: (q_pos, k_pos) {outside[:5]} are outside")
    offsets = {q_pos - k_pos for _, q_pos, k_pos in by_scheme["rotary"]}
    keys = {k_pos for _, _, k_pos in by_scheme["rotary"]}
    assert 0 in offsets and 0 in keys and max(offsets) >= 32, (
        "score_shift_errors must draw each key position from the whole of [0, q_pos], the "
        f"query's own position included: over {samples} draws k_pos was "
        + ("never equal to q_pos: is the key's draw exclusive at q_pos (use q_pos + 1)?"
           if 0 not in offsets else "never 0, or never far behind its query"))


def test_score_shift_errors_draws_are_fixed_by_the_seed(monkeypatch):
    """The seed fixes every draw: two calls with seed 5 draw the same shifts and positions
    (read off the calls to a recorder standing in for score_shift_invariance), seed 6 others."""
    def draws(seed: int) -> list:
        recorder = stubs.RecordsScoreShifts()
        monkeypatch.setattr(evaluate, "score_shift_invariance", recorder)
        evaluate.score_shift_errors(2, samples=50, seed=seed)
        return list(recorder.calls)

    first, again, other = draws(5), draws(5), draws(6)
    assert first == again, (
        "score_shift_errors must draw the same shifts and positions at every call with the "
        f"same seed: two calls with seed=5 drew (scheme, shift, q_pos, k_pos) {first[:2]}... "
        f"then {again[:2]}...: is its generator made from seed at each call (not made once "
        "and kept between calls, nor the global random state used unseeded)?")
    assert first != other, (
        "score_shift_errors must draw with the seed it is given: seed=5 and seed=6 drew the "
        f"same shifts and positions {first[:2]}...: is the seed argument ignored?")


def test_rotary_vs_pairwise_error_draws_a_float32_x(monkeypatch):
    """rotary_vs_pairwise_error's docstring: a random float32 x [length, d_model], given to
    apply_rotary (replaced here by a recorder of what it gets)."""
    recorder = stubs.RecordsDtypes(stubs.LeavesUnrotated())
    monkeypatch.setattr(evaluate, "apply_rotary", recorder)
    evaluate.rotary_vs_pairwise_error(8, length=16)
    seen = list(recorder.seen)
    assert seen == [("float32", [16, 8])], (
        "rotary_vs_pairwise_error must hand apply_rotary one random float32 x [length, "
        f"d_model] ([16, 8] here), not {seen}: is x drawn in float64 (the check is then "
        "blind to float32 rounding), or of another shape?")


def test_per_position_counts_covers_every_sequence_when_they_outnumber_the_positions():
    """per_position_counts' docstring: tallies over the sequences of tokens [N, T]; here
    N = 10 sequences of T = 4 positions in batches of 3 (a stub that predicts i % 3 at
    position i, every position with target 0): position 0 is right in all 10."""
    tokens = torch.zeros(10, 4, dtype=torch.long)
    targets = torch.zeros(10, 4, dtype=torch.long)
    counts = evaluate.per_position_counts(stubs.PredictsPositionModThree(), tokens, targets,
                                          batch_size=3)
    got = counts["count"].tolist()
    assert got == [10.0] * 4, (
        f"per_position_counts must count all 10 sequences at every position, not {got}: do "
        "the batches run over the sequences (tokens.shape[0]), not over the positions?")
    assert counts["correct"].tolist() == [10.0, 0.0, 0.0, 10.0], (
        "per_position_counts' correct must count, at each position, the sequences whose "
        "argmax is the target")


def test_position_metrics_in_range_starts_at_position_0():
    """position_metrics' docstring: in_range pools positions 0-63, position 0 included
    (one right prediction at position 0 of 128 positions with one target each)."""
    count = torch.ones(128)
    correct = torch.zeros(128)
    correct[0] = 1.0
    m = evaluate.position_metrics(correct, count)
    assert as_float(m["in_range"]) == pytest.approx(1 / 64), (
        f"in_range must pool positions 0-63 (1 right of 64 here), not {m['in_range']}: does "
        "it start at position 1, or end before 63?")
    assert as_float(m["buckets"][0]) == pytest.approx(1 / 16), (
        "the first bucket must pool positions 0-15")
