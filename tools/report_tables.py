"""The reports' tables, generated from the committed JSON.

    python -m tools.report_tables            rewrite every generated table in the reports
    python -m tools.report_tables --check    exit 1, naming each table that differs

Each problemN/REPORT.md holds its generated tables between two marker lines:

    <!-- table: NAME -->
    ...
    <!-- end table -->

and this script owns the text between them: it renders NAME from problemN/results/
(metrics.json, the training logs, breakdown.json, attention_maps.json and, when it exists,
reference_bands.json from `python -m tools.bands`) and writes it in place, atomically. Seed 0
is the committed run; a column or sentence with "mean ± sd" or "k of n seeds" appears only
when reference_bands.json holds more than one seed of that run, so after `make seeds`

    python -m tools.bands && python -m tools.report_tables

refreshes every table and every seed count in the reports. Numbers are rounded half up from
the JSON's decimal text: 4 decimals in Problems 1 and 2, 3 in Problem 3 (the reports' style).

Instructors only (tools/): the reports are not part of the homework.
"""

import re
import statistics
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

from provided.common import (
    REPO_ROOT,
    ArgumentParser,
    atomic_write_text,
    read_json,
    results_dir,
    script,
)
from tools.bands import LATE_POINTS, P2_BUCKETS, seed_dirs

MARKER = re.compile(r"^<!-- table: (?P<name>[\w-]+) -->\n(?P<body>.*?)^<!-- end table -->$",
                    re.M | re.S)
DASH = "–"  # en dash: ranges and missing values


# ----------------------------------------------------------------------------- formatting
def fmt(value, places: int = 4) -> str:
    """value rounded half up to `places` decimals from its shortest decimal text (0.64175 ->
    0.6418, as a reader rounds the JSON), or a dash for None."""
    if value is None:
        return DASH
    quantum = Decimal(1).scaleb(-places)
    return str(Decimal(repr(float(value))).quantize(quantum, rounding=ROUND_HALF_UP))


def fmt_int(value) -> str:
    return DASH if value is None else str(int(Decimal(repr(float(value))).quantize(
        Decimal(1), rounding=ROUND_HALF_UP)))


def mean_sd(band: dict | None, places: int = 4, integer: bool = False) -> str:
    """'mean ± sd (n)' of a band; 'value (1)' for a single seed; a dash for none."""
    if not band or not band["n_seeds"]:
        return DASH
    f = fmt_int if integer else (lambda v: fmt(v, places))
    if band["n_seeds"] == 1:
        return f"{f(band['mean'])} (1)"
    return f"{f(band['mean'])} ± {f(band['sd'])} ({band['n_seeds']})"


def ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def seed_list(seeds) -> str:
    seeds = list(seeds)
    if len(seeds) > 2 and seeds == list(range(seeds[0], seeds[-1] + 1)):
        return f"{seeds[0]}{DASH}{seeds[-1]}"
    return ", ".join(str(s) for s in seeds)


def table(header: list[str], rows: list[list[str]], align: str) -> str:
    """A markdown table; align holds 'l' or 'r' per column."""
    rule = ["---" if a == "l" else "---:" for a in align]
    lines = [header, rule, *rows]
    return "\n".join("| " + " | ".join(line) + " |" for line in lines)


# --------------------------------------------------------------------------------- bands
def load_bands(problem: str) -> dict:
    """reference_bands.json of a problem, {} if it does not exist yet."""
    path = results_dir(problem) / "reference_bands.json"
    return read_json(path) if path.exists() else {}


def band_of(bands: dict, run: str, quantity: str) -> dict | None:
    """The band, or None unless more than one seed stands behind the run (seed 0 alone is
    already the seed-0 column)."""
    band = bands.get(run, {}).get(quantity)
    if band is None:
        return None
    seeds = set(band["seeds"]) | set(band.get("missing", []))
    return band if len(seeds) > 1 else None


def seeds_of(band: dict) -> list[int]:
    return sorted(set(band["seeds"]) | set(band.get("missing", [])))


def per_seed(band: dict) -> dict:
    """{seed: value} of a band (the values of the seeds that have one)."""
    return dict(zip(band["seeds"], band["values"]))


