"""Problem 1's report tables: each renders one marked table of course/reports/problem1.md from
problem1/results/."""

from decimal import Decimal
from fractions import Fraction
from pathlib import Path

from course.grading.bands import LATE_POINTS
from course.tools.tables.style import (
    DASH,
    NOISE_RULE,
    band_of,
    clearly_below,
    exact,
    fmt,
    mean,
    mean_sd,
    ordinal,
    per_seed,
    seed_list,
    seeds_of,
    seeds_sentence,
    span,
    table,
)
from problem1.config import ANALYSED, RUNS, TRAIN_SIZES, run_name
from provided.common import results_dir
from provided.results import read_json

P1_RUNS = list(RUNS)
P1_HEAD_MODELS = list(ANALYSED)
COSTLY = Decimal("0.005")  # a head is costly when removing it alone costs more than this


def p1_log(run: str) -> list[dict]:
    return read_json(results_dir("problem1") / f"training_log_{run}.json")["log"]


def late_average(log: list[dict]) -> Fraction:
    """The exact mean of the last LATE_POINTS validation exact matches (bands.py's
    late_val_exact_match, which holds the float mean, for the grader)."""
    return mean(point["val_exact_match"] for point in log[-LATE_POINTS:])


def late_of(folder: Path, run: str) -> Fraction:
    return late_average(read_json(folder / f"training_log_{run}.json")["log"])


# the band quantities the reports recompute from each seed's logs (style.load_bands)
RECOMPUTE = {"late_val_exact_match": late_of}


def p1_seeds(m: dict, bands: dict) -> str:
    return seeds_sentence(bands, "test_exact_match", P1_RUNS, "one training run per "
                          "configuration")


def p1_runs(m: dict, bands: dict) -> str:
    multi = any(band_of(bands, run, "test_exact_match") for run in P1_RUNS)
    header = ["run", "test exact match", "test token accuracy", "steps_to_95",
              "final train loss", f"late val. average ({LATE_POINTS} points)"]
    align = "lrrrrr"
    if multi:
        header += ["test exact match, mean ± sd (n seeds)",
                   "steps_to_95, mean ± sd (n seeds that reach 0.95; never)",
                   "late val. average, mean ± sd (n seeds)"]
        align += "rrr"
    rows = []
    for run in P1_RUNS:
        entry, log = m[run], p1_log(run)
        steps = entry["steps_to_95"]
        if steps is None:
            best = max(point["val_exact_match"] for point in log)
            steps_text = f"never (best val {fmt(best, 3)})"
        else:
            steps_text = str(steps)
        row = [run, fmt(entry["test_exact_match"]), fmt(entry["test_token_accuracy"]),
               steps_text, fmt(log[-1]["train_loss"]), fmt(late_average(log))]
        if multi:
            steps_band = band_of(bands, run, "steps_to_95")
            if steps_band is None:
                steps_seeds = DASH
            else:
                never = len(steps_band.get("missing", []))
                total = len(seeds_of(steps_band))
                steps_seeds = (f"{mean_sd(steps_band, integer=True)}; never in {never} of "
                               f"{total}" if steps_band["n_seeds"] else
                               f"never in {never} of {total}")
            row += [mean_sd(band_of(bands, run, "test_exact_match")), steps_seeds,
                    mean_sd(band_of(bands, run, "late_val_exact_match"))]
        rows.append(row)
    return table(header, rows, align)


def p1_order_seeds(m: dict, bands: dict) -> str:
    """Forward against reversed at each size, over the seeds: ranges only, no verdict."""
    lines = []
    for n in TRAIN_SIZES:
        forward, reversed_ = run_name("forward", n), run_name("reversed", n)
        late = [band_of(bands, run, "late_val_exact_match") for run in (forward, reversed_)]
        steps = [band_of(bands, run, "steps_to_95") for run in (forward, reversed_)]
        if None in late:
            continue
        ranges = [(b["min"], b["max"]) for b in late]
        overlap = ranges[0][0] <= ranges[1][1] and ranges[1][0] <= ranges[0][1]
        step_text = []
        for run, band in zip((forward, reversed_), steps):
            values = per_seed(band)
            cells = [str(values[s]) if s in values else "never" for s in seeds_of(band)]
            step_text.append(f"{run.split('_')[0]} {', '.join(cells)}")
        lines.append(
            f"- n = {n}, seeds {seed_list(seeds_of(late[0]))}: late validation average "
            f"forward {fmt(ranges[0][0])}{DASH}{fmt(ranges[0][1])}, reversed "
            f"{fmt(ranges[1][0])}{DASH}{fmt(ranges[1][1])} (the seed ranges "
            f"{'overlap' if overlap else 'do not overlap'}); steps_to_95 per seed: "
            f"{'; '.join(step_text)}.")
    if not lines:
        return ("Across seeds: no seed beyond seed 0 yet, so each comparison below rests on "
                "one training run per configuration.")
    return "Across seeds (from `results/reference_bands.json`):\n\n" + "\n".join(lines)


