"""The reports' generated tables and answers recomputed from the JSON by other means than
course/tools/tables: counts from counts (never from rounded fractions), the joint length and span
measurement from the committed samples, and the seed counts the answers state, recounted
from each seed's own files rather than from reference_bands.json."""

import json
import math

import pytest

from course import reference_report
from course.grading.bands import seed_dirs
from course.tools import report_tables, smiles_difficulty
from course.tools.tables import problem3 as p3
from provided.common import results_dir

pytestmark = pytest.mark.kit


def report(problem: str) -> str:
    return " ".join(reference_report(problem).read_text().split())


def metrics_of(problem: str) -> dict[int, dict]:
    return {seed: json.loads((folder / "metrics.json").read_text())
            for seed, folder in seed_dirs(problem).items()}


def below_by_two_errors(low: float, low_trials: int, high: float, high_trials: int) -> bool:
    """The reports' noise rule, in floats: a fraction counts as below another where the gap
    exceeds two binomial standard errors of the two counts."""
    error = math.sqrt(low * (1 - low) / low_trials + high * (1 - high) / high_trials)
    return high - low > 2 * error


def test_every_block_is_generated_and_every_generator_is_used():
    for problem in report_tables.TABLES:
        _, _, problems = report_tables.fill(report_tables.report_path(problem).read_text(),
                                            report_tables.render(problem))
        assert not problems, problems


# ---------------------------------------------------------------------- counts from counts
def sample_entries():
    for seed, metrics in metrics_of("problem3").items():
        main = metrics["main"]
        for entry in main["by_step"] + main["by_temperature"]:
            yield seed, entry


def test_fractions_are_exact_ratios_of_counts():
    """Each fraction times its denominator is an integer, so counts_of recovers the counts
    exactly and novel_valid_per_1000 is a count, not a product of rounded fractions."""
    for seed, entry in sample_entries():
        n = entry["num_samples"]
        valid = entry["validity"] * n
        assert abs(valid - round(valid)) < 1e-6, (seed, entry)
        distinct = entry["uniqueness"] * round(valid)
        assert abs(distinct - round(distinct)) < 1e-6, (seed, entry)
        novel = entry["novelty"] * round(distinct)
        assert abs(novel - round(novel)) < 1e-6, (seed, entry)
        counts = p3.counts_of(entry)
        assert (counts["valid"], counts["distinct"], counts["novel"]) == (
            round(valid), round(distinct), round(novel))
        if n == 1000:
            assert p3.novel_valid_per_1000(entry) == round(novel)


def test_seed_1_novel_valid_counts_are_the_counts_not_the_floored_product():
    seed1 = metrics_of("problem3")[1]["main"]["by_temperature"]
    assert [p3.novel_valid_per_1000(e) for e in seed1] == [912, 778, 509]
    assert "| 1 | 0.920 / 0.779 / 0.510 | 0.992 / 0.999 / 0.998 | 912 / 778 / 509 |" in \
        reference_report("problem3").read_text()


def test_seed_0_counts_at_t1_are_the_sample_file():
    from problem3.evaluate import canonical
    samples = (results_dir("problem3") / "samples_pre_lr0.001_w500_s4000.txt").read_text() \
        .split("\n")[:-1]
    canon = [canonical(s) for s in samples]
    valid = [c for c in canon if c is not None]
    entry = next(e for e in metrics_of("problem3")[0]["main"]["by_temperature"]
                 if e["temperature"] == 1.0)
    counts = p3.counts_of(entry)
    assert (counts["samples"], counts["valid"], counts["distinct"]) == (
        len(samples), len(valid), len(set(valid)))


# ------------------------------------------------------------- length and span, measured
def leaves(tree, path: str = "") -> dict:
    """{'a.b[0]': value} for every number or string of a nested JSON value."""
    if isinstance(tree, dict):
        return {k: v for key, sub in tree.items() for k, v in leaves(sub, f"{path}.{key}").items()}
    if isinstance(tree, list):
        return {k: v for i, sub in enumerate(tree) for k, v in leaves(sub, f"{path}[{i}]").items()}
    return {path: tree}


def test_difficulty_json_is_recomputed_from_the_samples():
    path = results_dir("problem3") / "difficulty.json"
    samples = smiles_difficulty.samples_path().read_text().split("\n")[:-1]
    committed = json.loads(path.read_text())
    # counts exactly; the fitted floats to 1e-9 (numpy's linear algebra may differ in the
    # last bits between releases and BLAS builds)
    measured, expected = leaves(smiles_difficulty.measure(samples)), leaves(committed)
    assert measured.keys() == expected.keys()
    floats = [k for k, v in expected.items() if isinstance(v, float)]
    assert {k: v for k, v in measured.items() if k not in floats} == {
        k: v for k, v in expected.items() if k not in floats}
    assert [measured[k] for k in floats] == pytest.approx([expected[k] for k in floats],
                                                          rel=1e-9, abs=1e-12)
    assert sum(c["count"] for c in committed["cells"]) == committed["num_samples"]
    assert all(c["valid"] <= c["well_formed"] <= c["count"] for c in committed["cells"])


