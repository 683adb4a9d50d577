"""Problem 2's report tables: each renders one marked table of course/reports/problem2.md from
problem2/results/ (metrics.json, reference_bands.json and, for the length-512 check, the
course's analysis.json)."""


from course.grading.bands import P2_BUCKETS
from course.tools.tables.style import (
    DASH,
    band_of,
    fmt,
    mean_sd,
    per_seed,
    seed_list,
    seeds_of,
    seeds_sentence,
    table,
)
from problem2.config import RUNS
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
            "between. Sections 1-4 give the evidence, the checks and the attention maps.")


TABLES["p2_summary"] = p2_summary