def p1_breakdown(m: dict, bands: dict) -> str:
    breakdown = read_json(results_dir("problem1") / "breakdown.json")
    pairs = breakdown[P1_RUNS[0]]["pairs_by_carries"]
    header = ["run", "s3", "s2", "s1", "s0",
              *[f"{c} carr{'y' if c == '1' else 'ies'} ({pairs[c]} sums)" for c in pairs]]
    rows = []
    for run in P1_RUNS:
        entry = breakdown[run]
        rows.append([run, *[fmt(entry["place_accuracy"][p]) for p in ("s3", "s2", "s1", "s0")],
                     *[fmt(entry["exact_match_by_carries"][c]) for c in pairs]])
    return table(header, rows, "l" + "r" * (len(header) - 1))


def pruning_order(m: dict, run: str) -> dict:
    """{head: the removal (1-24) at which greedy pruning took it}."""
    order, seen = {}, []
    for step in m["pruning"][run]:
        for head in step["removed"]:
            if head not in seen:
                seen.append(head)
                order[head] = len(seen)
    return order


def p1_ablation(m: dict, bands: dict) -> str:
    columns = []
    for run in P1_HEAD_MODELS:
        full = Decimal(repr(m[run]["test_exact_match"]))
        order = pruning_order(m, run)
        costly = [(head, v) for head, v in m["ablation"][run].items()
                  if full - Decimal(repr(v)) > COSTLY]
        costly.sort(key=lambda item: item[1])
        columns.append([[head, fmt(v), ordinal(order[head])] for head, v in costly])
    height = max(len(c) for c in columns)
    rows = []
    for i in range(height):
        row = []
        for column in columns:
            row += column[i] if i < len(column) else ["", "", ""]
        rows.append(row)
    header = []
    for run in P1_HEAD_MODELS:
        header += [f"{run} (full {fmt(m[run]['test_exact_match'])})", "alone",
                   "pruned (of 24)"]
    return table(header, rows, "lrrlrr")


def p1_pruning(m: dict, bands: dict) -> str:
    curves = {run: m["pruning"][run] for run in P1_HEAD_MODELS}
    header = ["removed", "heads left"]
    for run in P1_HEAD_MODELS:
        header += [f"{run}: head removed", "test exact match"]
    rows = []
    for k in range(len(curves[P1_HEAD_MODELS[0]])):
        row = [str(k), str(24 - k)]
        for run in P1_HEAD_MODELS:
            step = curves[run][k]
            new = [h for h in step["removed"] if k == 0 or h not in curves[run][k - 1]["removed"]]
            row += [new[0] if new else DASH, fmt(step["test_exact_match"])]
        rows.append(row)
    return table(header, rows, "rrlrlr")


def fewest_heads(curve: list[dict], key: str = "test_exact_match") -> str:
    """The fewest heads left with curve[k][key] >= 0.95, as text."""
    kept = [24 - k for k, point in enumerate(curve) if point[key] >= 0.95]
    return str(min(kept)) if kept else "none"


def p1_pruning_bias(m: dict, bands: dict) -> str:
    path = results_dir("problem1") / "pruning_validation.json"
    if not path.exists():
        return ("Not measured yet: `make pruning-bias` writes "
                "`results/pruning_validation.json`.")
    chosen_on_val = read_json(path)
    header = ["heads left"]
    for run in P1_HEAD_MODELS:
        header += [f"{run}: chosen on test", "chosen on validation"]
    rows = []
    for k in range(25):
        row = [str(24 - k)]
        for run in P1_HEAD_MODELS:
            row += [fmt(m["pruning"][run][k]["test_exact_match"]),
                    fmt(chosen_on_val[run][k]["test_exact_match"])]
        rows.append(row)
    text = table(header, rows, "rrrrr")
    summary = []
    for run in P1_HEAD_MODELS:
        gaps = [exact(a["test_exact_match"]) - exact(b["test_exact_match"])
                for a, b in zip(m["pruning"][run], chosen_on_val[run])]
        summary.append(
            f"{run}: fewest heads with test exact match >= 0.95 {fewest_heads(m['pruning'][run])}"
            f" chosen on test, {fewest_heads(chosen_on_val[run])} chosen on validation; test "
            f"minus validation choice {fmt(mean(gaps), 4)} on average over the 25 "
            f"points (largest {fmt(max(gaps), 4)}, smallest {fmt(min(gaps), 4)})")
    return text + "\n\nEvery exact match here is on test. " + "; ".join(summary) + "."


