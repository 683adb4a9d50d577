"""Formatting and reference-band helpers shared by the tables of every problem.

Every number is rounded once, half up, from its exact value: a logged value is the decimal
its JSON text writes (every float in the results JSON is its shortest repr, so
Fraction(repr(x)) is that text), and an average, a difference, a ratio or a standard
deviation of logged values is computed from those in exact arithmetic (fractions.Fraction;
a standard deviation as the square root of an exact variance, rounded by integer square
roots), never from a float mean. The bands in reference_bands.json stay floats for the
grader; load_bands reads them back as exact values."""

import math
from collections.abc import Callable
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

from provided.common import results_dir
from provided.results import read_json

DASH = "–"  # en dash: ranges and missing values


# ------------------------------------------------------------------------ exact numbers
class Root:
    """sign * the square root of an exact non-negative rational (a standard deviation, a
    correlation), kept exact: it orders and rounds without a float."""

    __slots__ = ("square", "sign")

    def __init__(self, square, sign: int = 1):
        self.square = Fraction(square)
        self.sign = -1 if sign < 0 and self.square else 1
        if self.square < 0:
            raise ValueError(f"square root of a negative number {self.square}")

    def _key(self) -> tuple:
        return (self.sign, self.sign * self.square)

    def __float__(self) -> float:
        return self.sign * math.sqrt(self.square)

    def __eq__(self, other) -> bool:
        return isinstance(other, Root) and self._key() == other._key()

    def __lt__(self, other: "Root") -> bool:
        return self._key() < other._key()

    def __le__(self, other: "Root") -> bool:
        return self._key() <= other._key()

    def __gt__(self, other: "Root") -> bool:
        return self._key() > other._key()

    def __hash__(self) -> int:
        return hash(("Root", self._key()))

    def __repr__(self) -> str:
        return f"Root({self.square}, sign={self.sign})"


def exact(value) -> Fraction | None:
    """A logged value as the exact decimal its JSON text writes (None stays None)."""
    if value is None or isinstance(value, Fraction):
        return value
    if isinstance(value, (int, Decimal)):  # bool included
        return Fraction(value)
    return Fraction(repr(float(value)))


def mean(values) -> Fraction:
    """The exact mean of logged values."""
    values = [exact(v) for v in values]
    return sum(values, Fraction(0)) / len(values)


def median(values) -> Fraction:
    """The exact median (the mean of the two middle values for an even count)."""
    values = sorted(exact(v) for v in values)
    middle = len(values) // 2
    if len(values) % 2:
        return values[middle]
    return (values[middle - 1] + values[middle]) / 2


def stdev(values) -> Root:
    """The exact sample standard deviation (n - 1)."""
    values = [exact(v) for v in values]
    centre = mean(values)
    return Root(sum(((v - centre) ** 2 for v in values), Fraction(0)) / (len(values) - 1))


def correlation(xs, ys) -> Root:
    """The exact Pearson correlation of two lists of logged values."""
    xs, ys = [exact(x) for x in xs], [exact(y) for y in ys]
    mx, my = mean(xs), mean(ys)
    sxy = sum(((x - mx) * (y - my) for x, y in zip(xs, ys)), Fraction(0))
    sxx = sum(((x - mx) ** 2 for x in xs), Fraction(0))
    syy = sum(((y - my) ** 2 for y in ys), Fraction(0))
    return Root(sxy * sxy / (sxx * syy), -1 if sxy < 0 else 1)