def seeds_sentence(bands: dict, quantity: str, runs: list[str], what: str,
                   noun: str = "run") -> str:
    """The one-line status of the bands: which seeds stand behind which runs."""
    path = "`results/reference_bands.json`"
    groups = {}
    for run in runs:
        band = bands.get(run, {}).get(quantity)
        seeds = tuple(seeds_of(band)) if band else (0,)
        groups.setdefault(seeds, []).append(run)
    if set(groups) <= {(0,)}:
        return (f"Seeds now: {path} holds no seed beyond seed 0 yet, so every number in this "
                f"report is seed 0 alone ({what}).")
    parts = []
    for seeds, members in sorted(groups.items(), key=lambda g: (-len(g[0]), g[1])):
        if len(members) == len(runs):
            parts.append(f"seeds {seed_list(seeds)} (n = {len(seeds)}) for every {noun}")
        elif seeds == (0,):
            parts.append(f"seed 0 alone for the other {len(members)} {noun}s")
        else:
            parts.append(f"seeds {seed_list(seeds)} (n = {len(seeds)}) for "
                         + ", ".join(members))
    return f"Seeds now: {path} holds " + "; ".join(parts) + "."


# ------------------------------------------------------------------------------ problem 1
P1_RUNS = [f"{order}_n{n}" for order in ("forward", "reversed") for n in (1000, 2000, 4000)]
P1_HEAD_MODELS = ("forward_n4000", "reversed_n4000")
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
    for n in (1000, 2000, 4000):
        forward, reversed_ = f"forward_n{n}", f"reversed_n{n}"
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


# ------------------------------------------------------------------------------ problem 2
P2_SCHEMES = ("none", "learned", "sinusoidal", "rotary")
P2_QUANTITIES = ("in_range", "beyond", *[f"bucket_{b}" for b in P2_BUCKETS])


def p2_seeds(m: dict, bands: dict) -> str:
    return seeds_sentence(bands, "beyond", list(P2_SCHEMES), "one training run per scheme",
                          "scheme")


def p2_accuracy(m: dict, bands: dict) -> str:
    names = [b.replace("-", DASH) for b in P2_BUCKETS]
    header = ["scheme", "in_range", "beyond", *names]
    rows = [[scheme, fmt(m[scheme]["in_range"]), fmt(m[scheme]["beyond"]),
             *[fmt(v) for v in m[scheme]["beyond_buckets"]]] for scheme in P2_SCHEMES]
    text = "Seed 0:\n\n" + table(header, rows, "lrrrrrr")
    seeded = [s for s in P2_SCHEMES if band_of(bands, s, "beyond")]
    if seeded:
        rows = [[scheme, *[mean_sd(band_of(bands, scheme, q)) for q in P2_QUANTITIES]]
                for scheme in seeded]
        text += ("\n\nMean ± sd (n seeds), from `results/reference_bands.json`:\n\n"
                 + table(header, rows, "lrrrrrr"))
    return text


def p2_sinusoidal_seeds(m: dict, bands: dict) -> str:
    """In how many seeds the sinusoidal buckets beyond 64 are not monotone."""
    def monotone(values):
        pairs = list(zip(values, values[1:]))
        return all(a >= b for a, b in pairs) or all(a <= b for a, b in pairs)

    seed0 = m["sinusoidal"]["beyond_buckets"]
    bucket_bands = [band_of(bands, "sinusoidal", f"bucket_{b}") for b in P2_BUCKETS]
    if None in bucket_bands:
        shape = "not monotone" if not monotone(seed0) else "monotone"
        return (f"Seeds: only seed 0 so far, whose sinusoidal buckets beyond 64 are {shape} "
                f"({', '.join(fmt(v, 2) for v in seed0)}); one seed cannot say whether the "
                "shape belongs to the encoding or to the run.")
    values = [per_seed(b) for b in bucket_bands]
    seeds = sorted(set.intersection(*[set(v) for v in values]))
    curves = {s: [v[s] for v in values] for s in seeds}
    bumpy = [s for s in seeds if not monotone(curves[s])]
    listing = "; ".join(f"seed {s}: {', '.join(fmt(v, 2) for v in curves[s])}" for s in seeds)
    return (f"Seeds: the sinusoidal buckets beyond 64 are not monotone in {len(bumpy)} of "
            f"{len(seeds)} seeds ({listing}).")


