"""Problem 1's report tables: each renders one marked table of problem1/REPORT.md from
problem1/results/."""

import statistics
from decimal import Decimal

from problem1.config import ANALYSED, RUNS, TRAIN_SIZES, run_name
from provided.common import results_dir
from provided.results import read_json
from tools.bands import LATE_POINTS
from tools.tables.style import (
    DASH,
    band_of,
    fmt,
    mean_sd,
    ordinal,
    per_seed,
    seed_list,
    seeds_of,
    seeds_sentence,
    table,
)

P1_RUNS = list(RUNS)
P1_HEAD_MODELS = list(ANALYSED)
COSTLY = Decimal("0.005")  # a head is costly when removing it alone costs more than this


def p1_log(run: str) -> list[dict]:
    return read_json(results_dir("problem1") / f"training_log_{run}.json")["log"]


def late_average(log: list[dict]) -> float:
    return statistics.fmean(point["val_exact_match"] for point in log[-LATE_POINTS:])


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
        return "Not measured yet: `make pruning-bias` writes `results/pruning_validation.json`."
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
        gaps = [a["test_exact_match"] - b["test_exact_match"]
                for a, b in zip(m["pruning"][run], chosen_on_val[run])]
        summary.append(
            f"{run}: fewest heads with test exact match >= 0.95 {fewest_heads(m['pruning'][run])}"
            f" chosen on test, {fewest_heads(chosen_on_val[run])} chosen on validation; test "
            f"minus validation choice {fmt(statistics.fmean(gaps), 4)} on average over the 25 "
            f"points (largest {fmt(max(gaps), 4)}, smallest {fmt(min(gaps), 4)})")
    return text + "\n\nEvery exact match here is on test. " + "; ".join(summary) + "."


def p1_carry_probe(m: dict, bands: dict) -> str:
    path = results_dir("problem1") / "carry_probe.json"
    if not path.exists():
        return "Not measured yet: `make carry-probe` writes `results/carry_probe.json`."
    probe = read_json(path)
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