def carry_probe(path: Path) -> dict:
    """carry_probe.json with every accuracy and fraction the exact Fraction of its count
    (its "counts" over test_pairs, or s3_pairs for the "s3 ..." patches), so that each is
    rounded once, from the count; a file without counts as it is."""
    probe = read_json(path)
    counts = probe.get("counts")
    if counts is None:
        return probe
    n, n3 = probe["test_pairs"], probe["s3_pairs"]
    return {**probe,
            "majority": {p: Fraction(k, n) for p, k in counts["majority"].items()},
            "runs": {run: {s: {p: {kind: Fraction(k, n) for kind, k in kinds.items()}
                               for p, kinds in probes.items()} for s, probes in by.items()}
                     for run, by in counts["runs"].items()},
            "patching": {run: {s: {key: Fraction(k, n3 if key.startswith("s3 ") else n)
                                   for key, k in keys.items()} for s, keys in by.items()}
                         for run, by in counts["patching"].items()}}


def p1_carry_probe(m: dict, bands: dict) -> str:
    path = results_dir("problem1") / "carry_probe.json"
    if not path.exists():
        return ("Not measured yet: `make carry-probe` writes "
                "`results/carry_probe.json`.")
    probe = carry_probe(path)
    rows = []
    for run, by_seed in probe["runs"].items():
        for name in probe["probes"]:
            row = [run, name]
            for kind in ("input", "memory"):
                values = [by_seed[seed][name][kind] for seed in sorted(by_seed)]
                row.append(f"{fmt(min(values), 3)}{DASH}{fmt(max(values), 3)}")
            row.append(fmt(probe["majority"][name], 3))
            rows.append(row)
    seeds = sorted(next(iter(probe["runs"].values())))
    over = f"lowest{DASH}highest over seeds {seed_list(int(s) for s in seeds)} (n = {len(seeds)})"
    text = (table(["run", "probe", "from the input", "from the memory", "always guess"],
                  rows, "llrrr")
            + f"\n\nTest accuracy of each linear probe, {over}; `results/carry_probe.json`.")
    if "patching" not in probe:
        return text
    patches = [("control", "hundreds positions from a donor with another a2",
                "s2 follows its a2"),
               ("carry@hundreds", "hundreds positions, donor with the other c1",
                "s2 follows its carry"),
               ("s3 carry@hundreds", "hundreds positions, donor with the other c1",
                "s3 follows its carry (a2 + b2 = 9)"),
               ("carry@lower", "tens and ones positions, same donor", "s2 follows its carry"),
               ("s3 carry@lower", "tens and ones positions, same donor",
                "s3 follows its carry (a2 + b2 = 9)")]
    rows = []
    for run, by_seed in probe["patching"].items():
        for key, patched, read in patches:
            values = [by_seed[seed][key] for seed in sorted(by_seed)]
            rows.append([run, patched, read, f"{fmt(min(values), 3)}{DASH}{fmt(max(values), 3)}"])
    return (text + "\n\n" + table(["run", "memory patched", "decoded digit", "fraction"], rows,
                                   "lllr")
            + f"\n\nFraction of the {probe['test_pairs']:,} test pairs that decode the digit "
            f"shown (for s3 only the {probe['s3_pairs']} pairs with a2 + b2 = 9), {over}.")


TABLES = {"p1_seeds": p1_seeds, "p1_runs": p1_runs, "p1_order_seeds": p1_order_seeds,
          "p1_carry_probe": p1_carry_probe,
          "p1_breakdown": p1_breakdown, "p1_ablation": p1_ablation,
          "p1_pruning": p1_pruning, "p1_pruning_bias": p1_pruning_bias}


# --------------------------------------------------------------------- answers, five seeds
# Each answer block states one deliverable's answer over every seed that has the quantity,
# with its count of seeds; a block that rests on seed 0 alone (the attention maps, the head
# analyses) says so. The wording follows the counts: no sentence below is fixed text about a
# number that the JSON could contradict.
PLACES = ("s0", "s1", "s2", "s3")
A, B = {0: 2, 1: 1, 2: 0}, {0: 6, 1: 5, 2: 4}  # source index of a_i and b_i (a2 a1 a0 + b2 b1 b0)


def seed_values(bands: dict, run: str, quantity: str) -> dict:
    """{seed: value} over the seeds of a band; a seed the band lists as missing is None."""
    band = bands.get(run, {}).get(quantity)
    if band is None:
        return {}
    values = per_seed(band)
    return {seed: values.get(seed) for seed in seeds_of(band)}