def p2_long(m: dict, bands: dict) -> str:
    schemes = [s for s in P2_SCHEMES if "long_sequences" in m[s]]
    first = m[schemes[0]]["long_sequences"]
    width = first["length"] // len(first["buckets"])
    header = ["positions", *schemes]
    rows = []
    for i in range(len(first["buckets"])):
        label = f"{i * width}{DASH}{(i + 1) * width - 1}"
        rows.append([label, *[fmt(m[s]["long_sequences"]["buckets"][i]) for s in schemes]])
    return table(header, rows, "l" + "r" * len(schemes))


# ------------------------------------------------------------------------------ problem 3
P3_LRS = (0.001, 0.01, 0.03)
P3_COLUMNS = [("pre", 0), ("pre", 500), ("post", 0), ("post", 500)]


def lr_text(lr: float) -> str:
    return {0.001: "1e-3", 0.01: "1e-2", 0.03: "3e-2"}.get(lr, repr(lr))


def sweep_by_cell(m: dict) -> dict:
    return {(e["norm"], e["lr"], e["warmup"]): e for e in m["sweep"]}


def cell_name(norm: str, lr: float, warmup: int) -> str:
    return f"{norm}_lr{lr}_w{warmup}"


def seed_count(bands: dict, cell: str) -> str | None:
    """'trains in k of n seeds (mean ± sd)' for a cell with more than one seed, else None."""
    band = band_of(bands, cell, "trains")
    if band is None:
        return None
    k, n = int(sum(band["values"])), band["n_seeds"]
    loss = bands[cell].get("final_val_loss")
    if not loss or not loss["n_seeds"]:
        return f"trains in {k} of {n} seeds"
    spread = (f"{fmt(loss['mean'], 3)} ± {fmt(loss['sd'], 3)}" if loss["n_seeds"] > 1
              else fmt(loss["mean"], 3))
    finite = "" if loss["n_seeds"] == n else f" over the {loss['n_seeds']} finite"
    return f"trains in {k} of {n} seeds (final loss {spread}{finite})"


def verdict(entry: dict) -> str:
    return "trains" if entry["trains"] else "**fails**"


def p3_seeds(m: dict, bands: dict) -> str:
    cells = [cell_name(e["norm"], e["lr"], e["warmup"]) for e in m["sweep"]]
    return seeds_sentence(bands, "trains", cells, "one training run per sweep cell", "cell")


def p3_sweep(m: dict, bands: dict) -> str:
    cells = sweep_by_cell(m)
    header = ["peak lr", *[f"{norm}, warmup {w}" for norm, w in P3_COLUMNS]]
    rows = []
    for lr in P3_LRS:
        row = [repr(lr)]
        for norm, warmup in P3_COLUMNS:
            entry = cells[(norm, lr, warmup)]
            text = f"{fmt(entry['final_val_loss'], 3)}, {verdict(entry)}"
            count = seed_count(bands, cell_name(norm, lr, warmup))
            row.append(text if count is None else f"{text}; {count}")
        rows.append(row)
    return table(header, rows, "rllll")


def p3_largest_lr(m: dict, bands: dict) -> str:
    cells = sweep_by_cell(m)
    rows = []
    for norm in ("pre", "post"):
        row = [f"{norm}-LN"]
        for warmup in (0, 500):
            trains = [lr for lr in P3_LRS if cells[(norm, lr, warmup)]["trains"]]
            if not trains:
                row.append("none")
                continue
            top = max(trains)
            text = f"{lr_text(top)} ({fmt(cells[(norm, top, warmup)]['final_val_loss'], 3)})"
            fails = [lr for lr in P3_LRS if lr > top]
            if fails:
                text += "; fails at " + " and ".join(
                    f"{lr_text(lr)} ({fmt(cells[(norm, lr, warmup)]['final_val_loss'], 3)})"
                    for lr in fails)
            row.append(text)
        rows.append(row)
    text = table(["", "warmup 0", "warmup 500"], rows, "lll")
    counts = []
    for norm, lr, warmup in cells:
        count = seed_count(bands, cell_name(norm, lr, warmup))
        if count is not None:
            counts.append(f"{norm}, lr {lr_text(lr)}, warmup {warmup}: {count}")
    if counts:
        text += ("\n\nSeed counts of the seeded cells (`results/reference_bands.json`): "
                 + "; ".join(counts) + ". Every other cell is seed 0 alone.")
    else:
        text += ("\n\nSeeds: none beyond seed 0 yet, so each verdict, and with it each entry "
                 "of this table, rests on one training run.")
    return text