def test_difficulty_cells_add_up_to_evaluate_breakdowns_on_the_first_1000():
    """The tool's joint cells, summed over one axis, give problem3.evaluate's by_length and
    by_span on the committed 1,000 samples (the first 1,000 of the 10,000)."""
    samples = smiles_difficulty.samples_path().read_text().split("\n")[:-1][:1000]
    cells = smiles_difficulty.cells(smiles_difficulty.describe(samples))
    main = metrics_of("problem3")[0]["main"]
    for key, axis in (("by_length", "length"), ("by_span", "span")):
        for row in main[key]:
            members = [c for c in cells if c[axis] == row["bin"]]
            count = sum(c["count"] for c in members)
            assert count == row["count"], (key, row["bin"])
            if count:
                assert abs(sum(c["valid"] for c in members) / count - row["valid"]) < 1e-12


# ------------------------------------------------------------ the answers' seed counts
def test_problem1_order_counts_recounted_from_each_seeds_metrics():
    text = report("problem1")
    seeds = metrics_of("problem1")
    for n in (1000, 2000, 4000):
        ahead = sum(m[f"reversed_n{n}"]["test_exact_match"] > m[f"forward_n{n}"][
            "test_exact_match"] for m in seeds.values())
        assert (f"n = {n}: reversed is ahead on test exact match in {ahead} of "
                f"{len(seeds)}") in text, n


def test_problem1_three_carry_counts_recounted():
    text = report("problem1")
    lowest = {n: 0 for n in (2000, 4000)}
    for folder in seed_dirs("problem1").values():
        breakdown = json.loads((folder / "breakdown.json").read_text())
        for n in lowest:
            by = breakdown[f"forward_n{n}"]["exact_match_by_carries"]
            sums = breakdown[f"forward_n{n}"]["pairs_by_carries"]
            lowest[n] += all(below_by_two_errors(by["3"], sums["3"], by[k], sums[k])
                             for k in by if k != "3")
    assert (f"sums with three carries have the lowest exact match in {lowest[4000]} of 5 "
            f"seeds at n = 4000 and {lowest[2000]} of 5 seeds at n = 2000 (a seed counts where "
            "the difference exceeds 2 standard errors") in text


def test_problem2_rotary_lowest_bucket_recounted():
    """2,000 test sequences, 16 targets each in a bucket of 16 positions beyond 64."""
    lowest = 0
    for metrics in metrics_of("problem2").values():
        *others, last = metrics["rotary"]["beyond_buckets"]
        lowest += all(below_by_two_errors(last, 32_000, other, 32_000) for other in others)
    assert f"is lowest at 112–127 in {lowest} of 5 seeds" in report("problem2")


def test_problem3_verdict_counts_recounted_from_the_logs():
    text = report("problem3")
    trains = {}
    for folder in seed_dirs("problem3").values():
        for path in folder.glob("training_log_*_s1500.json"):
            log = json.loads(path.read_text())
            trains.setdefault(path.name, []).append(log["final_val_loss"] < 2.0)
    always = sum(all(v) and len(v) == 5 for v in trains.values())
    never = sum(not any(v) for v in trains.values())
    assert (f"{always} of the {len(trains)} cells train in 5 of 5 seeds and {never} fail in "
            f"5 of 5") in text


def test_problem3_verdicts_within_their_noise_are_not_counted():
    """A seed's verdict counts where its final validation loss is farther from 2.0 than it
    moved since the validation before; the summary's count of cells whose every seed has
    seed 0's verdict, recounted so."""
    seeds = seed_dirs("problem3")
    verdicts = {}
    for seed, folder in seeds.items():
        for path in folder.glob("training_log_*_s1500.json"):
            val = [p["val_loss"] for p in json.loads(path.read_text())["val"]]
            settled = None in val[-2:] or abs(val[-1] - 2.0) > abs(val[-1] - val[-2])
            verdict = val[-1] is not None and val[-1] < 2.0
            verdicts.setdefault(path.name, {})[seed] = verdict if settled else None
    same = sum(len(set(v.values())) == 1 and None not in v.values() for v in verdicts.values())
    assert (f"{same} of the {len(verdicts)} sweep cells have seed 0's verdict in all "
            f"{len(seeds)} seeds") in report("problem3")


def test_problem3_validity_gain_counts_recounted():
    smaller = clearly = 0
    for metrics in metrics_of("problem3").values():
        steps = metrics["main"]["by_step"]
        valid = [e["validity"] for e in steps]
        var = [v * (1 - v) / e["num_samples"] for v, e in zip(valid, steps)]
        gains = [b - a for a, b in zip(valid, valid[1:])]
        smaller += all(b < a for a, b in zip(gains, gains[1:]))
        clearly += all(gains[k] - gains[k + 1] > 2 * math.sqrt(var[k] + 4 * var[k + 1]
                                                                + var[k + 2])
                       for k in range(len(gains) - 1))
    assert (f"smaller at every checkpoint than at the one before in {smaller} of 5 seeds, and "
            f"smaller by more than the noise of the samples in {clearly} of 5 seeds") in \
        report("problem3")
