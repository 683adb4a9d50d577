"""Problem 3's report tables: each renders one marked table of course/reports/problem3.md from
problem3/results/."""

import math
from fractions import Fraction

from course.grading.bands import seed_dirs
from course.tools.tables.style import (
    DASH,
    NOISE_RULE,
    band_of,
    beyond_noise,
    binomial_variance,
    exact,
    fmt,
    half_up,
    mean,
    median,
    per_seed,
    seed_list,
    seeds_of,
    seeds_sentence,
    span,
    table,
)
from problem3.config import SWEEP, SWEEP_LRS, SWEEP_WARMUPS, TRAIN_THRESHOLD, cell_name
from problem3.model import NORMS
from provided.common import results_dir
from provided.results import read_json

P3_LRS = SWEEP_LRS
P3_COLUMNS = [(norm, warmup) for norm in NORMS for warmup in SWEEP_WARMUPS]
EARLY_STEPS = (50, 100)  # problem3.evaluate.EARLY_STEPS: the head_grad_norm_*_100 log points


def early_head_norms(log: dict) -> list[Fraction]:
    """The head gradient norms logged at EARLY_STEPS, exact."""
    return [exact(p["head_grad_norm"]) for p in log["log"] if p["step"] in EARLY_STEPS]


def head_mean(log: dict) -> Fraction:
    """head_grad_norm_mean_100 in exact arithmetic from the logged values (metrics.json holds
    numpy's float mean of the same two values)."""
    return mean(early_head_norms(log))


def lr_text(lr: float) -> str:
    return {0.001: "1e-3", 0.01: "1e-2", 0.03: "3e-2"}.get(lr, repr(lr))