def p3_head_grad(m: dict, bands: dict) -> str:
    folder = results_dir("problem3")
    order = sorted(m["sweep"], key=lambda e: (e["norm"] != "pre", e["warmup"], e["lr"]))
    multi = any(band_of(bands, cell_name(e["norm"], e["lr"], e["warmup"]),
                        "head_grad_norm_at_100") for e in order)
    header = ["run", "mean", "max", "step 100", "final validation loss", "verdict"]
    align = "lrrrrl"
    if multi:
        header.append("step 100 (final validation loss) per seed, seeds in order")
        align += "l"
    rows = []
    for e in order:
        log = read_json(folder / f"training_log_{e['run']}.json")["log"]
        at_100 = next(p["head_grad_norm"] for p in log if p["step"] == 100)
        row = [e["run"], fmt(e["head_grad_norm_mean_100"], 3),
               fmt(e["head_grad_norm_max_100"], 3), fmt(at_100, 3),
               fmt(e["final_val_loss"], 3), verdict(e)]
        if multi:
            cell = cell_name(e["norm"], e["lr"], e["warmup"])
            band = band_of(bands, cell, "head_grad_norm_at_100")
            if band is None:
                row.append(DASH)
            else:
                norms = per_seed(band)
                losses = per_seed(bands[cell]["final_val_loss"])
                row.append(", ".join(f"{fmt(norms.get(seed), 3)} ({fmt(losses.get(seed), 3)})"
                                     for seed in seeds_of(band)))
        rows.append(row)
    return table(header, rows, align)


def p3_step100_cut(m: dict, bands: dict) -> str:
    """Whether the step-100 head gradient norm separates failing from training runs, over
    every run the bands hold (each cell's seed 0 and the extra seeds of the seeded cells)."""
    runs = []  # (step-100 value, trains, cell, seed)
    for cell, quantities in sorted(bands.items()):
        if "head_grad_norm_at_100" not in quantities:
            continue
        trains = per_seed(quantities["trains"])
        for seed, value in per_seed(quantities["head_grad_norm_at_100"]).items():
            runs.append((value, bool(trains[seed]), cell, seed))
    if not runs:
        return "No bands yet: run `python -m tools.bands`."
    runs.sort()
    failing = [r for r in runs if not r[1]]
    training = [r for r in runs if r[1]]
    # the best cut "fails below it": errors = training runs below + failing runs above
    errors = min(sum(r[1] for r in runs[:i]) + sum(not r[1] for r in runs[i:])
                 for i in range(len(runs) + 1))

    def listed(group):
        return ", ".join(f"{cell} seed {seed} {fmt(value, 3)}" for value, _, cell, seed in group)

    return (f"Step-100 head gradient norm over all {len(runs)} runs in "
            f"`results/reference_bands.json`: the {len(failing)} failing runs have "
            f"{fmt(failing[0][0], 3)}–{fmt(failing[-1][0], 3)} ({listed(failing)}); the "
            f"{len(training)} training runs {fmt(training[0][0], 3)}–"
            f"{fmt(training[-1][0], 3)}, the five smallest {listed(training[:5])}. The best "
            f"single cut (fails below it) misclassifies {errors} of {len(runs)} runs.")


def p3_samples10k(m: dict, bands: dict) -> str:
    """The long run's final model at 10,000 samples (tools/samples10k.py), if measured."""
    path = results_dir("problem3") / "metrics_n10000.json"
    if not path.exists():
        return "Not measured yet: `make samples10k` writes `results/metrics_n10000.json`."
    large = read_json(path)
    every, blocks = large["all"], large["blocks_of_1000"]
    valid = round(every["validity"] * every["num_samples"])
    distinct = round(every["uniqueness"] * valid)

    def spread(q):
        values = [b[q] for b in blocks]
        return f"{fmt(min(values), 3)}–{fmt(max(values), 3)}"

    return (f"10,000 samples of `{large['run']}` at T = {large['temperature']:g} "
            f"(`results/metrics_n10000.json`; the first 1,000 are the samples above): "
            f"well-formed {fmt(every['well_formed'], 3)}, validity {fmt(every['validity'], 3)}, "
            f"uniqueness {fmt(every['uniqueness'], 4)}, i.e. {distinct:,} distinct "
            f"among {valid:,} valid, novelty {fmt(every['novelty'], 3)}. Over its ten blocks of "
            f"1,000: validity {spread('validity')}, uniqueness {spread('uniqueness')}, "
            f"novelty {spread('novelty')}.")