def overlap(x: list, y: list) -> bool:
    return min(x) <= max(y) and min(y) <= max(x)


def of_seeds(k: int, n: int) -> str:
    return f"{k} of {n} seed{'s' if n != 1 else ''}"


def seeds_breakdowns() -> dict:
    from course.grading.bands import seed_dirs
    return {seed: read_json(folder / "breakdown.json")
            for seed, folder in seed_dirs("problem1").items()
            if (folder / "breakdown.json").exists()}


def order_comparison(bands: dict, n: int) -> dict:
    """Forward against reversed at training size n, per metric: {metric: (k seeds where
    reversed is ahead, seeds compared, ranges overlap)}. Ahead: higher test exact match,
    higher late validation average, or reaching 0.95 at an earlier step (a run that never
    reaches it is behind one that does)."""
    forward, reversed_ = run_name("forward", n), run_name("reversed", n)
    out = {}
    for metric in ("test_exact_match", "late_val_exact_match", "steps_to_95"):
        f, r = seed_values(bands, forward, metric), seed_values(bands, reversed_, metric)
        seeds = sorted(set(f) & set(r))
        if metric == "steps_to_95":
            inf = float("inf")
            ahead = sum((r[s] if r[s] is not None else inf) < (f[s] if f[s] is not None else inf)
                        for s in seeds)
            both = [s for s in seeds if f[s] is not None and r[s] is not None]
            lap = (overlap([f[s] for s in both], [r[s] for s in both]) if both else None)
        else:
            ahead = sum(r[s] > f[s] for s in seeds)
            lap = overlap([f[s] for s in seeds], [r[s] for s in seeds])
        out[metric] = (ahead, len(seeds), lap, f, r)
    return out


METRIC_NAMES = {"test_exact_match": "test exact match",
                "late_val_exact_match": "late validation average",
                "steps_to_95": "reaching 0.95 sooner"}


def never_both(bands: dict, n: int) -> int:
    """Seeds in which neither order reaches 0.95 at training size n."""
    steps = order_comparison(bands, n)["steps_to_95"]
    f, r = steps[3], steps[4]
    return sum(f[s] is None and r[s] is None for s in set(f) & set(r))


def separating(bands: dict, n: int) -> list[str]:
    """The metrics on which reversed is ahead in every seed with seed ranges that do not
    overlap (for steps_to_95: ahead in every seed) at training size n."""
    return [METRIC_NAMES[metric] for metric, (ahead, total, lap, _, _)
            in order_comparison(bands, n).items() if ahead == total and not lap]


def ahead_counts(bands: dict, sizes) -> tuple[int, int, int]:
    """(fewest, most seeds in which reversed is ahead, seeds) over every metric and size."""
    counts = [(ahead, total) for n in sizes
              for ahead, total, *_ in order_comparison(bands, n).values()]
    return (min(a for a, _ in counts), max(a for a, _ in counts),
            max(t for _, t in counts))


def larger_sizes_sentence(bands: dict) -> str:
    """At the larger sizes: how many seeds reversed is ahead in on every metric, and which
    metrics separate the orders at each size."""
    low, high, total = ahead_counts(bands, TRAIN_SIZES[1:])
    count = f"{low}" if low == high else f"{low}{DASH}{high}"
    sizes = " and ".join(f"{n:,}" for n in TRAIN_SIZES[1:])
    parts = []
    for n in TRAIN_SIZES[1:]:
        apart = separating(bands, n)
        parts.append(f"{' and '.join(apart) if apart else 'no metric'} at n = {n}")
    return (f"at {sizes} pairs reversed is ahead in {count} of {total} seeds on every metric, "
            f"and only whether it is ahead in every seed with seed ranges that do not overlap "
            f"depends on the metric ({'; '.join(parts)})")


