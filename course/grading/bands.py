"""Reference bands: every headline number over seed 0 and the extra seeds.

    python -m course.grading.bands    (or `make bands`, the last step of
                                      `make seeds`)

Seed 0 is the committed run in problemN/results/; seed S > 0 lives in
problemN/results/seeds/seed{S}/ (`make seeds`). For every headline quantity
this writes
problemN/results/reference_bands.json, nested by run and quantity:

    {run: {quantity: {"mean", "sd", "min", "max", "n_seeds", "seeds", "values"}}}

sd is the sample standard deviation (n - 1), null for a single seed. A quantity that a seed
does not have (steps_to_95 when 0.95 is never reached) is left out of that seed's values,
and counted under "missing". Only seeds whose results exist are used, so the file can be
rebuilt while `make seeds` is still running; n_seeds says how many stand
behind each band.
"""

import math
import statistics
from pathlib import Path

from problem1.config import run_name
from problem3.config import cell_name
from provided.common import ArgumentParser, fail, results_dir, script
from provided.results import read_json, write_json

LATE_POINTS = 10  # P1's late validation average: the last 10 logged points (steps 1950-2400)
P2_BUCKETS = ("64-79", "80-95", "96-111", "112-127")
MIN_SEEDS = 5  # a band the grader applies rests on at least this many seeds
UNIFORM_LOSS = math.log(25)  # P3: the loss of a uniform guess over the 25 tokens
P1_STEPS = 2500
# the values each quantity can take: a band that holds the whole range accepts anything
RANGES = {"final_val_loss": (0.0, UNIFORM_LOSS), "steps_to_95": (0.0, P1_STEPS),
          "head_grad_norm_at_100": (0.0, math.inf)}  # every other quantity is a fraction
SAMPLE_SIZES = {"well_formed": 1000, "validity": 1000, "uniqueness": 1000, "novelty": 1000}
# quantities read from a training log that no artifact the grader holds reproduces (only a
# log's last point is tied to its checkpoint): shown as claimed, never points
CLAIMED = ("steps_to_95", "late_val_exact_match", "final_val_loss", "trains",
           "head_grad_norm_at_100")
CLAIMED_WHY = ("claimed: read from a training log, which the submitted weights do not "
               "reproduce; shown, worth no points")


def band_limits(band: dict, quantity: str = "") -> tuple[float, float]:
    """The accepted interval [min - w, max + w], with w = 2 sd (the seeds' spread) + 1% of
    the mean's scale (so that a band of identical seeds still admits rounding) + 2 binomial
    sd at the mean for a statistic of a fresh sample (SAMPLE_SIZES: Problem 3's 1,000
    samples, which a student draws anew)."""
    widen = 2 * (band["sd"] or 0.0) + 0.01 * max(abs(band["mean"]), 1e-3)
    if quantity in SAMPLE_SIZES:
        p = min(max(band["mean"], 0.0), 1.0)
        widen += 2 * math.sqrt(p * (1 - p) / SAMPLE_SIZES[quantity])
    return band["min"] - widen, band["max"] + widen


def grading_verdict(band: dict, quantity: str) -> tuple[bool, str]:
    """(whether the grader applies the band, why not): it needs MIN_SEEDS seeds with a
    value, or as many without one (then only "no value", e.g. never reaching 0.95, is
    accepted), and an interval that excludes some possible value; never for a CLAIMED
    quantity."""
    if quantity in CLAIMED:
        return False, CLAIMED_WHY
    missing = len(band.get("missing", []))
    if missing >= MIN_SEEDS and not band["n_seeds"]:
        return True, ""
    if band["n_seeds"] < MIN_SEEDS:
        return False, (f"{band['n_seeds']} seeds with a value, fewer than {MIN_SEEDS}"
                       + (f" ({missing} without one)" if missing else ""))
    low, high = band_limits(band, quantity)
    lowest, highest = RANGES.get(quantity, (0.0, 1.0))
    if low <= lowest and high >= highest:
        return False, f"the band [{low:.3g}, {high:.3g}] holds every possible value"
    return True, ""


def band(values: dict) -> dict:
    """{seed: value or None} -> the band of the values that are not None."""
    present = {seed: v for seed, v in sorted(values.items()) if v is not None}
    numbers = list(present.values())
    result = {"mean": statistics.fmean(numbers) if numbers else None,
              "sd": statistics.stdev(numbers) if len(numbers) > 1 else None,
              "min": min(numbers, default=None), "max": max(numbers, default=None),
              "n_seeds": len(numbers), "seeds": list(present), "values": numbers}
    missing = [seed for seed, v in sorted(values.items()) if v is None]
    if missing:
        result["missing"] = missing
    return result


def seed_dir(results: Path, seed: int) -> Path:
    """Where a seed's runs sit: seed 0 is results/ itself, seed S results/seeds/seed{S}/."""
    return results if seed == 0 else results / "seeds" / f"seed{seed}"


def seed_dirs(problem: str) -> dict[int, Path]:
    """{seed: results folder} for seed 0 and every seeds/seed{S} folder present."""
    base = results_dir(problem)
    seeds = [int(path.name[4:]) for path in (base / "seeds").glob("seed*")
             if path.name[4:].isdigit()]
    return {seed: seed_dir(base, seed) for seed in [0, *sorted(seeds)]}