def p3_failing_seeds(m: dict, bands: dict) -> str:
    """Per seed of each seeded cell that fails in some seed: the last logged training loss
    and the final validation loss, from the training logs."""
    folders = seed_dirs("problem3")
    lines = []
    for cell, quantities in sorted(bands.items()):
        trains = quantities.get("trains")
        if not trains or trains["n_seeds"] < 2 or min(trains["values"]) == 1.0:
            continue
        parts = []
        for seed in seeds_of(trains):
            log = read_json(folders[seed] / f"training_log_{cell}_s1500.json")
            parts.append(f"seed {seed} {fmt(log['log'][-1]['train_loss'], 3)} / "
                         f"{fmt(log['final_val_loss'], 3)}")
        lines.append(f"{cell}, last training loss / final validation loss: " + "; ".join(parts))
    return ("\n\n".join(lines) + ".") if lines else "No seeded cell fails in any seed."


def p3_by_step(m: dict, bands: dict) -> str:
    main = m["main"]
    log = read_json(results_dir("problem3") / f"training_log_{main['run']}.json")
    val = {point["step"]: point["val_loss"] for point in log["val"]}
    rows = [[str(e["step"]), fmt(val.get(e["step"]), 3), fmt(e["well_formed"], 3),
             fmt(e["validity"], 3), fmt(e["uniqueness"], 3), fmt(e["novelty"], 3)]
            for e in main["by_step"]]
    return table(["step", "validation loss", "well-formed", "RDKit-valid",
                  "unique (of valid)", "novel (of unique)"], rows, "rrrrrr")


def outcome_table(entries: list[dict], first: str) -> str:
    rows = [[e["bin"].replace("-", DASH), str(e["count"]), fmt(e["valid"], 3),
             fmt(e["well_formed_invalid"], 3), fmt(e["ill_formed"], 3)] for e in entries]
    return table([first, "n", "valid", "well-formed, invalid", "ill-formed"], rows, "lrrrr")


def p3_by_length(m: dict, bands: dict) -> str:
    return outcome_table(m["main"]["by_length"], "length (tokens)")


def p3_by_span(m: dict, bands: dict) -> str:
    return outcome_table(m["main"]["by_span"], "longest closed ring span (tokens)")


def p3_by_temperature(m: dict, bands: dict) -> str:
    rows = []
    for e in m["main"]["by_temperature"]:
        per_1000 = (Decimal(repr(e["validity"])) * Decimal(repr(e["uniqueness"]))
                    * Decimal(repr(e["novelty"])) * 1000)
        rows.append([repr(e["temperature"]), fmt(e["well_formed"], 3), fmt(e["validity"], 3),
                     fmt(e["uniqueness"], 3), fmt(e["novelty"], 3), str(int(per_1000))])
    return table(["T", "well-formed", "valid", "unique (of valid)", "novel (of unique)",
                  "novel valid molecules per 1,000 samples"], rows, "rrrrrr")


MECHANISM_STEPS = (1, 10, 50, 100, 200)


def p3_mechanism(m: dict, bands: dict) -> str:
    """tools/mechanism.py's measurement, if it has been run."""
    path = results_dir("problem3") / "mechanism.json"
    if not path.exists():
        return ("Not measured: `results/mechanism.json` does not exist (`python -m "
                "tools.mechanism` writes it).")
    mechanism = read_json(path)
    rows = []
    for run in mechanism["runs"]:
        for record in run["records"]:
            if record["step"] not in MECHANISM_STEPS:
                continue
            ratios, ln = record["update_ratio"], list(record["ln_input_rms"].values())
            residual = record["residual_rms"]
            rows.append([f"{run['norm']}-LN, lr {lr_text(run['lr'])}", str(record["step"]),
                         fmt(record["loss"], 3), fmt(record["total_grad_norm"], 3),
                         f"{fmt(min(ratios))}{DASH}{fmt(max(ratios))}",
                         f"{fmt(min(ln), 2)}{DASH}{fmt(max(ln), 2)}",
                         f"{fmt(min(residual), 2)}{DASH}{fmt(max(residual), 2)}"])
    return table(["setting (warmup 0)", "step", "loss (this batch)", "total gradient norm",
                  "update ratio, 4 blocks", "LayerNorm input RMS, 8 LayerNorms",
                  "block output RMS, 4 blocks"], rows, "lrrrrrr")