def p1_summary(m: dict, bands: dict) -> str:
    runs = {run: seed_values(bands, run, "test_exact_match") for run in P1_RUNS}
    n_seeds = len(runs[P1_RUNS[0]])
    small = order_comparison(bands, TRAIN_SIZES[0])
    learned = [v for n in TRAIN_SIZES[1:] for o in ("forward", "reversed")
               for v in runs[run_name(o, n)].values()]
    probe = carry_probe(results_dir("problem1") / "carry_probe.json")
    lower = [v for run in probe["patching"].values() for s in run.values()
             for v in (s["carry@lower"], s["s3 carry@lower"])]
    upper = [v for run in probe["patching"].values() for s in run.values()
             for v in (s["carry@hundreds"], s["s3 carry@hundreds"])]
    models = sum(len(run) for run in probe["patching"].values())
    heads = {run: fewest_heads(m["pruning"][run]) for run in P1_HEAD_MODELS}
    k, total = small["test_exact_match"][:2]
    return (
        f"**Summary** (seeds {seed_list(sorted(runs[P1_RUNS[0]]))}, n = {n_seeds}, unless a "
        f"sentence says seed 0). With 1,000 training pairs reversed order beats forward in "
        f"{of_seeds(k, total)} on test exact match (reversed "
        f"{span(small['test_exact_match'][4].values())}, forward "
        f"{span(small['test_exact_match'][3].values())}): forward memorizes its training sums. "
        f"From 2,000 pairs on both orders learn (test exact match {span(learned)} over the "
        f"{len(learned)} runs); {larger_sizes_sentence(bands)} (answer 2). In all {models} "
        f"n4000 models, forward and reversed, the carry into the "
        f"hundreds and thousands places follows the memory vectors of the tens and ones "
        f"positions ({fmt(min(lower), 3)}{DASH}{fmt(max(lower), 3)} of the pairs follow a "
        f"patched carry there, {fmt(min(upper), 3)}{DASH}{fmt(max(upper), 3)} when the "
        f"hundreds positions are patched). Seed 0's greedy pruning keeps test exact match "
        f">= 0.95 down to {heads['forward_n4000']} of 24 heads (forward) and "
        f"{heads['reversed_n4000']} (reversed).")


def p1_answer_runs(m: dict, bands: dict) -> str:
    parts = []
    for run in P1_RUNS:
        test = seed_values(bands, run, "test_exact_match")
        steps = seed_values(bands, run, "steps_to_95")
        reached = {s: v for s, v in steps.items() if v is not None}
        if not reached:
            steps_text = f"never reaches 0.95 in {of_seeds(len(steps), len(steps))}"
        elif len(reached) == len(steps):
            steps_text = (f"steps_to_95 {min(reached.values())}{DASH}{max(reached.values())}")
        else:
            where = ", ".join(f"{v} in seed {s}" for s, v in reached.items())
            steps_text = (f"steps_to_95 {where}, never in the other "
                          f"{len(steps) - len(reached)}")
        parts.append(f"{run} test exact match {span(test.values())} (seed 0 "
                     f"{fmt(m[run]['test_exact_match'])}), {steps_text}")
    seeds = seeds_of(bands[P1_RUNS[0]]["test_exact_match"])
    widest = max(P1_RUNS, key=lambda r: bands[r]["test_exact_match"]["sd"])
    spread_sd = bands[widest]["test_exact_match"]["sd"]
    values = seed_values(bands, widest, "test_exact_match")
    best = "; seed 0 is its best" if values[0] == max(values.values()) else ""
    return (f"**Answer.** Lowest{DASH}highest over seeds {seed_list(seeds)} (n = {len(seeds)}): "
            + "; ".join(parts) + f". {widest} is the run that varies most from seed to "
            f"seed (sd {fmt(spread_sd)}){best}. The mean ± sd columns of the table below "
            "hold the five seeds; its other columns are seed 0.")


def p1_answer_order(m: dict, bands: dict) -> str:
    sentences = []
    names = METRIC_NAMES
    for n in TRAIN_SIZES:
        comparison = order_comparison(bands, n)
        bits = []
        for metric, (ahead, total, lap, f, r) in comparison.items():
            if metric == "steps_to_95":
                neither = never_both(bands, n)
                bits.append(f"{names[metric]} in {ahead} of {total}"
                            + (f" (neither order reaches 0.95 in {neither})" if neither else ""))
            else:
                bits.append(f"{names[metric]} in {ahead} of {total} (forward {span(f.values())}"
                            f", reversed {span(r.values())}; ranges "
                            f"{'overlap' if lap else 'do not overlap'})")
        sentences.append(f"n = {n}: reversed is ahead on " + "; on ".join(bits))
    verdicts = []
    for n in TRAIN_SIZES:
        comparison = order_comparison(bands, n)
        apart = [names[metric] for metric, (ahead, total, lap, _, _) in comparison.items()
                 if ahead == total and not lap]
        not_apart = [names[metric] for metric in comparison if names[metric] not in apart]
        neither = never_both(bands, n)
        if neither:
            not_apart = [f"{name} (neither order reaches 0.95 in {neither} of "
                         f"{len(seeds_of(bands[run_name('forward', n)]['steps_to_95']))} seeds)"
                         if name == names["steps_to_95"] else name for name in not_apart]
        if not not_apart:
            verdicts.append(f"n = {n}: every metric separates the orders")
        elif not apart:
            verdicts.append(f"n = {n}: no metric separates them")
        else:
            verdicts.append(f"n = {n}: reversed is ahead on {' and '.join(apart)}, but not "
                            f"in every seed on {' or '.join(not_apart)}")
    return (
        "**Answer.** Counting a metric as separating the orders only when reversed is ahead "
        "in every seed and the ranges do not overlap (for steps_to_95: ahead in every "
        "seed): " + "; ".join(verdicts) + f". So {small_sentence(bands)}; "
        f"{larger_sizes_sentence(bands)}. The counts: "
        + ". ".join(sentences) + ". Test exact match is the homework's metric; the late "
        "validation average is the mean of 10 evaluations and less tied to the one "
        "checkpoint the test scores come from. Five seeds make a non-overlap suggestive, "
        "not a test.")