def sweep_by_cell(m: dict) -> dict:
    return {(e["norm"], e["lr"], e["warmup"]): e for e in m["sweep"]}


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
        rest = "" if len(counts) == len(cells) else " Every other cell is seed 0 alone."
        text += ("\n\nSeed counts of the seeded cells (`results/reference_bands.json`): "
                 + "; ".join(counts) + "." + rest)
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
        run_log = read_json(folder / f"training_log_{e['run']}.json")
        at_100 = next(p["head_grad_norm"] for p in run_log["log"] if p["step"] == 100)
        row = [e["run"], fmt(head_mean(run_log), 3),
               fmt(max(early_head_norms(run_log)), 3), fmt(at_100, 3),
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
        return "No bands yet: run `python -m course.grading.bands`."
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
    """The long run's final model at 10,000 samples (course/tools/samples10k.py), if measured."""
    path = results_dir("problem3") / "metrics_n10000.json"
    if not path.exists():
        return ("Not measured yet: `make samples10k` writes "
                "`results/metrics_n10000.json`.")
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
    run_of_cell = {cell_name(o["norm"], o["lr"], o["warmup"]): run for run, o in SWEEP.items()}
    lines = []
    for cell, quantities in sorted(bands.items()):
        trains = quantities.get("trains")
        if not trains or trains["n_seeds"] < 2 or min(trains["values"]) == 1.0:
            continue
        parts = []
        for seed in seeds_of(trains):
            log = read_json(folders[seed] / f"training_log_{run_of_cell[cell]}.json")
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
        rows.append([repr(e["temperature"]), fmt(e["well_formed"], 3), fmt(e["validity"], 3),
                     fmt(e["uniqueness"], 3), fmt(e["novelty"], 3),
                     str(novel_valid_per_1000(e))])
    return table(["T", "well-formed", "valid", "unique (of valid)", "novel (of unique)",
                  "novel valid molecules per 1,000 samples"], rows, "rrrrrr")


def main_by_seed() -> dict[int, dict]:
    """{seed: the 'main' entry of that seed's metrics.json} for every seed folder whose
    metrics.json has evaluated the long run."""
    found = {}
    for seed, folder in seed_dirs("problem3").items():
        path = folder / "metrics.json"
        main = read_json(path).get("main") if path.exists() else None
        if main is not None:
            found[seed] = main
    return found


def count_of(mains: dict, holds) -> str:
    """'k of n seeds' for which holds(main) is true."""
    return f"{sum(bool(holds(main)) for main in mains.values())} of {len(mains)} seeds"


def rises(values: list[float]) -> bool:
    return all(b > a for a, b in zip(values, values[1:]))


def p3_main_seeds(m: dict, bands: dict) -> str:
    """The long run of every seed that has one: validation loss, well-formed and valid at
    each checkpoint, uniqueness and novelty of the final model, and how many seeds share
    seed 0's shape."""
    mains = main_by_seed()
    folders = seed_dirs("problem3")
    rows = []
    for seed, main in mains.items():
        log = read_json(folders[seed] / f"training_log_{main['run']}.json")
        val = {point["step"]: point["val_loss"] for point in log["val"]}
        by_step = main["by_step"]
        rows.append([str(seed), f"{fmt(val.get(by_step[0]['step']), 3)} → "
                     f"{fmt(val.get(by_step[-1]['step']), 3)}",
                     " → ".join(fmt(e["well_formed"], 3) for e in by_step),
                     " → ".join(fmt(e["validity"], 3) for e in by_step),
                     fmt(by_step[-1]["uniqueness"], 3), fmt(by_step[-1]["novelty"], 3)])
    steps = "/".join(str(e["step"]) for e in m["main"]["by_step"])
    text = table(["seed", "validation loss", f"well-formed at {steps}",
                  f"valid at {steps}", "unique", "novel"], rows, "lrrrrr")

    def gap_falls(main):
        gaps = [exact(e["well_formed"]) - exact(e["validity"]) for e in main["by_step"]]
        return gaps[-1] < gaps[0]
    return (text + f"\n\nThe long run of each seed (1,000 samples at T = 1 per checkpoint; "
            f"unique and novel of the final model). Validity rises at every checkpoint in "
            f"{count_of(mains, lambda e: rises([x['validity'] for x in e['by_step']]))}, "
            f"well-formedness in "
            f"{count_of(mains, lambda e: rises([x['well_formed'] for x in e['by_step']]))}; "
            f"the well-formed-but-invalid fraction is lower at the last checkpoint than at "
            f"the first in {count_of(mains, gap_falls)}.")


def p3_outcomes_seeds(m: dict, bands: dict) -> str:
    """Per seed: the final model's outcomes at T = 1 and why RDKit rejects well-formed
    samples."""
    mains = main_by_seed()
    reasons = sorted({r for main in mains.values() for r in main["well_formed_invalid_reasons"]},
                     key=lambda r: -sum(main["well_formed_invalid_reasons"].get(r, 0)
                                        for main in mains.values()))
    rows = [[str(seed), *(fmt(main["outcomes"][o], 3) for o in
                          ("valid", "well_formed_invalid", "ill_formed")),
             *(str(main["well_formed_invalid_reasons"].get(r, 0)) for r in reasons)]
            for seed, main in mains.items()]
    return (table(["seed", "valid", "well-formed, invalid", "ill-formed",
                   *[f"{r} (count)" for r in reasons]], rows, "l" + "r" * (3 + len(reasons)))
            + "\n\nThe final model of each seed, 1,000 samples at T = 1 (`main.outcomes`, "
            "`main.well_formed_invalid_reasons`).")


def p3_bins_seeds(m: dict, bands: dict) -> str:
    """Per seed: the valid fraction in each length bin and each ring-span bin."""
    mains = main_by_seed()
    lines = []
    for key, what in (("by_length", "length (tokens)"),
                      ("by_span", "longest closed ring span (tokens)")):
        bins = [e["bin"] for e in m["main"][key]]
        rows = [[str(seed), *(f"{fmt(e['valid'], 2)} ({e['count']})" for e in main[key])]
                for seed, main in mains.items()]
        lines.append(table([f"seed: valid (n) by {what}",
                            *[b.replace("-", DASH) for b in bins]], rows, "l" + "r" * len(bins)))

    def falls(main, key):
        valid = [e["valid"] for e in main[key] if e["count"]]
        return valid[-1] < valid[0]
    return ("\n\n".join(lines) + "\n\nThe last bin is less often valid than the first in "
            f"{count_of(mains, lambda e: falls(e, 'by_length'))} by length and "
            f"{count_of(mains, lambda e: falls(e, 'by_span'))} by ring span.")


def counts_of(entry: dict) -> dict:
    """The counts behind one sample_metrics entry, recovered from its fractions: each
    fraction is a count over a count of the same entry (validity = valid / samples,
    uniqueness = distinct / valid, novelty = novel / distinct), so each count is the
    nearest integer of fraction x denominator; a product of rounded fractions is never
    used."""
    samples = entry["num_samples"]
    valid = round(entry["validity"] * samples)
    distinct = round(entry["uniqueness"] * valid) if entry["uniqueness"] is not None else 0
    novel = round(entry["novelty"] * distinct) if entry["novelty"] is not None else 0
    return {"samples": samples, "valid": valid, "distinct": distinct, "novel": novel}


def novel_valid_per_1000(entry: dict) -> int:
    """Distinct valid molecules absent from the training set, per 1,000 samples, from the
    counts (exact for the 1,000-sample entries of metrics.json)."""
    counts = counts_of(entry)
    return half_up(Fraction(counts["novel"] * 1000, counts["samples"]))


def p3_temperature_seeds(m: dict, bands: dict) -> str:
    """Per seed: validity, novelty and novel valid molecules per 1,000 samples at each
    temperature, and at which temperature the last is largest."""
    mains = main_by_seed()
    temps = [e["temperature"] for e in m["main"]["by_temperature"]]
    rows = [[str(seed), *(" / ".join(f(e) for e in main["by_temperature"]) for f in
                          (lambda e: fmt(e["validity"], 3), lambda e: fmt(e["novelty"], 3),
                           lambda e: str(novel_valid_per_1000(e))))]
            for seed, main in mains.items()]
    at = " / ".join(repr(t) for t in temps)

    def best(main):
        return max(main["by_temperature"], key=novel_valid_per_1000)["temperature"]

    def direction(main):
        valid = [e["validity"] for e in main["by_temperature"]]
        return all(b < a for a, b in zip(valid, valid[1:]))
    return (table(["seed", f"valid at T = {at}", f"novel at T = {at}",
                   f"novel valid per 1,000 at T = {at}"], rows, "lrrr")
            + f"\n\nValidity falls as T rises in {count_of(mains, direction)}; T = {temps[0]!r} "
            f"gives the most novel valid molecules per sample in "
            f"{count_of(mains, lambda e: best(e) == temps[0])}.")


MECHANISM_STEPS = (1, 10, 50, 100, 200)


def p3_mechanism(m: dict, bands: dict) -> str:
    """course/tools/mechanism.py's measurement, if it has been run."""
    path = results_dir("problem3") / "mechanism.json"
    if not path.exists():
        return ("Not measured: `results/mechanism.json` does not exist (`python -m "
                "course.tools.mechanism` writes it).")
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


TABLES = {"p3_seeds": p3_seeds, "p3_sweep": p3_sweep, "p3_largest_lr": p3_largest_lr,
          "p3_head_grad": p3_head_grad, "p3_step100_cut": p3_step100_cut,
          "p3_failing_seeds": p3_failing_seeds,
          "p3_samples10k": p3_samples10k, "p3_mechanism": p3_mechanism,
          "p3_by_step": p3_by_step,
          "p3_by_length": p3_by_length, "p3_by_span": p3_by_span,
          "p3_by_temperature": p3_by_temperature, "p3_main_seeds": p3_main_seeds,
          "p3_outcomes_seeds": p3_outcomes_seeds, "p3_bins_seeds": p3_bins_seeds,
          "p3_temperature_seeds": p3_temperature_seeds}


# --------------------------------------------------------------------- answers, five seeds
# Each answer block states one deliverable's answer over every seed that has the quantity,
# with its count of seeds; a block resting on seed 0 alone says so.
FAILING = ("post_lr0.01_w0_s1500", "post_lr0.03_w0_s1500")


def seed_metrics() -> dict[int, dict]:
    return {seed: read_json(folder / "metrics.json")
            for seed, folder in seed_dirs("problem3").items()
            if (folder / "metrics.json").exists()}


def seed_log(seed: int, run: str) -> dict:
    return read_json(seed_dirs("problem3")[seed] / f"training_log_{run}.json")


def rng(values, places: int = 3) -> str:
    return span(values, places)


def largest_lrs(sweep: list[dict]) -> dict:
    cells = sweep_by_cell({"sweep": sweep})
    return {(norm, w): max((lr for lr in P3_LRS if cells[(norm, lr, w)]["trains"]), default=None)
            for norm in ("pre", "post") for w in SWEEP_WARMUPS}


# A sweep verdict counts for a seed only where it lies beyond the run's own noise.
VERDICT_RULE = (f"a seed's verdict counts where its final validation loss lies farther from the "
                f"{TRAIN_THRESHOLD} threshold than it moved since the validation before")


def verdict_noise(seed: int, run: str) -> tuple:
    """(final validation loss, how far it moved since the validation before) of one sweep
    run; the move is None where either loss is not finite (the run then fails outright)."""
    val = [p["val_loss"] for p in seed_log(seed, run)["val"]]
    if len(val) < 2 or None in val[-2:]:
        return val[-1] if val else None, None
    return val[-1], abs(exact(val[-1]) - exact(val[-2]))


def verdict_settled(seed: int, run: str) -> bool:
    """Whether one seed's verdict on a sweep run lies beyond the run's noise (VERDICT_RULE)."""
    final, moved = verdict_noise(seed, run)
    return moved is None or abs(exact(final) - exact(TRAIN_THRESHOLD)) > moved


def unsettled_note(seed: int, run: str) -> str:
    """What one seed's verdict within its noise measured, in words."""
    final, moved = verdict_noise(seed, run)
    side = "below" if exact(final) < exact(TRAIN_THRESHOLD) else "above"
    return (f"seed {seed} ends at {fmt(final, 3)}, "
            f"{fmt(abs(exact(final) - exact(TRAIN_THRESHOLD)), 3)} {side} the threshold, after "
            f"moving {fmt(moved, 3)} since the validation before")


def settled_verdicts(metrics: dict) -> dict:
    """{run: {seed: its verdict (trains) where it lies beyond its noise, else None}}."""
    return {run: {seed: trains if verdict_settled(seed, run) else None
                  for seed, mm in metrics.items()
                  for trains in [next(x for x in mm["sweep"] if x["run"] == run)["trains"]]}
            for run in [e["run"] for e in next(iter(metrics.values()))["sweep"]]}


def p3_summary(m: dict, bands: dict) -> str:
    metrics = seed_metrics()
    n = len(metrics)
    verdicts = settled_verdicts(metrics)
    always = [e["run"] for e in m["sweep"]
              if all(v == e["trains"] for v in verdicts[e["run"]].values())]
    fails = [e["run"] for e in m["sweep"] if not e["trains"]]
    warm = [e for e in m["sweep"] if e["norm"] == "post" and e["warmup"] > 0]
    clear = [e for e in warm if all(verdicts[e["run"]].values())]

    def counted(e) -> str:
        notes = "; ".join(unsettled_note(seed, e["run"])
                          for seed, v in verdicts[e["run"]].items() if v is None)
        trains = sum(v is True for v in verdicts[e["run"]].values())
        return f"{lr_text(e['lr'])} in {trains} of {n}" + (f" ({notes}: not counted)"
                                                            if notes else "")
    warm_clause = (
        f"trains at every rate with {warm[0]['warmup']} warmup steps" if clear == warm else
        f"trains with {warm[0]['warmup']} warmup steps at "
        + " and ".join(lr_text(e["lr"]) for e in clear) + " in every seed, and at "
        + "; at ".join(counted(e) for e in warm if e not in clear))
    finals = [mm["main"]["by_step"][-1]["validity"] for mm in metrics.values()]
    rising = sum(rises([x["validity"] for x in mm["main"]["by_step"]])
                 for mm in metrics.values())
    return (
        f"**Summary** (seeds {seed_list(sorted(metrics))}, n = {n}, unless a sentence says seed "
        f"0). {len(always)} of the {len(m['sweep'])} sweep cells have seed 0's verdict in "
        f"all {n} seeds ({VERDICT_RULE}): pre-LN trains at every "
        f"learning rate with and without warmup; post-LN fails without warmup at 1e-2 and 3e-2 "
        f"({' and '.join(fails)}) and {warm_clause}. The failing "
        f"runs do not diverge; they settle on a plateau at about the loss of predicting each "
        f"token by its frequency. The 4,000-step model writes a valid molecule in "
        f"{rng(finals)} of its samples at T = 1; validity rises at every checkpoint up to "
        f"step 4,000 in {of_n(rising, n)}. In seed 0's 10,000 samples validity falls with "
        f"string length and, less steeply, with ring span at a fixed length (question 10). "
        f"T = 0.7 gives the most novel valid molecules per sample in every seed.")


def p3_answer_sweep(m: dict, bands: dict) -> str:
    metrics = seed_metrics()
    n = len(metrics)
    counts = []
    for e in m["sweep"]:
        k = sum(next(x for x in mm["sweep"] if x["run"] == e["run"])["trains"]
                for mm in metrics.values())
        counts.append((e["run"], k))
    train_all = sum(k == n for _, k in counts)
    fail_all = [run for run, k in counts if k == 0]
    mixed = [run for run, k in counts if 0 < k < n]
    unsure = [f"{run} ({unsettled_note(seed, run)})"
              for run, by_seed in settled_verdicts(metrics).items()
              for seed, v in by_seed.items() if v is None]
    return (f"**Answer.** Over seeds {seed_list(sorted(metrics))}: {train_all} of the "
            f"{len(counts)} cells train in {n} of {n} seeds and {len(fail_all)} fail in "
            f"{n} of {n} ({', '.join(fail_all)})"
            + (f"; mixed: {', '.join(mixed)}" if mixed else "; no cell has a mixed verdict")
            + f". Of these {len(counts) * n} verdicts, "
            + ("; ".join(unsure) + (" lies" if len(unsure) == 1 else " lie")
               + " within the run's noise and counts for neither" if unsure else
               "none lies within its run's noise")
            + f" ({VERDICT_RULE}). The table below gives seed 0's loss and verdict with every "
              "cell's seed count by the threshold alone.")


def p3_answer_failing(m: dict, bands: dict) -> str:
    metrics = seed_metrics()
    unigram = m["unigram_entropy"]
    end, at50, above, finite, plateau, finals = [], [], 0, True, [], []
    for seed in metrics:
        for run in FAILING:
            log = seed_log(seed, run)
            end.append(log["log"][-1]["train_loss"])
            at50.append(next(p["train_loss"] for p in log["log"] if p["step"] == 50))
            above += log["final_val_loss"] > log["log"][-1]["train_loss"]
            plateau += [p["train_loss"] for p in log["log"] if p["step"] >= 100]
            finals.append(log["final_val_loss"])
            finite &= all(p["train_loss"] is not None for p in log["log"])
    runs = len(end)
    stall = [seed_log(s, "pre_lr0.03_w0_s1500")["final_val_loss"] for s in metrics]
    lowest = [min(seed_log(s, "post_lr0.03_w500_s1500")["log"], key=lambda p: p["train_loss"])
              ["step"] for s in metrics]
    return (
        f"**Answer.** The {runs} failing runs ({' and '.join(FAILING)}, seeds "
        f"{seed_list(sorted(metrics))}) {'never' if finite else 'do'} "
        f"{'diverge numerically' if finite else 'diverge in some runs'}: their training loss "
        f"is {rng(at50)} at step 50, stays between {rng(plateau).replace(DASH, ' and ')} from "
        f"step 100 to the end and ends at {rng(end)}, just below the {fmt(unigram, 3)} of "
        f"predicting each token by its frequency alone. That the collapsed network ignores "
        f"its context is read from this loss, not measured. Their final validation loss is "
        f"above their last training loss in {above} of {runs} runs and scatters widely "
        f"({rng(finals)}). Two other shapes pass the threshold: pre-LN at 3e-2 without "
        f"warmup stalls (final validation loss {rng(stall)} over the seeds), and post-LN at "
        f"3e-2 with warmup learns early in warmup and then gets worse as the rate keeps "
        f"rising (its training loss is lowest at step "
        f"{rng(lowest, 0).replace(DASH, ' or ') if min(lowest) != max(lowest) else lowest[0]}"
        f" in every seed).")


def head_grad_answers() -> tuple[str, str]:
    """The answers to questions 3 (what the early head gradient norms separate) and 4 (what
    they do not), from the same counts."""
    metrics = seed_metrics()
    means = {seed: {e["run"]: head_mean(seed_log(seed, e["run"])) for e in mm["sweep"]}
             for seed, mm in metrics.items()}
    runs = [(means[seed][e["run"]], e["trains"]) for seed, mm in metrics.items()
            for e in mm["sweep"]]

    def best_cut(pairs):
        pairs = sorted(pairs)
        return min(sum(t for _, t in pairs[:i]) + sum(not t for _, t in pairs[i:])
                   for i in range(len(pairs) + 1))

    maxima = [(max(early_head_norms(seed_log(seed, e["run"]))), e["trains"])
              for seed, mm in metrics.items() for e in mm["sweep"]]
    smallest = sum(set(sorted(by, key=by.get)[:2]) == {"post_lr0.03_w0_s1500",
                                                       "pre_lr0.03_w0_s1500"}
                   for by in means.values())
    pairs = []
    for by in means.values():
        pairs += [by[run] > by[run.replace("_w500", "_w0")] for run in by if "_w500" in run]
    by0 = means[0]
    pairs0 = [by0[run] > by0[run.replace("_w500", "_w0")] for run in by0 if "_w500" in run]
    n = len(metrics)
    # the training loss at the same log points: warmed-up run against the run without
    higher = compared = 0
    lower_both, higher_both = {}, {}  # cell -> [warmed-up mean larger, per seed]
    for seed, by in means.items():
        for run in by:
            if "_w500" not in run:
                continue
            other = run.replace("_w500", "_w0")
            losses = [{p["step"]: exact(p["train_loss"]) for p in seed_log(seed, r)["log"]
                       if p["step"] in EARLY_STEPS} for r in (run, other)]
            above = [losses[0][s] > losses[1][s] for s in EARLY_STEPS]
            higher += sum(above)
            compared += len(above)
            cell = run.replace("_w500_s1500", "")
            group = higher_both if all(above) else lower_both if not any(above) else {}
            group.setdefault(cell, []).append(by[run] > by[other])
    fractions = " and ".join(fmt(Fraction(step, 500), 1) for step in EARLY_STEPS)

    def pairs_text(group):
        k = sum(len(v) for v in group.values())
        cells = ", ".join(f"{cell} in {len(v)} of {n} seeds" if len(v) < n else cell
                          for cell, v in sorted(group.items()))
        return k, cells, sum(sum(v) for v in group.values())
    low_k, low_cells, low_larger = pairs_text(lower_both)
    high_k, high_cells, high_larger = pairs_text(higher_both)
    failing = [means[seed]["post_lr0.01_w0_s1500"] for seed in means]
    healthy = [v for seed, mm in metrics.items() for e in mm["sweep"] if e["trains"]
               for v in [means[seed][e["run"]]]]
    separate = (
        f"**Answer.** Over the {len(runs)} runs of seeds {seed_list(sorted(metrics))}, what "
        f"the prescribed summaries (mean and maximum of the head gradient norm at steps 50 "
        f"and 100) separate is warmup: with warmup the mean is larger "
        f"than without in {sum(pairs)} of {len(pairs)} pairs of otherwise equal runs "
        f"({sum(pairs0)} of {len(pairs0)} in seed 0): often, not always. Why was not "
        f"measured, and the training loss does not explain it: at steps 50 and 100 the "
        f"warmed-up run's rate is still {fractions} of the peak, but its training loss is "
        f"higher than the other run's in only {higher} of the {compared} comparisons (two "
        f"steps, {len(pairs)} pairs). In the {low_k} pairs where its loss is lower at both "
        f"steps ({low_cells}) its mean is still the larger in {low_larger}; in the {high_k} "
        f"where its loss is higher at both ({high_cells}), in {high_larger}. They also pick "
        f"out the plateaus at 3e-2 without warmup: the two smallest means belong, in "
        f"{of_n(smallest, n)}, to the two runs at 3e-2 without warmup.")
    limits = (
        f"**Answer.** Over the {len(runs)} runs of seeds {seed_list(sorted(metrics))}, the "
        f"prescribed summaries do not predict the verdict: the best single threshold "
        f"misclassifies {best_cut(runs)} of {len(runs)} runs on the mean and "
        f"{best_cut(maxima)} on the maximum. The two runs at 3e-2 without warmup, whose "
        f"means are the two smallest in {of_n(smallest, n)}, have opposite verdicts (post-LN "
        f"fails, pre-LN stalls and passes), and the failing post-LN runs at 1e-2 have means "
        f"of {rng(failing)}, inside the {rng(healthy)} of the runs that train. Low early "
        f"means go with the plateaus at 3e-2, not with failure as such, so as an early "
        f"warning of failure these numbers are no use here: no cut on them separates the "
        f"runs that fail from those that train.")
    return separate, limits


def p3_answer_head_grad(m: dict, bands: dict) -> str:
    """Question 3: what the early head gradient norms separate."""
    return head_grad_answers()[0]


def p3_answer_head_grad_limits(m: dict, bands: dict) -> str:
    """Question 4: what they do not separate."""
    return head_grad_answers()[1]


def of_n(k: int, n: int) -> str:
    return f"{k} of {n} seeds"


def p3_answer_largest(m: dict, bands: dict) -> str:
    metrics = seed_metrics()
    per_seed = {seed: largest_lrs(mm["sweep"]) for seed, mm in metrics.items()}
    seed0 = per_seed[0]
    same = sum(v == seed0 for v in per_seed.values())
    text = "; ".join(f"{norm}-LN {'without' if w == 0 else 'with'} warmup "
                     f"{lr_text(seed0[(norm, w)]) if seed0[(norm, w)] else 'none'}"
                     for norm in ("pre", "post") for w in SWEEP_WARMUPS)
    near = [seed_log(s, "post_lr0.03_w500_s1500")["final_val_loss"] for s in metrics]
    at_top = sum(v == max(P3_LRS) for v in seed0.values())
    closest = "the worst of the seeds" if near[0] == max(near) else "not the worst seed"
    return (f"**Answer.** The largest learning rate that trains: {text}. The same four "
            f"answers hold in {of_n(same, len(metrics))}. {lr_text(max(P3_LRS))} is the "
            f"largest rate tried, so for the {at_top} entries that reach it the true limit "
            f"may be higher. Post-LN with warmup at {lr_text(max(P3_LRS))} ends at "
            f"{rng(near)} over the seeds: seed 0, {closest}, is {fmt(2 - exact(near[0]), 3)} below "
            f"the 2.0 threshold.")


def p3_answer_mechanism(m: dict, bands: dict) -> str:
    path = results_dir("problem3") / "mechanism.json"
    mechanism = read_json(path)
    runs = {(r["norm"], r["lr"]): r for r in mechanism["runs"]}

    def at(norm, lr, step):
        return next(r for r in runs[(norm, lr)]["records"] if r["step"] == step)

    first = [x for key in (("pre", 0.01), ("post", 0.01)) for x in at(*key, 1)["update_ratio"]]
    post100 = list(at("post", 0.01, 100)["ln_input_rms"].values())
    post_out = at("post", 0.01, 100)["residual_rms"]
    slow_records = runs[("post", 0.001)]["records"]
    slow = [x for r in slow_records for x in r["ln_input_rms"].values()]
    slow_last = list(slow_records[-1]["ln_input_rms"].values())
    steps = [r["step"] for r in runs[("pre", 0.01)]["records"]]

    def below(step):
        """Whether every post-LN block's update ratio is below every pre-LN block's."""
        return (max(exact(x) for x in at("post", 0.01, step)["update_ratio"])
                < min(exact(x) for x in at("pre", 0.01, step)["update_ratio"]))
    early = [s for s in steps if 1 < s < 100]
    late_steps = [s for s in steps if s >= 100]

    def late(norm, lr):
        return median(x for r in runs[(norm, lr)]["records"] if r["step"] >= 100
                      for x in r["update_ratio"])
    return (
        "**Answer.** Pre-LN, x + F(LN(x)), keeps an identity path from the embedding to the "
        "final LayerNorm: a sublayer adds to the stream and no LayerNorm divides it. Post-LN, "
        "LN(x + F(x)), puts every LayerNorm on that path, so the stream carried from below "
        "is rescaled by the size of what each sublayer adds. The hypothesis (after Xiong et "
        "al., 2020) is that a large early step makes the sublayers' outputs large, the "
        "LayerNorms then shrink the carried token and position information, and the network "
        "falls back on token frequencies; warmup keeps the early steps small. What was "
        "measured (`results/mechanism.json`, seed 0, the first "
        f"{mechanism['steps']} steps of four settings without warmup, recorded at step 1 and "
        f"every {mechanism['every']}th): at step 1 one Adam step moves every block by the "
        f"same fraction of its weights in both placements at lr 1e-2 ({rng(first, 4)}), so at "
        "step 1 the placement does not change the step size. Later it does: post-LN's four "
        "block update ratios are all below pre-LN's at "
        f"{sum(map(below, early))} of the {len(early)} recorded steps {early[0]}-{early[-1]} "
        f"and at {sum(map(below, late_steps))} of the {len(late_steps)} from {late_steps[0]} "
        f"to {late_steps[-1]}, where the post-LN run's median step is "
        f"{fmt(late('post', 0.01))} of its weights against {fmt(late('pre', 0.01))} for "
        "pre-LN at the same rate. By step 100 the post-LN LayerNorm inputs at 1e-2 "
        f"have RMS {rng(post100, 1)} while the block outputs stay near 1 "
        f"({rng(post_out, 2)}); at 1e-3 they are {rng(slow, 2)} over the {len(slow_records)} "
        f"recorded steps ({rng(slow_last, 2)} at step {slow_records[-1]['step']}) and that run "
        "trains. That the large LayerNorm inputs cause the plateau, rather "
        "than accompany it, was not tested (it would take an intervention), and the sublayer "
        "outputs themselves were not recorded, only the sums the LayerNorms divide. One "
        "seed, two rates; 3e-2 and the warmup runs were not measured.")


def p3_answer_validity(m: dict, bands: dict) -> str:
    mains = main_by_seed()
    n = len(mains)
    first = [e["by_step"][0] for e in mains.values()]
    last = [e["by_step"][-1] for e in mains.values()]

    def gains(e):
        v = [exact(x["validity"]) for x in e["by_step"]]
        return [b - a for a, b in zip(v, v[1:])]

    def shrinks(e) -> bool:
        """Each gain below the one before by more than the noise of the three validities
        it is taken from (gain k - gain k+1 = 2 v(k+1) - v(k) - v(k+2))."""
        var = [binomial_variance(x["validity"], x["num_samples"]) for x in e["by_step"]]
        g = gains(e)
        return all(beyond_noise(g[k] - g[k + 1], var[k] + 4 * var[k + 1] + var[k + 2])
                   for k in range(len(g) - 1))
    shrink = sum(map(shrinks, mains.values()))
    smaller = sum(all(b < a for a, b in zip(gains(e), gains(e)[1:])) for e in mains.values())
    up = sum(rises([x["validity"] for x in e["by_step"]]) and
             rises([x["well_formed"] for x in e["by_step"]]) for e in mains.values())
    last_gain = [gains(e)[-1] for e in mains.values()]
    wfi = [exact(x["well_formed"]) - exact(x["validity"]) for x in first], \
        [exact(x["well_formed"]) - exact(x["validity"]) for x in last]
    ill = [1 - exact(x["well_formed"]) for x in first], [1 - exact(x["well_formed"]) for x in last]
    steps = [x["step"] for x in m["main"]["by_step"]]
    return (
        f"**Answer.** Over seeds {seed_list(sorted(mains))} (1,000 samples at T = 1 per "
        f"checkpoint): both fractions rise at every checkpoint in {of_n(up, n)}, from "
        f"{rng(x['well_formed'] for x in first)} well-formed and "
        f"{rng(x['validity'] for x in first)} valid at step {steps[0]} to "
        f"{rng(x['well_formed'] for x in last)} and {rng(x['validity'] for x in last)} at "
        f"step {steps[-1]}. Validity is still rising at the end (by {rng(last_gain)} over the "
        f"last 1,000 steps). Its gain per 1,000 steps is smaller at every checkpoint than at "
        f"the one before in {of_n(smaller, n)}, and smaller by more than the noise of the "
        f"samples in {of_n(shrink, n)} ({NOISE_RULE}): "
        + ("the curve is flattening, not flat" if shrink == n else
           "these samples do not tell a flattening curve from a straight one")
        + ". The well-formed but invalid "
        f"fraction falls from {rng(wfi[0])} to {rng(wfi[1])} and the ill-formed fraction "
        f"from {rng(ill[0])} to {rng(ill[1])}: both kinds of failure shrink over training at "
        f"comparable rates, so these numbers do not show syntax learned before chemistry.")


def p3_answer_well_formed(m: dict, bands: dict) -> str:
    mains = main_by_seed()
    kek = [e["well_formed_invalid_reasons"].get("kekulization", 0) for e in mains.values()]
    first = sum(max(e["well_formed_invalid_reasons"], key=e["well_formed_invalid_reasons"].get)
                == "kekulization" for e in mains.values())
    wfi = [e["outcomes"]["well_formed_invalid"] for e in mains.values()]
    return (
        "**Answer.** The four rules check only the string's syntax: tokens, parentheses, ring "
        "digits and brackets. RDKit also requires every atom's valence to be respected and "
        f"every aromatic ring to have a Kekulé structure. Of the final models' samples, "
        f"{rng(wfi)} are well-formed but invalid (seeds {seed_list(sorted(mains))}); the "
        f"commonest reason in {of_n(first, len(mains))} is an aromatic ring that cannot be "
        f"kekulized ({min(kek)}{DASH}{max(kek)} of 1,000 samples), then an atom over its "
        "valence. Examples from seed 0's sample file follow the table.")


def difficulty() -> dict | None:
    path = results_dir("problem3") / "difficulty.json"
    return read_json(path) if path.exists() else None


def odds(entry: dict) -> str:
    """exp(coefficient) per 10 tokens with its 95% interval (coefficient ± 1.96 se): the
    exponential is a float (not a tie at two decimals), rounded half up like the rest."""
    b, se = entry["per_10_tokens"], entry["se"]
    return (f"{fmt(math.exp(b), 2)} (95% interval {fmt(math.exp(b - 1.96 * se), 2)}"
            f"{DASH}{fmt(math.exp(b + 1.96 * se), 2)})")


MIN_CELL = 30  # samples a joint cell needs before its fraction is compared


def widest_below_narrowest(d: dict) -> tuple[int, int]:
    """(length bins where the widest span bin's valid-of-well-formed fraction is below the
    narrowest's, length bins compared), over the span bins with at least MIN_CELL
    well-formed samples in that length bin."""
    cells = {(c["length"], c["span"]): c for c in d["cells"]}
    lower = compared = 0
    for lb in d["length_bins"]:
        kept = [cells[(lb, s)] for s in d["span_bins"]
                if cells[(lb, s)]["well_formed"] >= MIN_CELL]
        if len(kept) < 2:
            continue
        compared += 1
        first, last = kept[0], kept[-1]
        lower += last["valid"] * first["well_formed"] < first["valid"] * last["well_formed"]
    return lower, compared


def p3_answer_breakdowns(m: dict, bands: dict) -> str:
    """Question 9: the failure breakdowns by length and by ring span."""
    mains = main_by_seed()
    n = len(mains)

    def falls(main, key):
        valid = [e["valid"] for e in main[key] if e["count"]]
        return valid[-1] < valid[0]
    return (f"**Answer.** In the breakdowns of the final model (1,000 samples per seed) the "
            f"longest strings are less often valid than the shortest in "
            f"{of_n(sum(falls(e, 'by_length') for e in mains.values()), n)}, and the widest "
            f"ring spans than the narrowest in "
            f"{of_n(sum(falls(e, 'by_span') for e in mains.values()), n)}; the tables below "
            f"give seed 0's three outcome fractions per bin and every seed's valid fraction.")


def p3_answer_hard(m: dict, bands: dict) -> str:
    """Question 10: what the breakdowns say about what the model finds hard."""
    marg = ("Long ring spans occur only in long strings, so the two breakdowns (question 9) "
            "cannot say which of the two matters.")
    d = difficulty()
    if d is None:
        return f"**Answer.** {marg} `make difficulty` measures the two apart."
    fits = d["logistic"]
    lower, compared = widest_below_narrowest(d)

    def steeper(fit_name):
        """Whether length's 95% interval lies beyond span's (per 10 tokens), in words."""
        f = fits[fit_name]
        lo = {k: f[k]["per_10_tokens"] - 1.96 * f[k]["se"] for k in ("length", "span")}
        hi = {k: f[k]["per_10_tokens"] + 1.96 * f[k]["se"] for k in ("length", "span")}
        if hi["length"] < lo["span"]:
            return "the steeper of the two"
        if hi["span"] < lo["length"]:
            return "the shallower of the two"
        return "about as steep as span (the two intervals overlap)"
    return (
        f"**Answer.** {marg} Measured apart (`results/difficulty.json`, seed 0's "
        f"{d['num_samples']:,} samples; length and span correlate at r = "
        f"{fmt(d['length_span_correlation'], 2)}): with both in one logistic regression, 10 "
        f"more tokens of length multiply the odds of a valid sample by "
        f"{odds(fits['all']['length'])} at a fixed span, and 10 more tokens of span by "
        f"{odds(fits['all']['span'])} at a fixed length. Among the well-formed samples, "
        f"where every ring closes and the span is exact, the odds that RDKit accepts the "
        f"molecule are multiplied by {odds(fits['well_formed']['length'])} per 10 tokens of "
        f"length and {odds(fits['well_formed']['span'])} per 10 tokens of span. In "
        f"{lower} of {compared} length bins the well-formed samples of the widest span bin "
        f"(of those holding at least {MIN_CELL} samples) are less often valid than those "
        f"of the narrowest, though not every step between span bins falls. So each goes "
        f"with invalidity at a fixed value of the other: per 10 tokens, length is "
        f"{steeper('all')} over all samples, and for the chemistry alone (well-formed "
        f"samples) length is {steeper('well_formed')}; at the same length, a molecule whose "
        f"ring stays open longer is more often one RDKit rejects. These are associations in "
        f"one regression, not two causes shown apart: a property that goes with both and was "
        f"not in the fit (the number of rings, say) could produce them. Why (for instance "
        f"that the model loses count of the open ring's atoms) is not measured. Seeds "
        f"{seed_list(d['seeds_without_samples'])} committed no samples, so this separation "
        f"rests on seed 0.")


def p3_difficulty(m: dict, bands: dict) -> str:
    d = difficulty()
    if d is None:
        return ("Not measured yet: `make difficulty` writes "
                "`results/difficulty.json`.")
    cells = {(c["length"], c["span"]): c for c in d["cells"]}
    spans = [s for s in d["span_bins"] if any(cells[(lb, s)]["count"]
                                              for lb in d["length_bins"])]
    out = []
    for what, num, den in (("valid of all samples", "valid", "count"),
                           ("valid of the well-formed samples", "valid", "well_formed")):
        rows = []
        for lb in d["length_bins"]:
            row = [lb.replace("-", DASH)]
            for s in spans:
                c = cells[(lb, s)]
                row.append(f"{fmt(Fraction(c[num], c[den]), 2)} ({c[den]})" if c[den]
                           else DASH)
            rows.append(row)
        out.append(table([f"length (tokens) \\ ring span: {what} (n)",
                          *[s.replace("-", DASH) for s in spans]], rows,
                         "l" + "r" * len(spans)))
    fits = d["logistic"]
    lines = [f"{name}: n = {f['n']:,}, {f['positives']:,} valid; log-odds per 10 tokens "
             f"length {fmt(f['length']['per_10_tokens'], 3)} ± {fmt(f['length']['se'], 3)}, "
             f"span {fmt(f['span']['per_10_tokens'], 3)} ± {fmt(f['span']['se'], 3)} (± one "
             f"standard error)"
             for name, f in (("all samples", fits["all"]),
                             ("well-formed samples", fits["well_formed"]))]
    return ("\n\n".join(out) + f"\n\nSeed 0's {d['num_samples']:,} samples at T = "
            f"{d['temperature']:g} (`results/difficulty.json`, `python -m "
            f"course.tools.smiles_difficulty`); a cell is the fraction valid and, in brackets, its "
            f"number of samples. Logistic regression of validity on length and span (both "
            f"centred): " + "; ".join(lines) + ".")


def p3_answer_temperature(m: dict, bands: dict) -> str:
    mains = main_by_seed()
    n = len(mains)
    temps = [e["temperature"] for e in m["main"]["by_temperature"]]

    def falls(main):
        v = [e["validity"] for e in main["by_temperature"]]
        return all(b < a for a, b in zip(v, v[1:]))

    def novelty_lower(main):
        t = main["by_temperature"]
        return t[0]["novelty"] < t[1]["novelty"]

    def best(main):
        return max(main["by_temperature"], key=novel_valid_per_1000)["temperature"]
    per = {t: [novel_valid_per_1000(e["by_temperature"][i]) for e in mains.values()]
           for i, t in enumerate(temps)}
    nov = {t: [e["by_temperature"][i]["novelty"] for e in mains.values()]
           for i, t in enumerate(temps)}
    return (
        f"**Answer.** Over seeds {seed_list(sorted(mains))}: validity falls as T rises in "
        f"{of_n(sum(map(falls, mains.values())), n)}, and novelty is lower at T = {temps[0]!r} "
        f"than at T = {temps[1]!r} in {of_n(sum(map(novelty_lower, mains.values())), n)}, so "
        f"the trade exists; but novelty stays at {rng(nov[temps[0]])} at T = {temps[0]!r}, "
        f"so the validity gained is worth far more: novel valid molecules per 1,000 samples "
        + ", ".join(f"{min(per[t])}{DASH}{max(per[t])} at T = {t!r}" for t in temps)
        + f"; T = {temps[0]!r} gives the most in "
        f"{of_n(sum(best(e) == temps[0] for e in mains.values()), n)}. Where the trade turns "
        f"(a lower T, or a model trained longer) was not measured.")


TABLES.update({"p3_summary": p3_summary, "p3_answer_sweep": p3_answer_sweep,
               "p3_answer_failing": p3_answer_failing,
               "p3_answer_head_grad": p3_answer_head_grad,
               "p3_answer_head_grad_limits": p3_answer_head_grad_limits,
               "p3_answer_largest": p3_answer_largest,
               "p3_answer_mechanism": p3_answer_mechanism,
               "p3_answer_validity": p3_answer_validity,
               "p3_answer_well_formed": p3_answer_well_formed,
               "p3_answer_breakdowns": p3_answer_breakdowns,
               "p3_answer_hard": p3_answer_hard, "p3_difficulty": p3_difficulty,
               "p3_answer_temperature": p3_answer_temperature})
