"""Problem 2's report tables: each renders one marked table of course/reports/problem2.md from
problem2/results/ (metrics.json, reference_bands.json and, for the length-512 check, the
course's analysis.json)."""

from course.grading.bands import P2_BUCKETS, seed_dirs
from course.tools.tables.style import (
    DASH,
    NOISE_RULE,
    Root,
    band_of,
    clearly_below,
    correlation,
    exact,
    fmt,
    mean_sd,
    per_seed,
    sci,
    seed_list,
    seeds_of,
    seeds_sentence,
    span,
    table,
)
from generate_datasets import OFFSET_SHAPES
from problem2.config import RUNS
from problem2.evaluate import BUCKET
from provided.common import results_dir
from provided.results import read_json

P2_SCHEMES = list(RUNS)
P2_QUANTITIES = ("in_range", "beyond", *[f"bucket_{b}" for b in P2_BUCKETS])


def p2_seeds(m: dict, bands: dict) -> str:
    return seeds_sentence(bands, "beyond", P2_SCHEMES, "one training run per scheme",
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
    """The length-512 check of analysis.json, per 64-position bucket."""
    analysis = read_json(results_dir("problem2") / "analysis.json")
    schemes = [s for s in P2_SCHEMES if "long_sequences" in analysis[s]]
    first = analysis[schemes[0]]["long_sequences"]
    width = first["length"] // len(first["buckets"])
    header = ["positions", *schemes]
    rows = []
    for i in range(len(first["buckets"])):
        label = f"{i * width}{DASH}{(i + 1) * width - 1}"
        rows.append([label, *[fmt(analysis[s]["long_sequences"]["buckets"][i])
                              for s in schemes]])
    return table(header, rows, "l" + "r" * len(schemes))


TABLES = {"p2_seeds": p2_seeds, "p2_accuracy": p2_accuracy,
          "p2_sinusoidal_seeds": p2_sinusoidal_seeds, "p2_long": p2_long}


def p2_summary(m: dict, bands: dict) -> str:
    """The report's opening lines: in-range and beyond accuracy of each scheme, lowest-highest
    over the seeds of reference_bands.json."""
    def spread(scheme, quantity):
        band = band_of(bands, scheme, quantity)
        if band is None:
            return fmt(m[scheme][quantity])
        return f"{fmt(band['min'])}{DASH}{fmt(band['max'])}"
    band = band_of(bands, P2_SCHEMES[0], "beyond")
    seeds = (f"seeds {seed_list(seeds_of(band))}, n = {len(seeds_of(band))}" if band
             else "seed 0 alone")
    parts = [f"{scheme} {spread(scheme, 'in_range')} in range and {spread(scheme, 'beyond')} "
             f"beyond" for scheme in P2_SCHEMES]
    return (f"**Summary** (accuracy, lowest{DASH}highest over {seeds}; chance 0.0625): "
            + "; ".join(parts) + ". The learned table's rows 64-127 never receive a gradient "
            "and stay at their initial values, so the learned model is near chance beyond the "
            "training length; rotary scores depend on positions only through their "
            "difference, and it keeps most of its accuracy; the sinusoidal table is "
            "relative but its model's scores are not, and its accuracy beyond 64 lies in "
            "between. Sections 1-8 answer the template's eight questions in its order.")


TABLES["p2_summary"] = p2_summary


# --------------------------------------------------------------------- answers, five seeds
# Each answer block states one deliverable's answer over every seed that has the quantity
# (each seed's metrics.json, analysis.json and attention_maps.json), with its count of seeds;
# a number of seed 0 alone says so.
def seed_files(name: str) -> dict[int, dict]:
    """{seed: that seed's results/<name>} for every seed folder that has it."""
    return {seed: read_json(folder / name) for seed, folder in seed_dirs("problem2").items()
            if (folder / name).exists()}


def of_n(k: int, n: int) -> str:
    return f"{k} of {n} seeds"


def seeds_phrase(files: dict) -> str:
    return f"seeds {seed_list(sorted(files))}, n = {len(files)}"


def beyond_order(metrics: dict) -> list[str]:
    return sorted(P2_SCHEMES, key=lambda s: -exact(metrics[s]["beyond"]))


def strictly_falls(values) -> bool:
    values = [exact(v) for v in values]
    return all(b < a for a, b in zip(values, values[1:]))


def p2_answer_accuracy(m: dict, bands: dict) -> str:
    metrics = seed_files("metrics.json")
    n = len(metrics)
    order = beyond_order(m)
    same = sum(beyond_order(mm) == order for mm in metrics.values())
    parts = [f"{scheme} {span(mm[scheme]['in_range'] for mm in metrics.values())} in range and "
             f"{span(mm[scheme]['beyond'] for mm in metrics.values())} beyond"
             for scheme in P2_SCHEMES]
    buckets = {scheme: [mm[scheme]["beyond_buckets"] for mm in metrics.values()]
               for scheme in P2_SCHEMES}
    names = [b.replace("-", DASH) for b in P2_BUCKETS]
    none_falls = sum(map(strictly_falls, buckets["none"]))
    learned_all = [v for curve in buckets["learned"] for v in curve]
    bumpy = sum(not (strictly_falls(c) or strictly_falls(c[::-1]))
                for c in buckets["sinusoidal"])
    rotary = buckets["rotary"]
    targets = OFFSET_SHAPES["test"][0] * BUCKET  # a bucket's targets: 16 per test sequence
    last_lowest = sum(all(clearly_below(c[-1], targets, other, targets) for other in c[:-1])
                      for c in rotary)
    first_half = [v for c in rotary for v in c[:2]]
    return (
        f"**Answer.** Accuracy, lowest{DASH}highest over {seeds_phrase(metrics)} (chance "
        f"1/16 = 0.0625): " + "; ".join(parts) + f". Beyond 64 the order is "
        f"{', '.join(order)} in {of_n(same, n)}. The bucket curves beyond 64: learned stays "
        f"near chance in every bucket ({span(learned_all)} over the {len(learned_all)} "
        f"buckets of the {n} seeds); none falls from bucket to bucket in {of_n(none_falls, n)} "
        f"({span(c[0] for c in buckets['none'])} at {names[0]}, "
        f"{span(c[-1] for c in buckets['none'])} at {names[-1]}); sinusoidal is neither at "
        f"chance nor correct and its curve is not monotone in {of_n(bumpy, n)} "
        f"({span(v for c in buckets['sinusoidal'] for v in c)} per bucket); rotary keeps "
        f"{span(first_half)} at {names[0]} and {names[1]} and is lowest at {names[-1]} in "
        f"{of_n(last_lowest, n)} ({span(c[-1] for c in rotary)} there; {NOISE_RULE}, "
        f"{targets:,} targets a bucket).")


def p2_answer_learned(m: dict, bands: dict) -> str:
    """Question 3: which rows of the learned table received gradient."""
    metrics = seed_files("metrics.json")
    n = len(metrics)
    drift = {seed: mm["learned"]["table_drift"] for seed, mm in metrics.items()}
    untouched = sum(d["rows_64_127"]["max"] == 0 and d["rows_64_127"]["rows_moved"] == 0
                    for d in drift.values())
    moved = sum(d["rows_0_63"]["rows_moved"] == 64 for d in drift.values())
    share = [100 * exact(d["rows_0_63"]["mean"]) / exact(d["rows_0_63"]["initial_row_norm_mean"])
             for d in drift.values()]
    return (
        "**Answer.** Row p of the learned table enters the forward pass only for a sequence "
        "that has a position p, and training sequences have positions 0–63, so rows 64–127 "
        "never receive a gradient. Adam's moment estimates for those rows stay 0, their "
        "update is 0/(√0 + ε) = 0, and they keep their N(0, 1) initialization. Measured "
        f"(`metrics.json` → `learned.table_drift`, over {seeds_phrase(metrics)}): rows "
        f"64–127 are exactly at their initial values in {of_n(untouched, n)}, and all 64 rows "
        f"0–63 moved in {of_n(moved, n)} (mean distance "
        f"{span(d['rows_0_63']['mean'] for d in drift.values())}, {span(share, 1)}% of the "
        f"mean initial row norm).")


def p2_answer_learned_beyond(m: dict, bands: dict) -> str:
    """Question 2: what the learned table does at positions 64-127."""
    metrics, analysis = seed_files("metrics.json"), seed_files("analysis.json")
    n = len(metrics)
    untouched = sum(mm["learned"]["table_drift"]["rows_64_127"]["max"] == 0
                    for mm in metrics.values())
    first = [exact(a["learned"]["position_score_margin"]["beyond_fraction_positive"]) * 64
             for a in analysis.values()]
    target = {k: [a["learned"]["attention"]["on_target"][k] for a in analysis.values()]
              for k in ("in_range", "beyond")}
    return (
        f"**Answer.** Rows 64–127 of the learned table still hold their random N(0, 1) "
        f"initial values after training (exactly unchanged in {of_n(untouched, n)}, "
        f"{seeds_phrase(metrics)}; they never receive a gradient, question 3). So positions "
        f"64–127 reach the model as random vectors that W_q and W_k were never fitted to: "
        f"the position-only part of the score ranks the target first at {span(first, 0)} of "
        f"the 64 positions beyond 64 (`analysis.json` → `learned.position_score_margin`), "
        f"attention on the target key falls from {span(target['in_range'], 3)} in range to "
        f"{span(target['beyond'], 3)} beyond, and accuracy beyond 64 is "
        f"{span(mm['learned']['beyond'] for mm in metrics.values())}, near chance (0.0625) "
        f"and below the position-free model's "
        f"{span(mm['none']['beyond'] for mm in metrics.values())}.")


CHECKS = (("shift_rotation_max_error", "table entries in [−1, 1]"),
          ("rotary_score_shift_error", "median \\|q·k\\| = {magnitude}"),
          ("sinusoidal_score_shift_error", "median change {median}, \\|q·k\\| = {magnitude}"),
          ("rotary_vs_pairwise_error", "x ~ N(0, 1)"))


def check_value(checks: dict, name: str) -> str:
    value = checks[name]
    return f"{fmt(value, 1)} (max)" if value >= 1 else sci(value)


def same_checks(metrics: dict) -> int:
    """Seeds whose four checks equal seed 0's."""
    return sum(mm["checks"] == metrics[0]["checks"] for mm in metrics.values())


def p2_checks(m: dict, bands: dict) -> str:
    checks = m["checks"]
    scale = {"magnitude": fmt(checks["score_magnitude_median"], 2),
             "median": fmt(checks["sinusoidal_score_shift_error_median"], 2)}
    rows = [[name, check_value(checks, name), what.format(**scale)] for name, what in CHECKS]
    metrics = seed_files("metrics.json")
    return (table(["check", "value", "scale"], rows, "lrl")
            + "\n\nSeed 0; the four values are the same in "
            + of_n(same_checks(metrics), len(metrics))
            + " (they are computed on random vectors drawn with a fixed seed and on the "
            "encodings, not on the trained weights).")


def p2_answer_shift_rotation(m: dict, bands: dict) -> str:
    """Question 4: the shift-rotation check."""
    metrics = seed_files("metrics.json")
    checks = m["checks"]
    return (
        f"**Answer.** The four checks (`metrics.json` → `checks`) are the same in "
        f"{of_n(same_checks(metrics), len(metrics))}. shift_rotation_max_error is "
        f"{sci(checks['shift_rotation_max_error'])} against table entries in [−1, 1], float32 "
        f"rounding: moving s positions is one fixed rotation R_s of the sinusoidal table at "
        f"every position tested, beyond 63 included, so the table itself is relative and is "
        f"defined everywhere.")


def p2_answer_score_shift(m: dict, bands: dict) -> str:
    """Question 5: the score-shift check."""
    checks = m["checks"]
    return (
        f"**Answer.** rotary_score_shift_error is "
        f"{sci(checks['rotary_score_shift_error'])} against a median |q·k| of "
        f"{fmt(checks['score_magnitude_median'], 2)}, float32 rounding: the rotary score "
        f"depends on the two positions only through their difference, since (R_a q)·(R_b k) = "
        f"qᵀR_{{b−a}}k. sinusoidal_score_shift_error is "
        f"{fmt(checks['sinusoidal_score_shift_error'], 1)} at most (median "
        f"{fmt(checks['sinusoidal_score_shift_error_median'], 2)}), as large as the score: in "
        f"(q + PE_a)·(k + PE_b) only PE_a·PE_b depends on a − b alone, and the cross terms "
        f"between content and position depend on the absolute positions. "
        f"rotary_vs_pairwise_error, {sci(checks['rotary_vs_pairwise_error'])}, shows that "
        f"`apply_rotary` is the specified rotation. The values are seed 0's and the same in "
        f"every seed (question 4).")


def p2_answer_extrapolation(m: dict, bands: dict) -> str:
    """Question 6: how the checks connect to the accuracies beyond the training length."""
    metrics, analysis = seed_files("metrics.json"), seed_files("analysis.json")
    n = len(metrics)
    beyond = {s: [mm[s]["beyond"] for mm in metrics.values()] for s in ("sinusoidal", "rotary")}
    corr = [correlation(a["sinusoidal"]["per_position"][64:],
                        a["sinusoidal"]["position_score_margin"]["per_position"][64:])
            for a in analysis.values()]
    positive = [a["sinusoidal"]["position_score_margin"]["beyond_fraction_positive"]
                for a in analysis.values()]
    buckets = [mm["sinusoidal"]["beyond_buckets"] for mm in metrics.values()]
    bumpy = sum(not (strictly_falls(c) or strictly_falls(c[::-1])) for c in buckets)
    return (
        f"**Answer.** Both tables are relative (question 4), but only rotary keeps that in "
        f"the attention score (question 5), and the accuracies beyond 64 follow: rotary, "
        f"whose score for a query and its target seven positions back is the same at every "
        f"position, keeps {span(beyond['rotary'])} beyond 64, sinusoidal "
        f"{span(beyond['sinusoidal'])} ({seeds_phrase(metrics)}). Sinusoidal's bucket curve "
        f"is not monotone in {of_n(bumpy, n)}, and its accuracy swings from position to "
        f"position with the "
        f"position-only part of its score: that part ranks the target first at "
        f"{span(positive, 3)} of the positions beyond 64, and per position it correlates "
        f"with the accuracy at {span(corr, 2)} ({of_n(sum(r > Root(0) for r in corr), n)} "
        f"positive; `analysis.json`).")


def maps_facts() -> dict:
    """What the two attention-map answers count, over the seeds."""
    maps, analysis = seed_files("attention_maps.json"), seed_files("analysis.json")
    schemes = ("sinusoidal", "rotary")
    windows = list(maps[0]["on_target"]["rotary"])
    k = maps[0]["k"]

    def target_largest(a, scheme, window):
        weights = a[scheme][window]
        return sum(max(range(32), key=lambda j: exact(weights[q][j])) == q - k
                   for q in range(k, 32))

    def on_key0(a, scheme):
        weights = a[scheme][windows[0]]
        return sum(exact(weights[q][0]) == max(map(exact, weights[q][:q + 1]))
                   for q in range(1, k))
    return {
        "maps": maps, "analysis": analysis, "windows": windows, "k": k,
        "queries": maps[0]["on_target"]["rotary"][windows[0]]["queries"],
        "mean_on": {(s, w): [a["on_target"][s][w]["mean"] for a in maps.values()]
                    for s in schemes for w in windows},
        "sharper": sum(a["on_target"]["rotary"][windows[0]]["mean"]
                       > a["on_target"]["sinusoidal"][windows[0]]["mean"]
                       for a in maps.values()),
        "largest": {s: [target_largest(a, s, windows[1]) for a in maps.values()]
                    for s in schemes},
        "on": {s: {w: [a[s]["attention"]["on_target"][w] for a in analysis.values()]
                   for w in ("in_range", "beyond")} for s in schemes},
        "unseen": [a["rotary"]["attention"]["on_unseen_distances"]["beyond"]
                   for a in analysis.values()],
        "covers": sum(exact(a["rotary"]["attention"]["on_unseen_distances"]["beyond"])
                      >= exact(a["rotary"]["attention"]["on_target"]["in_range"])
                      - exact(a["rotary"]["attention"]["on_target"]["beyond"])
                      for a in analysis.values()),
        "key0": {s: ", ".join(str(on_key0(a, s)) for a in maps.values()) for s in schemes}}


def p2_answer_maps(m: dict, bands: dict) -> str:
    """Question 7: the attention maps at positions 0-31."""
    f = maps_facts()
    maps, windows, k, queries = f["maps"], f["windows"], f["k"], f["queries"]
    return (
        f"**Answer.** On test sequence 0 (`attention_maps.json`, {seeds_phrase(maps)}; "
        f"{queries} queries per window, those with a key at distance {k}), the mean weight on "
        f"key i − {k} at {windows[0].replace('-', DASH)} is "
        f"{span(f['mean_on']['sinusoidal', windows[0]], 3)} for sinusoidal and "
        f"{span(f['mean_on']['rotary', windows[0]], 3)} for rotary, rotary's the larger in "
        f"{of_n(f['sharper'], len(maps))}: both draw the diagonal at offset {k}, rotary's "
        f"sharper. Queries 0–{k - 1} have no key "
        f"at distance {k}; where they look differs from seed to seed: queries 1–{k - 1} put "
        f"their largest weight on key 0 at {f['key0']['rotary']} of {k - 1} queries under "
        f"rotary and {f['key0']['sinusoidal']} under sinusoidal (seeds "
        f"{seed_list(sorted(maps))} in order).")


def p2_answer_maps_beyond(m: dict, bands: dict) -> str:
    """Question 8: the attention maps at positions 96-127."""
    f = maps_facts()
    maps, windows, queries, on = f["maps"], f["windows"], f["queries"], f["on"]

    def count(values):
        low, high = min(values), max(values)
        return f"{low}" if low == high else f"{low}{DASH}{high}"
    return (
        f"**Answer.** On test sequence 0 ({seeds_phrase(maps)}) the mean weight on the target "
        f"key at {windows[1].replace('-', DASH)} is "
        f"{span(f['mean_on']['sinusoidal', windows[1]], 3)} for sinusoidal and "
        f"{span(f['mean_on']['rotary', windows[1]], 3)} for rotary. Rotary's "
        f"diagonal is the same, fainter (its scores depend only on the offset, so the pattern "
        f"is translated); sinusoidal's has almost dissolved, though the target is still the "
        f"largest weight inside the window at {count(f['largest']['sinusoidal'])} of {queries} "
        f"queries (rotary {count(f['largest']['rotary'])}). Over the whole test set "
        f"(`analysis.json`) rotary's weight on the target falls from "
        f"{span(on['rotary']['in_range'], 3)} in range to {span(on['rotary']['beyond'], 3)} "
        f"beyond, and keys at distances of 64 or more, which no training sequence has, take "
        f"{span(f['unseen'], 3)} of its attention beyond 64, at least what the target lost in "
        f"{of_n(f['covers'], len(maps))}; sinusoidal's weight on the target falls from "
        f"{span(on['sinusoidal']['in_range'], 3)} to {span(on['sinusoidal']['beyond'], 3)}. "
        f"This is what the score-shift check (question 5) leads one to expect: the relative "
        f"score carries rotary's diagonal past 63 and sinusoidal's does not, and it is why "
        f"rotary extrapolates and sinusoidal only partly (question 6).")


TABLES.update({"p2_answer_accuracy": p2_answer_accuracy,
               "p2_answer_learned_beyond": p2_answer_learned_beyond,
               "p2_answer_learned": p2_answer_learned,
               "p2_checks": p2_checks, "p2_answer_shift_rotation": p2_answer_shift_rotation,
               "p2_answer_score_shift": p2_answer_score_shift,
               "p2_answer_extrapolation": p2_answer_extrapolation,
               "p2_answer_maps": p2_answer_maps, "p2_answer_maps_beyond": p2_answer_maps_beyond})