def small_sentence(bands: dict) -> str:
    """What the smallest training size shows, over the seeds."""
    n = TRAIN_SIZES[0]
    comparison = order_comparison(bands, n)
    scores = [METRIC_NAMES[q] for q in ("test_exact_match", "late_val_exact_match")
              if comparison[q][0] == comparison[q][1] and not comparison[q][2]]
    ahead, total = comparison["steps_to_95"][:2]
    neither = never_both(bands, n)
    where = (f"reversed is ahead in every seed, with seed ranges that do not overlap, on "
             f"{' and '.join(scores)}" if scores else "no score separates the orders in every "
             "seed")
    return (f"with {n:,} pairs {where}, but it reaches 0.95 sooner in only {ahead} of {total} "
            f"seeds" + (f" (neither order reaches 0.95 in the other {neither})"
                        if neither == total - ahead else
                        f" (neither order reaches 0.95 in {neither})" if neither else ""))


def p1_checks_order(m: dict, bands: dict) -> str:
    """The agreement with the literature, in the seeds' counts."""
    return ("The measured order effect agrees with Lee et al. (2023) where it is clear: "
            f"{small_sentence(bands)}; {larger_sizes_sentence(bands)} (answer 2). The "
            "pipeline was checked anyway, bugs first:")


def p1_answer_know(m: dict, bands: dict) -> str:
    breakdowns = seeds_breakdowns()
    n = len(breakdowns)
    forward = [(seed, size) for seed in breakdowns for size in TRAIN_SIZES[1:]]

    def lowest(seed, run):
        acc = breakdowns[seed][run]["place_accuracy"]
        low = min(acc.values())
        return {p for p in PLACES if acc[p] == low}

    s2_low = sum("s2" in lowest(s, run_name("forward", size)) for s, size in forward)
    s2_only = sum(lowest(s, run_name("forward", size)) == {"s2"} for s, size in forward)

    def three_lowest(seed, run):
        """Whether three-carry sums have the lowest exact match, clear of the noise."""
        by = breakdowns[seed][run]["exact_match_by_carries"]
        sums = breakdowns[seed][run]["pairs_by_carries"]
        return all(clearly_below(by["3"], sums["3"], by[k], sums[k]) for k in by if k != "3")

    three = {size: sum(three_lowest(s, run_name("forward", size)) for s in breakdowns)
             for size in TRAIN_SIZES}
    reach = seed_values(bands, run_name("reversed", TRAIN_SIZES[0]), "steps_to_95")
    reached = sum(v is not None for v in reach.values())
    ahead, total = order_comparison(bands, TRAIN_SIZES[0])["test_exact_match"][:2]
    return (
        "**Answer.** In reversed order step j emits s_j = (a_j + b_j + c_{j-1}) mod 10: it "
        "needs its own column and one carry bit, and that bit follows from the column below "
        "and the digit the step receives as input, c_{j-1} = [a_{j-1} + b_{j-1} > s_{j-1}]. "
        "Every step applies the same short rule. In forward order step 0 emits s3 = c2, which "
        "depends on all six operand digits through the chain c0 -> c1 -> c2, and the digits "
        "already emitted are the higher places, which do not hold the carries the next digit "
        "needs: the network must compute the chain from the operands. The argument predicts "
        f"the ranking at n = 1000 (reversed ahead on test in {ahead} of {total} seeds), "
        f"but not that 1,000 pairs suffice for the short rule: reversed n1000 reaches "
        f"0.95 in {of_seeds(reached, n)}. "
        f"Where forward learns, its errors sit where the chain is needed, on the "
        f"{n} seeds' `breakdown.json`: the hundreds digit s2 (which needs c0 -> c1) is the "
        f"least accurate place in {s2_low} of the {len(forward)} forward n2000 and n4000 runs "
        f"({s2_only} alone, the rest tied), and sums with three carries have the lowest "
        f"exact match in {of_seeds(three[TRAIN_SIZES[2]], n)} at n = {TRAIN_SIZES[2]} and "
        f"{of_seeds(three[TRAIN_SIZES[1]], n)} at n = {TRAIN_SIZES[1]} ({NOISE_RULE}: "
        f"three-carry sums below every other carry count by more than that). Why s2 rather than "
        "s3 = c2, whose carry needs the longest chain, is not explained here.")


