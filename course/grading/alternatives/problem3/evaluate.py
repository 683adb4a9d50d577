"""Alternative solutions for problem3/evaluate.py (instructors only).

evaluate.py runs as a script, and the splice appends new top-level helpers after its
`if __name__ == "__main__"` block, so these bodies use no top-level helper. canonical,
outcome, in_bin, bin_label, EARLY_STEPS and OUTCOMES are the provided names of
problem3/evaluate.py, hence F821 here.
"""
# ruff: noqa: F821

import math

from problem3.config import TRAIN_THRESHOLD
from provided.smiles import tokenize


def is_well_formed(smiles: str) -> bool:
    """The homework's four syntactic rules, on the provided tokenizer's output.

    1. the tokens rejoin to the string (tokenize raises otherwise, and an unclosed bracket
       atom such as '[nH' cannot be tokenized, so rule 4 is checked by the same step);
    2. parentheses balance and the depth never goes negative;
    3. each ring digit's next occurrence closes it, and no ring is open at the end;
    4. bracket atoms close.
    Never raises: an empty or untokenizable string is not well-formed.
    """
    if not isinstance(smiles, str) or len(smiles) == 0:
        return False
    try:
        pieces = tokenize(smiles)
    except ValueError:
        return False
    if "".join(pieces) != smiles:  # rule 1, checked again here
        return False
    branches = []  # a stack of the open parentheses
    ring_open = {}  # ring label -> is it open now
    for piece in pieces:
        if piece.startswith("[") != piece.endswith("]"):  # rule 4
            return False
        if piece == "(":
            branches.append(piece)
        elif piece == ")":
            if not branches:
                return False
            branches.pop()
        elif (len(piece) == 1 and "0" <= piece <= "9") or (
                len(piece) == 3 and piece[0] == "%" and piece[1:].isdecimal()):
            ring_open[piece] = not ring_open.get(piece, False)
    if branches:
        return False
    return not any(ring_open.values())


def max_open_ring_span(smiles: str) -> int:
    """The longest distance in tokens between a ring digit and its closing partner; 0 when
    no ring closes. C1CC1 -> 3."""
    seen_at = {}  # ring label -> every token index where it occurs
    for index, piece in enumerate(tokenize(smiles)):
        if piece.isdecimal() or (piece[:1] == "%" and piece[1:].isdecimal()):
            seen_at.setdefault(piece, []).append(index)
    longest = 0
    for places in seen_at.values():
        # occurrences alternate opening, closing: pair the 1st with the 2nd, 3rd with 4th...
        for opened, closed in zip(places[0::2], places[1::2]):
            longest = max(longest, closed - opened)
    return longest


def sample_metrics(samples: list[str], train_canonical: set[str]) -> dict:
    """{'num_samples', 'well_formed', 'validity', 'uniqueness', 'novelty'} of a sample set.

    well_formed and validity are fractions of all samples (is_well_formed; canonical(s) is
    not None). uniqueness = distinct canonical SMILES among the valid / valid; novelty =
    distinct valid canonical SMILES absent from train_canonical / distinct valid (MOSES'
    definitions). uniqueness and novelty are None when there is nothing to divide by.
    """
    total = len(samples)
    n_well_formed = n_valid = 0
    distinct = set()
    for text in samples:
        if is_well_formed(text):
            n_well_formed += 1
        form = canonical(text)
        if form is not None:
            n_valid += 1
            distinct.add(form)
    novel = sum(1 for form in distinct if form not in train_canonical)
    return {
        "num_samples": total,
        "well_formed": n_well_formed / total if total else None,
        "validity": n_valid / total if total else None,
        "uniqueness": len(distinct) / n_valid if n_valid else None,
        "novelty": novel / len(distinct) if distinct else None,
    }


def breakdown(samples: list[str], key, bins) -> list[dict]:
    """One row per bin of key(sample), in the order of bins (inclusive (low, high) bounds,
    high None for no upper bound): {'bin': bin_label(bounds), 'count': samples in the bin,
    and for each of OUTCOMES the fraction of the bin's samples with that outcome (None for
    an empty bin)}."""
    tallies = [dict.fromkeys(OUTCOMES, 0) for _ in bins]
    for text in samples:
        value = key(text)
        result = None
        for position, bounds in enumerate(bins):
            if in_bin(value, bounds):
                if result is None:
                    result = outcome(text)
                tallies[position][result] += 1
    rows = []
    for bounds, tally in zip(bins, tallies):
        size = sum(tally.values())
        row = {"bin": bin_label(bounds), "count": size}
        for name in OUTCOMES:
            row[name] = tally[name] / size if size else None
        rows.append(row)
    return rows


def sweep_entry(log: dict) -> dict:
    """One row of the sweep table from a training log (as train.py writes it).

    Returns {'run', 'norm', 'lr', 'warmup', 'final_val_loss', 'trains': final validation
    loss below TRAIN_THRESHOLD (False when it is None), 'head_grad_norm_mean_100' and
    'head_grad_norm_max_100': the mean and maximum of head_grad_norm at the log points of
    EARLY_STEPS, None unless both points are logged and finite}.
    """
    settings = log["config"]
    at_step = {record["step"]: record.get("head_grad_norm") for record in log["log"]}
    early = [at_step.get(step) for step in EARLY_STEPS]
    usable = all(g is not None and math.isfinite(g) for g in early)
    loss = log["final_val_loss"]
    return {
        "run": log["run"],
        "norm": settings["norm"],
        "lr": settings["lr"],
        "warmup": settings["warmup"],
        "final_val_loss": loss,
        "trains": bool(loss is not None and loss < TRAIN_THRESHOLD),
        "head_grad_norm_mean_100": math.fsum(early) / len(early) if usable else None,
        "head_grad_norm_max_100": float(max(early)) if usable else None,
    }