def collect(problem: str, quantities) -> dict:
    """{run: {quantity: band}} from quantities(folder) -> {run: {quantity: value}} per seed."""
    per_seed = {}
    for seed, folder in seed_dirs(problem).items():
        if (folder / "metrics.json").exists():
            per_seed[seed] = quantities(folder)
    bands = {}
    runs = sorted({run for values in per_seed.values() for run in values})
    for run in runs:
        names = [q for q in next(v[run] for v in per_seed.values() if run in v)]
        bands[run] = {q: graded_band(band({seed: values[run].get(q)
                                           for seed, values in per_seed.items()
                                           if run in values}), q) for q in names}
    return bands


def graded_band(result: dict, quantity: str) -> dict:
    """result with "graded" (and "not_graded", the reason, where it is false)."""
    graded, why = grading_verdict(result, quantity)
    return {**result, "graded": graded, **({"not_graded": why} if not graded else {})}


def problem1_quantities(folder: Path) -> dict:
    """Per run its test scores, steps_to_95 and late validation average; and the verdict
    the homework asks about where one run's score alone is too noisy to grade (reversed
    n1000 ranges from 0.35 to 0.97 over five seeds, always above forward n1000)."""
    metrics = read_json(folder / "metrics.json")
    out = {}
    for run, entry in metrics.items():
        if run in ("ablation", "pruning"):
            continue
        log = read_json(folder / f"training_log_{run}.json")["log"]
        late = [point["val_exact_match"] for point in log[-LATE_POINTS:]]
        out[run] = {"test_exact_match": entry["test_exact_match"],
                    "test_token_accuracy": entry["test_token_accuracy"],
                    "steps_to_95": entry["steps_to_95"],
                    "late_val_exact_match": statistics.fmean(late)}
    pair = (run_name("reversed", 1000), run_name("forward", 1000))
    if all(run in out for run in pair):
        reversed_, forward = (out[run]["test_exact_match"] for run in pair)
        out["verdicts"] = {"reversed_beats_forward_n1000": float(reversed_ > forward)}
    return out


def problem2_quantities(folder: Path) -> dict:
    metrics = read_json(folder / "metrics.json")
    out = {}
    for scheme, entry in metrics.items():
        if not isinstance(entry, dict) or "beyond_buckets" not in entry:
            continue
        out[scheme] = {"in_range": entry["in_range"], "beyond": entry["beyond"],
                       **{f"bucket_{name}": value
                          for name, value in zip(P2_BUCKETS, entry["beyond_buckets"])}}
    return out


def problem3_quantities(folder: Path) -> dict:
    metrics = read_json(folder / "metrics.json")
    out = {}
    for entry in metrics["sweep"]:
        cell = cell_name(entry["norm"], entry["lr"], entry["warmup"])
        out[cell] = {"final_val_loss": entry["final_val_loss"],
                     "trains": float(entry["trains"]),
                     "head_grad_norm_at_100": head_norm_at(folder, entry["run"], 100)}
    main = metrics.get("main")
    if main is not None:
        final = main["by_step"][-1]
        out["main"] = {q: final[q] for q in ("well_formed", "validity", "uniqueness",
                                             "novelty")}
    return out


def head_norm_at(folder: Path, run: str, step: int):
    log = read_json(folder / f"training_log_{run}.json")["log"]
    value = next((point["head_grad_norm"] for point in log if point["step"] == step), None)
    return value if value is None or math.isfinite(value) else None


QUANTITIES = {"problem1": problem1_quantities, "problem2": problem2_quantities,
              "problem3": problem3_quantities}


def parse_problems(argv=None) -> list[str]:
    """The problems named on the command line, all three if none."""
    parser = ArgumentParser(__doc__)
    parser.add_argument("problems", nargs="*", metavar="problemN",
                        help=f"any of {', '.join(QUANTITIES)} (default: all three)")
    args = parser.parse_args(argv)
    for problem in args.problems:
        if problem not in QUANTITIES:
            parser.error(f"unknown problem {problem!r}: choose from {', '.join(QUANTITIES)}")
    return args.problems or list(QUANTITIES)


def lost_seeds(old: dict, new: dict) -> list[str]:
    """'run quantity: seeds' for every band of old that new rests on fewer seeds."""
    lost = []
    for run, quantities in old.items():
        for quantity, band in quantities.items():
            before = set(band.get("seeds", [])) | set(band.get("missing", []))
            now = new.get(run, {}).get(quantity, {})
            gone = before - set(now.get("seeds", [])) - set(now.get("missing", []))
            if gone:
                lost.append(f"{run} {quantity}: seeds {sorted(gone)}")
    return lost


@script
def main(argv=None) -> int:
    for problem in parse_problems(argv):
        bands = collect(problem, QUANTITIES[problem])
        path = results_dir(problem) / "reference_bands.json"
        lost = lost_seeds(read_json(path), bands) if path.exists() else []
        if lost:
            fail(f"{path} would lose seeds it holds ({'; '.join(lost[:3])}"
                 f"{'; ...' if len(lost) > 3 else ''}): a seed folder's files are missing; "
                 "restore them (git checkout -- problemN/results/seeds), or delete the bands "
                 "file to rebuild it from the seeds that exist")
        write_json(path, bands)
        counts = sorted({b["n_seeds"] for run in bands.values() for b in run.values()})
        print(f"wrote {path}: {len(bands)} runs, n_seeds {counts}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
