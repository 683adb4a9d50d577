"""Problem 3: is it the length or the ring span that the model finds hard?

    python -m course.tools.smiles_difficulty  # or `make difficulty`;
                                              # no training, about 10 s

metrics.json breaks the final model's samples down by length and by ring span separately
(`main.by_length`, `main.by_span`). Long spans only occur in long strings, so those two
tables cannot say which of the two goes with failure. This tool counts the outcomes of
every sample in the joint bins (length bin x span bin, the bins of problem3/evaluate.py)
and fits one logistic regression with both as predictors, so that each is measured with
the other held fixed.

Input: the committed 10,000 samples of the long run's final model at T = 1, seed 0
(results/samples_pre_lr0.001_w500_s4000_n10000.txt, `make samples10k`; its
first 1,000 are
results/samples_pre_lr0.001_w500_s4000.txt). Seeds 1-4 committed only their metrics, not
their samples, so this measurement is seed 0's; the JSON names the seeds without samples.

Per sample: its length in tokens, its longest closed ring span (max_open_ring_span: a ring
that never closes has no span, so an ill-formed sample is binned by the rings that did
close), and its outcome (valid, well-formed but invalid, ill-formed; problem3.evaluate).

Two regressions, fitted by Newton's method (no penalty), on length and span, each
centred and in units of 10 tokens:

    all           valid against not valid, over every sample
    well_formed   valid against well-formed but invalid, over the well-formed samples only
                  (every ring closes there, so the span is exact): the chemistry alone

Writes problem3/results/difficulty.json (strict JSON, atomically), counts only:

    {"run", "seed", "temperature", "samples_file", "num_samples", "seeds_without_samples",
     "length_bins", "span_bins", "length_span_correlation",
     "cells": [{"length": bin, "span": bin, "count", "valid", "well_formed"}],
     "logistic": {"all" | "well_formed": {"n", "positives", "intercept",
                  "length" | "span": {"per_10_tokens", "se"}}}}

Instructors only (course/tools/): evidence for the report, not part of the homework.
"""

import numpy as np

from course.grading.bands import seed_dirs
from problem3.config import MAIN_RUN
from problem3.evaluate import (
    LENGTH_BINS,
    SPAN_BINS,
    bin_label,
    in_bin,
    max_open_ring_span,
    outcome,
)
from provided.common import ArgumentParser, fail, results_dir, script
from provided.results import write_json
from provided.smiles import tokenize

NUM_LARGE = 10_000
SCALE = 10.0  # tokens per unit of the regression's predictors


def samples_path():
    return results_dir("problem3") / f"samples_{MAIN_RUN}_n{NUM_LARGE}.txt"


def describe(samples: list[str]) -> list[tuple[int, int, str]]:
    """(length in tokens, longest closed ring span, outcome) of each sample."""
    return [(len(tokenize(s)), max_open_ring_span(s), outcome(s)) for s in samples]


def bin_of(value: int, bins) -> str:
    return next(bin_label(b) for b in bins if in_bin(value, b))


def cells(rows: list[tuple[int, int, str]]) -> list[dict]:
    """Counts per (length bin, span bin), every pair of bins listed (empty ones too)."""
    table = {(bin_label(lb), bin_label(sb)): {"count": 0, "valid": 0, "well_formed": 0}
             for lb in LENGTH_BINS for sb in SPAN_BINS}
    for length, span, result in rows:
        cell = table[(bin_of(length, LENGTH_BINS), bin_of(span, SPAN_BINS))]
        cell["count"] += 1
        cell["valid"] += result == "valid"
        cell["well_formed"] += result != "ill_formed"
    return [{"length": lb, "span": sb, **counts} for (lb, sb), counts in table.items()]


def logistic(x: np.ndarray, y: np.ndarray, steps: int = 50) -> tuple[np.ndarray, np.ndarray]:
    """Maximum-likelihood logistic regression with an intercept column already in x:
    (coefficients, standard errors from the inverse of the information matrix)."""
    beta = np.zeros(x.shape[1])
    for _ in range(steps):
        p = 1.0 / (1.0 + np.exp(-x @ beta))
        info = x.T @ (x * (p * (1 - p))[:, None])
        step = np.linalg.solve(info, x.T @ (y - p))
        beta += step
        if np.max(np.abs(step)) < 1e-12:
            break
    p = 1.0 / (1.0 + np.exp(-x @ beta))
    info = x.T @ (x * (p * (1 - p))[:, None])
    return beta, np.sqrt(np.diag(np.linalg.inv(info)))


def fit(rows: list[tuple[int, int, str]]) -> dict:
    length = np.array([r[0] for r in rows], dtype=float)
    span = np.array([r[1] for r in rows], dtype=float)
    y = np.array([r[2] == "valid" for r in rows], dtype=float)
    x = np.column_stack([np.ones(len(rows)), (length - length.mean()) / SCALE,
                         (span - span.mean()) / SCALE])
    beta, se = logistic(x, y)
    return {"n": len(rows), "positives": int(y.sum()), "intercept": float(beta[0]),
            "length": {"per_10_tokens": float(beta[1]), "se": float(se[1])},
            "span": {"per_10_tokens": float(beta[2]), "se": float(se[2])}}


def measure(samples: list[str]) -> dict:
    rows = describe(samples)
    length = np.array([r[0] for r in rows], dtype=float)
    span = np.array([r[1] for r in rows], dtype=float)
    folders = seed_dirs("problem3")
    return {
        "run": MAIN_RUN, "seed": 0, "temperature": 1.0,
        "samples_file": samples_path().name, "num_samples": len(samples),
        "seeds_without_samples": [seed for seed, folder in folders.items()
                                  if not (folder / f"samples_{MAIN_RUN}.txt").exists()],
        "length_bins": [bin_label(b) for b in LENGTH_BINS],
        "span_bins": [bin_label(b) for b in SPAN_BINS],
        "length_span_correlation": float(np.corrcoef(length, span)[0, 1]),
        "cells": cells(rows),
        "logistic": {"all": fit(rows),
                     "well_formed": fit([r for r in rows if r[2] != "ill_formed"])},
    }


@script
def main(argv=None) -> int:
    ArgumentParser(__doc__).parse_args(argv)
    path = samples_path()
    if not path.exists():
        fail(f"{path} not found: `make samples10k` draws it "
             "(it needs the long run's weights)")
    samples = path.read_text().split("\n")[:-1]
    if len(samples) != NUM_LARGE:
        fail(f"{path} holds {len(samples)} samples, not {NUM_LARGE}")
    out = results_dir("problem3") / "difficulty.json"
    write_json(out, measure(samples))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