def column_weight(row: list[float], column: int) -> Fraction:
    """The exact weight on column i's two digits, a_i + b_i."""
    return exact(row[A[column]]) + exact(row[B[column]])


def place_of(run: str, step: int) -> int:
    return 3 - step if run.startswith("forward") else step


def p1_answer_last_layer(m: dict, bands: dict) -> str:
    maps = read_json(results_dir("problem1") / "attention_maps.json")
    parts = []
    for run in P1_HEAD_MODELS:
        last = maps[run]["decoder_cross"][-1]
        own = [column_weight(last[h][step], place_of(run, step)) for h in range(4)
               for step in range(4) if place_of(run, step) < 3]
        carry_step = next(step for step in range(4) if place_of(run, step) == 3)
        weights = [[column_weight(last[h][carry_step], c) for c in (2, 1, 0)]
                   for h in range(4)]
        hundreds = sum(w[0] == max(w) for w in weights)
        parts.append(f"{run}: at the steps for s0, s1 and s2 every head puts "
                     f"{fmt(min(own), 2)}{DASH}{fmt(max(own), 2)} of its weight on a_i + b_i; "
                     f"at s3, which has no column of its own, {hundreds} of 4 heads put the most "
                     f"weight on the hundreds column (hundreds / tens / ones per head: "
                     + ", ".join(f"h{h} " + "/".join(fmt(x, 2) for x in w)
                                 for h, w in enumerate(weights)) + ")")
    return ("**Answer** (seed 0's maps; the other seeds were trained without the head "
            "analyses). In the last decoder layer each output step reads the two digits of "
            "the place it emits, in both orders. " + "; ".join(parts) + ".")


def p1_answer_carry(m: dict, bands: dict) -> str:
    maps = read_json(results_dir("problem1") / "attention_maps.json")
    reads = {}
    for run in P1_HEAD_MODELS:
        first = maps[run]["decoder_cross"][0]
        counts = []
        for place in (1, 2, 3):
            step = next(s for s in range(4) if place_of(run, s) == place)
            counts.append(sum(max(range(3), key=lambda c: column_weight(first[h][step], c))
                              == place - 1 for h in range(4)))
        reads[run] = counts
    probe = carry_probe(results_dir("problem1") / "carry_probe.json")
    patch = probe["patching"]

    def most(run):
        places = [f"s{p}" for p, k in zip((1, 2, 3), reads[run]) if k > 2]
        return ", ".join(places) if places else "no place"

    def rng(key, runs=None):
        values = [s[key] for run, by in patch.items() if runs is None or run in runs
                  for s in by.values()]
        return f"{fmt(min(values), 3)}{DASH}{fmt(max(values), 3)}"

    seeds = sorted(next(iter(patch.values())))
    c1 = [by[s]["c1@hundreds"]["memory"] for by in probe["runs"].values() for s in by]
    return (
        "**Answer.** The maps and the measurement say different things, and the measurement "
        "decides. *The layer-0 maps (seed 0)*: the number of layer-0 cross-attention heads "
        "whose largest column weight is on the column below the place emitted (column j-1 "
        "for place j, where c_{j-1} is produced) at s1, s2 and s3 is "
        f"{', '.join(map(str, reads['reversed_n4000']))} of 4 in the reversed model and "
        f"{', '.join(map(str, reads['forward_n4000']))} of 4 in the forward model: most heads "
        f"do so at {most('reversed_n4000')} in the reversed model and at "
        f"{most('forward_n4000')} in the forward model. Column j-1 with the step's input "
        "token s_{j-1} is all that c_{j-1} needs in reversed order; in forward order it is "
        "not enough (c_{j-1} also needs c_{j-2}); at s3 the column below is the hundreds "
        "column itself. *Activation patching (both n4000 "
        f"models, seeds {seed_list(int(s) for s in seeds)})*: replacing the memory vectors "
        "of the tens and ones positions by those of a donor pair with the other c1 moves s2 "
        f"to the donor's carry in {rng('carry@lower')} of the test pairs and s3 in "
        f"{rng('s3 carry@lower')} of the pairs with a2 + b2 = 9; replacing the hundreds "
        f"positions' vectors instead moves them in {rng('carry@hundreds')} and "
        f"{rng('s3 carry@hundreds')}. So in every model, forward and reversed, the decoder "
        "takes the carry into the hundreds and thousands from the memory at the tens and ones "
        "positions, not from a2/b2's, although a linear probe reads c1 from the hundreds "
        f"positions' memory ({fmt(min(c1), 3)}{DASH}{fmt(max(c1), 3)} against "
        f"{fmt(probe['majority']['c1@hundreds'], 3)} for "
        "always guessing). The maps' suggestion that forward's s3 gets its carry through "
        "the a2/b2 vectors is therefore wrong. Whether the decoder computes the carry from "
        "the lower digits or reads one the encoder put at the lower positions, these patches "
        "do not separate.")


