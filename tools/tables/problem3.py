"""Problem 3's report tables: each renders one marked table of problem3/REPORT.md from
problem3/results/."""

from decimal import Decimal

from problem3.config import SWEEP, SWEEP_LRS, SWEEP_WARMUPS, cell_name
from problem3.model import NORMS
from provided.common import results_dir
from provided.results import read_json
from tools.bands import seed_dirs
from tools.tables.style import DASH, band_of, fmt, per_seed, seeds_of, seeds_sentence, table

P3_LRS = SWEEP_LRS
P3_COLUMNS = [(norm, warmup) for norm in NORMS for warmup in SWEEP_WARMUPS]


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
        gaps = [e["well_formed"] - e["validity"] for e in main["by_step"]]
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


def novel_valid_per_1000(entry: dict) -> int:
    """valid x unique x novel x 1,000, rounded down (exact in decimal)."""
    return int(Decimal(repr(entry["validity"])) * Decimal(repr(entry["uniqueness"]))
               * Decimal(repr(entry["novelty"])) * 1000)


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


TABLES = {"p3_seeds": p3_seeds, "p3_sweep": p3_sweep, "p3_largest_lr": p3_largest_lr,
          "p3_head_grad": p3_head_grad, "p3_step100_cut": p3_step100_cut,
          "p3_failing_seeds": p3_failing_seeds,
          "p3_samples10k": p3_samples10k, "p3_mechanism": p3_mechanism,
          "p3_by_step": p3_by_step,
          "p3_by_length": p3_by_length, "p3_by_span": p3_by_span,
          "p3_by_temperature": p3_by_temperature, "p3_main_seeds": p3_main_seeds,
          "p3_outcomes_seeds": p3_outcomes_seeds, "p3_bins_seeds": p3_bins_seeds,
          "p3_temperature_seeds": p3_temperature_seeds}