def half_up(value, places: int = 0) -> int:
    """round(value * 10**places), ties away from zero, exactly; value a logged number, a
    Fraction or a Root."""
    scale = 10 ** places
    if isinstance(value, Root):
        # the largest k with k - 1/2 <= sqrt(W), W = square * scale^2: (2k - 1)^2 <= 4W
        four_w = 4 * value.square * scale * scale
        return value.sign * ((math.isqrt(four_w.numerator // four_w.denominator) + 1) // 2)
    value = exact(value)
    k = math.floor(abs(value) * scale + Fraction(1, 2))
    return -k if value < 0 else k


# ------------------------------------------------------------------------- seed counts
# A seed counts towards "k of n seeds" for an ordering only where the difference exceeds its
# noise: NOISE_SES standard errors, a fraction of m trials (sums, targets, samples) having the
# binomial variance p (1 - p) / m. NOISE_RULE says so in the reports' sentences.
NOISE_SES = 2
NOISE_RULE = (f"a seed counts where the difference exceeds {NOISE_SES} standard errors of its "
              "counts (binomial)")


def binomial_variance(fraction, trials: int) -> Fraction:
    """The variance p (1 - p) / m of a fraction p of m trials, exactly."""
    p = exact(fraction)
    return p * (1 - p) / trials


def beyond_noise(difference, variance) -> bool:
    """Whether a positive difference exceeds NOISE_SES standard errors, sqrt(variance)."""
    difference = exact(difference)
    return difference > 0 and difference * difference > NOISE_SES ** 2 * exact(variance)


def clearly_below(low, low_trials: int, high, high_trials: int) -> bool:
    """Whether the fraction low (of low_trials) is below high (of high_trials) by more than
    the noise of the two counts."""
    return beyond_noise(exact(high) - exact(low), binomial_variance(low, low_trials)
                        + binomial_variance(high, high_trials))


# ----------------------------------------------------------------------------- formatting
def fmt(value, places: int = 4) -> str:
    """value rounded half up to `places` decimals from its exact value (a logged float from
    its decimal text: 0.64175 -> 0.6418, as a reader rounds the JSON; a Fraction or a Root
    as it is), or a dash for None. A negative value that rounds to zero keeps its sign."""
    if value is None:
        return DASH
    k = half_up(value, places)
    negative = value.sign < 0 if isinstance(value, Root) else exact(value) < 0
    digits = str(abs(k)).rjust(places + 1, "0")
    text = digits if places == 0 else f"{digits[:-places]}.{digits[-places:]}"
    return ("-" if negative else "") + text


def sci(value, digits: int = 3) -> str:
    """value in scientific notation with `digits` significant digits, rounded half up from
    its exact value (1.1920928955078125e-07 -> 1.19e-07)."""
    value = exact(value)
    if value == 0:
        return f"{0:.{digits - 1}e}"
    size = abs(value)
    exponent = len(str(size.numerator)) - len(str(size.denominator))  # within one of it
    while size >= Fraction(10) ** (exponent + 1):
        exponent += 1
    while size < Fraction(10) ** exponent:
        exponent -= 1
    k = half_up(size / Fraction(10) ** exponent, digits - 1)
    if k == 10 ** digits:
        k, exponent = k // 10, exponent + 1
    text = str(k)
    return (f"{'-' if value < 0 else ''}{text[0]}.{text[1:]}e{'-' if exponent < 0 else '+'}"
            f"{abs(exponent):02d}")


def fmt_int(value) -> str:
    return DASH if value is None else str(half_up(value))


def mean_sd(band: dict | None, places: int = 4, integer: bool = False) -> str:
    """'mean ± sd (n)' of an exact band (load_bands); 'value (1)' for a single seed; a dash
    for none."""
    if not band or not band["n_seeds"]:
        return DASH
    f = fmt_int if integer else (lambda v: fmt(v, places))
    if band["n_seeds"] == 1:
        return f"{f(band['mean'])} (1)"
    return f"{f(band['mean'])} ± {f(band['sd'])} ({band['n_seeds']})"


def span(values, places: int = 4) -> str:
    """'lowest–highest' of the values that are not None, or a dash."""
    values = [exact(v) for v in values if v is not None]
    return f"{fmt(min(values), places)}{DASH}{fmt(max(values), places)}" if values else DASH


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
def exact_band(band: dict, values: dict | None = None) -> dict:
    """band with exact numbers: its values (or `values`, {seed: exact value}, recomputed
    from the logs) as Fractions, and mean, sd, min and max computed from them exactly."""
    if values is None:
        values = {seed: exact(v) for seed, v in zip(band["seeds"], band["values"])}
    numbers = list(values.values())
    return {**band, "values": numbers, "seeds": list(values),
            "mean": mean(numbers) if numbers else None,
            "sd": stdev(numbers) if len(numbers) > 1 else None,
            "min": min(numbers, default=None), "max": max(numbers, default=None),
            "n_seeds": len(numbers), "exact": True}


# quantity -> (folder, run) -> its exact value, for a quantity whose band holds a float
# computed from the logs (an average) rather than a logged value
Recompute = dict[str, Callable[[Path, str], Fraction | None]]


def load_bands(problem: str, recompute: Recompute | None = None) -> dict:
    """reference_bands.json of a problem, {} if it does not exist yet, read exactly: each
    band's values as the decimals of the logged values, and each quantity of `recompute`
    recomputed from each seed's logs (it must agree with the band's float to 1e-9, else the
    bands are stale)."""
    path = results_dir(problem) / "reference_bands.json"
    if not path.exists():
        return {}
    from course.grading.bands import seed_dirs
    folders = seed_dirs(problem)
    out = {}
    for run, quantities in read_json(path).items():
        out[run] = {}
        for quantity, band in quantities.items():
            values = None
            if quantity in (recompute or {}):
                values = {seed: recompute[quantity](folders[seed], run) for seed in band["seeds"]}
                for seed, value in zip(band["seeds"], band["values"]):
                    if abs(float(values[seed]) - value) > 1e-9:
                        raise ValueError(
                            f"{path}: {run} {quantity} seed {seed} is {value}, the logs give "
                            f"{float(values[seed])}: run `python -m course.grading.bands`")
            out[run][quantity] = exact_band(band, values)
    return out


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