def p1_answer_heads(m: dict, bands: dict) -> str:
    on_val_path = results_dir("problem1") / "pruning_validation.json"
    on_val = read_json(on_val_path) if on_val_path.exists() else None
    parts, kept, costly_n = [], [], []
    for run in P1_HEAD_MODELS:
        curve = m["pruning"][run]
        fewest = int(fewest_heads(curve))
        kept.append(fewest)
        below = curve[24 - fewest + 1]["test_exact_match"]
        full = Decimal(repr(m[run]["test_exact_match"]))
        costly = sum(full - Decimal(repr(v)) > COSTLY for v in m["ablation"][run].values())
        costly_n.append(costly)
        val_text = (f" ({fewest_heads(on_val[run])} also when each removal is chosen on the "
                    f"validation split)" if on_val else "")
        parts.append(f"{run}: {fewest} heads left at test exact match "
                     f"{fmt(curve[24 - fewest]['test_exact_match'])}, {fmt(below)} with one "
                     f"fewer{val_text}; {costly} heads cost more than 0.005 when removed alone")
    return ("**Answer** (seed 0 only: the extra seeds skip the head analyses). Along the "
            "greedy pruning path: " + "; ".join(parts) + f". So in seed 0 {kept[0]} (forward) and "
            f"{kept[1]} (reversed) of the 24 heads suffice for >= 0.95, and the other "
            f"{24 - kept[0]} and {24 - kept[1]} can go. The count is an "
            "upper bound: greedy removal follows one path, and a set of fewer heads chosen "
            "another way could still reach 0.95." + (
                " The single-head table alone would undercount: fewer heads are costly alone "
                "than the path keeps." if all(c < k for c, k in zip(costly_n, kept)) else ""))


def p1_answer_survive(m: dict, bands: dict) -> str:
    parts, kept_n, costly_n = [], [], []
    for run in P1_HEAD_MODELS:
        full = Decimal(repr(m[run]["test_exact_match"]))
        order = pruning_order(m, run)
        fewest = int(fewest_heads(m["pruning"][run]))
        costly = sorted((h for h, v in m["ablation"][run].items()
                         if full - Decimal(repr(v)) > COSTLY), key=m["ablation"][run].get)
        kept = [h for h in costly if order[h] > 24 - fewest]
        kept_n.append(len(kept))
        costly_n.append(len(costly))
        early = [f"{h} ({ordinal(order[h])})" for h in costly if order[h] <= 24 - fewest]
        free_kept = [h for h, v in m["ablation"][run].items()
                     if full - Decimal(repr(v)) <= COSTLY and order[h] > 24 - fewest]
        parts.append(f"{run}: {len(kept)} of its {len(costly)} costly heads are among the "
                     f"{fewest} that remain at the last point >= 0.95"
                     + (f"; removed before it: {', '.join(early)}" if early else "")
                     + f"; {len(free_kept)} of those {fewest} cost at most 0.005 alone")
    share = sum(kept_n) / sum(costly_n)
    word = "Mostly yes" if share >= 0.75 else ("Partly" if share >= 0.5 else "Mostly no")
    return (f"**Answer** (seed 0 only). {word}: " + "; ".join(parts) + ". A head that is "
            "cheap alone can become necessary once its copies are gone, and a costly one can "
            "go early once others take over. Redundancy between heads is the hypothesis that "
            "would explain both; it was not tested (removing pairs of heads would test it).")


TABLES.update({"p1_summary": p1_summary, "p1_answer_runs": p1_answer_runs,
               "p1_answer_order": p1_answer_order, "p1_answer_know": p1_answer_know,
               "p1_answer_last_layer": p1_answer_last_layer,
               "p1_answer_carry": p1_answer_carry, "p1_answer_heads": p1_answer_heads,
               "p1_answer_survive": p1_answer_survive, "p1_checks_order": p1_checks_order})