# ----------------------------------------------------------------------------- the files
TABLES = {
    "problem1": {"p1_seeds": p1_seeds, "p1_runs": p1_runs, "p1_order_seeds": p1_order_seeds,
                 "p1_breakdown": p1_breakdown, "p1_ablation": p1_ablation,
                 "p1_pruning": p1_pruning, "p1_pruning_bias": p1_pruning_bias},
    "problem2": {"p2_seeds": p2_seeds, "p2_accuracy": p2_accuracy,
                 "p2_sinusoidal_seeds": p2_sinusoidal_seeds, "p2_long": p2_long},
    "problem3": {"p3_seeds": p3_seeds, "p3_sweep": p3_sweep, "p3_largest_lr": p3_largest_lr,
                 "p3_head_grad": p3_head_grad, "p3_step100_cut": p3_step100_cut,
                 "p3_failing_seeds": p3_failing_seeds,
                 "p3_samples10k": p3_samples10k, "p3_mechanism": p3_mechanism,
                 "p3_by_step": p3_by_step,
                 "p3_by_length": p3_by_length, "p3_by_span": p3_by_span,
                 "p3_by_temperature": p3_by_temperature},
}


def report_path(problem: str) -> Path:
    return REPO_ROOT / problem / "REPORT.md"


def render(problem: str) -> dict:
    """{table name: markdown} of one problem, from its JSON."""
    metrics = read_json(results_dir(problem) / "metrics.json")
    bands = load_bands(problem)
    return {name: make(metrics, bands) for name, make in TABLES[problem].items()}


def fill(text: str, tables: dict) -> tuple[str, list[str], list[str]]:
    """text with each marked table replaced by its rendering: (new text, names whose text
    changed, problems: names in tables without markers, markers with no table, repeats)."""
    changed, found, problems = [], [], []

    def replace(match: re.Match) -> str:
        name = match["name"]
        found.append(name)
        if name not in tables:
            problems.append(f"table {name}: marked in the report but not generated")
            return match[0]
        body = tables[name].strip("\n") + "\n"
        if body != match["body"]:
            changed.append(name)
        return f"<!-- table: {name} -->\n{body}<!-- end table -->"

    new = MARKER.sub(replace, text)
    problems += [f"table {name}: generated but has no markers in the report"
                 for name in tables if name not in found]
    problems += [f"table {name}: marked {found.count(name)} times"
                 for name in sorted(set(found)) if found.count(name) > 1]
    return new, changed, problems


def differences(problems=None) -> list[str]:
    """One line per table that differs from its JSON (or is missing), over the reports."""
    lines = []
    for problem in problems or TABLES:
        path = report_path(problem)
        _, changed, faults = fill(path.read_text(), render(problem))
        rel = path.relative_to(REPO_ROOT)
        lines += [f"{rel}: table {name} differs from the JSON" for name in changed]
        lines += [f"{rel}: {fault}" for fault in faults]
    return lines


@script
def main(argv=None) -> int:
    parser = ArgumentParser(__doc__)
    parser.add_argument("problems", nargs="*", metavar="problemN",
                        help=f"any of {', '.join(TABLES)} (default: all three)")
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 and name each table that differs")
    args = parser.parse_args(argv)
    for problem in args.problems:
        if problem not in TABLES:
            parser.error(f"unknown problem {problem!r}: choose from {', '.join(TABLES)}")
    if args.check:
        lines = differences(args.problems)
        for line in lines:
            print(line)
        if lines:
            print("run `python -m tools.report_tables` to regenerate the tables")
            return 1
        print("every generated table matches its JSON")
        return 0
    status = 0
    for problem in args.problems or TABLES:
        path = report_path(problem)
        text = path.read_text()
        new, changed, faults = fill(text, render(problem))
        for fault in faults:
            print(f"{path.relative_to(REPO_ROOT)}: {fault}")
            status = 1
        if new != text:
            atomic_write_text(path, new)
        print(f"{path.relative_to(REPO_ROOT)}: {len(changed)} table(s) rewritten"
              + (f" ({', '.join(changed)})" if changed else ""))
    return status


if __name__ == "__main__":
    raise SystemExit(main())
