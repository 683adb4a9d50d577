"""Formatting and reference-band helpers shared by the tables of every problem."""

from decimal import ROUND_HALF_UP, Decimal

from provided.common import results_dir
from provided.results import read_json

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
            parts.append(f"seed 0 alone for the other {len(members)} {noun}"
                         + ("s" if len(members) > 1 else ""))
        else:
            parts.append(f"seeds {seed_list(seeds)} (n = {len(seeds)}) for "
                         + ", ".join(members))
    return f"Seeds now: {path} holds " + "; ".join(parts) + "."


