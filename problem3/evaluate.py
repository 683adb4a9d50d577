"""Evaluate the SMILES runs (Problem 3, Parts D and E) into results/metrics.json.

Students: you write the five Part D and E functions; the rest (RDKit checks, tables, main)
is given and need not be read.

    python evaluate.py

metrics.json holds:
    unigram_entropy  the validation loss of predicting tokens by their frequency alone
    sweep   one entry per _s1500 training log present: its settings, final validation loss,
            verdict (trains = final validation loss below 2.0), and the mean and maximum of
            the head gradient norm at the log points of steps 50 and 100
    main    for the long run: by_step (well-formed fraction, RDKit validity, uniqueness,
            novelty of 1,000 samples at T = 1 from each checkpoint and the final model);
            by_length and by_span (outcome fractions of the final model's samples);
            by_temperature (T = 0.7, 1.0, 1.3); examples of well-formed but invalid samples
results/properties.json holds QED, logP and molecular weight of the final model's valid
samples and of 1,000 training molecules, for the property figure.

Validity is RDKit's: Chem.MolFromSmiles(s) is not None and s is not empty. Uniqueness is
distinct canonical SMILES among the valid / valid; novelty is distinct valid canonical
SMILES absent from the canonicalized training set / distinct valid (MOSES' definitions).
"""

import argparse
import functools
import hashlib
import re
from collections import Counter
from pathlib import Path

import numpy as np
import torch
from rdkit import Chem, RDLogger
from rdkit.Chem import QED, Descriptors
from tqdm import tqdm

from problem3.config import MAIN_RUN, SWEEP, SWEEP_STEPS, TRAIN_THRESHOLD, load_model, vocab_of
from problem3.dataset import IGNORE_INDEX, SmilesDataset, build_vocab

# generate() is the homework's Part D and lives in sample.py, so sampling comes from there.
from problem3.sample import NUM_SAMPLES, sample_run
from provided.common import (
    ArgumentParser,
    HomeworkError,
    add_common_args,
    explicit_results_dir,
    missing_data_message,
    positive_int,
    script,
    setup,
)
from provided.data_files import locate_smiles_error, read_smiles
from provided.results import BadFileError, atomic_write_text, read_json, write_json
from provided.smiles import tokenize

RDLogger.DisableLog("rdApp.*")

NUM_PROPERTY_MOLECULES = 1000  # training molecules in the property figure
TEMPERATURES = (0.7, 1.0, 1.3)
EARLY_STEPS = (50, 100)
# Inclusive bins, in tokens; samples run from about 20 to 50 tokens with spans up to 45.
LENGTH_BINS = [(0, 25), (26, 30), (31, 35), (36, 40), (41, 45), (46, 50)]
SPAN_BINS = [(0, 9), (10, 19), (20, 29), (30, 39), (40, None)]
OUTCOMES = ("valid", "well_formed_invalid", "ill_formed")
RING_DIGIT = re.compile(r"^(\d|%\d\d)$")


# ------------------------------------------------------------------------ well-formedness
def is_well_formed(smiles: str) -> bool:
    """The homework's four syntactic rules, on the provided tokenizer's output.

    1. the tokens rejoin to the string (tokenize raises otherwise, and an unclosed bracket
       atom such as '[nH' cannot be tokenized, so rule 4 is checked by the same step);
    2. parentheses balance and the depth never goes negative;
    3. each ring digit's next occurrence closes it, and no ring is open at the end (a ring
       label is a single digit or a two-digit label %10 .. %99, one token each; %10 is a
       label of its own, neither 1 nor 0);
    4. bracket atoms close.
    Never raises: an empty or untokenizable string is not well-formed. The only exception
    to expect is tokenize's ValueError: catch that one, not every exception (a blanket
    except would hide a bug in the rules as "not well-formed").
    """
    # BEGIN SOLUTION
    if not smiles:
        return False
    try:
        tokens = tokenize(smiles)
    except ValueError:
        return False
    depth, open_rings = 0, set()
    for token in tokens:
        if token == "(":
            depth += 1
        elif token == ")":
            depth -= 1
            if depth < 0:
                return False
        elif RING_DIGIT.match(token):
            open_rings ^= {token}
    return depth == 0 and not open_rings
    # END SOLUTION


def ring_spans(tokens: list[str]) -> list[int]:
    """Token-index distance between each ring digit and the next occurrence that closes it."""
    opened, spans = {}, []
    for index, token in enumerate(tokens):
        if RING_DIGIT.match(token):
            if token in opened:
                spans.append(index - opened.pop(token))
            else:
                opened[token] = index
    return spans


def max_open_ring_span(smiles: str) -> int:
    """The longest distance in tokens between a ring digit and its closing partner; 0 when
    no ring closes. C1CC1 -> 3.

    Ring digits as in is_well_formed: single digits and two-digit labels %10 .. %99, each
    one token, a ring closed by the next occurrence of the same label (a ring left open
    counts for nothing). A string that tokenize rejects raises tokenize's ValueError (the
    samples it is asked about are decoded from vocabulary tokens, so they always tokenize).
    """
    # BEGIN SOLUTION
    return max(ring_spans(tokenize(smiles)), default=0)
    # END SOLUTION


# -------------------------------------------------------------------------------- RDKit
@functools.lru_cache(maxsize=1 << 16)
def canonical(smiles: str) -> str | None:
    """RDKit's canonical SMILES, or None if the string is not a valid molecule (cached: the
    metrics, outcomes and breakdowns of one sample set all ask about the same strings)."""
    if not smiles:
        return None
    mol = Chem.MolFromSmiles(smiles)
    return None if mol is None else Chem.MolToSmiles(mol)


def outcome(smiles: str) -> str:
    """'valid', 'well_formed_invalid' or 'ill_formed'."""
    if canonical(smiles) is not None:
        return "valid"
    return "well_formed_invalid" if is_well_formed(smiles) else "ill_formed"


def invalid_reason(smiles: str) -> str:
    """Why RDKit rejects a well-formed string: the first sanitization problem it reports."""
    mol = Chem.MolFromSmiles(smiles, sanitize=False)
    if mol is None:
        return "parse error"
    problems = Chem.DetectChemistryProblems(mol)
    return problems[0].Message() if problems else "sanitization failed"


def reason_category(reason: str) -> str:
    """A short class of RDKit's message: kekulization, valence, aromaticity, parse, other."""
    for prefix, category in [("Can't kekulize", "kekulization"), ("Explicit valence", "valence"),
                             ("non-ring atom", "aromatic atom outside a ring"),
                             ("parse error", "parse")]:
        if reason.startswith(prefix):
            return category
    return "other"


def sample_metrics(samples: list[str], train_canonical: set[str]) -> dict:
    """{'num_samples', 'well_formed', 'validity', 'uniqueness', 'novelty'} of a sample set.

    well_formed and validity are fractions of all samples (is_well_formed; canonical(s) is
    not None). uniqueness = distinct canonical SMILES among the valid / valid; novelty =
    distinct valid canonical SMILES absent from train_canonical / distinct valid (MOSES'
    definitions). uniqueness and novelty are None when there is nothing to divide by.
    samples is never empty here (evaluate.py draws 1,000): with no samples at all the
    fractions are undefined, and returning None for them or raising are both acceptable
    (no test passes an empty list).
    Call is_well_formed and canonical by these names, as this module defines them: the tests
    answer is_well_formed from a table, so that a Part D mistake costs no Part E points.
    """
    # BEGIN SOLUTION
    canon = [canonical(s) for s in samples]
    valid = [c for c in canon if c is not None]
    distinct = set(valid)
    return {
        "num_samples": len(samples),
        "well_formed": sum(map(is_well_formed, samples)) / len(samples),
        "validity": len(valid) / len(samples),
        "uniqueness": len(distinct) / len(valid) if valid else None,
        "novelty": len(distinct - train_canonical) / len(distinct) if distinct else None,
    }
    # END SOLUTION


def in_bin(value: int, bounds: tuple[int, int | None]) -> bool:
    low, high = bounds
    return value >= low and (high is None or value <= high)


def bin_label(bounds: tuple[int, int | None]) -> str:
    low, high = bounds
    return f"{low}+" if high is None else (str(low) if low == high else f"{low}-{high}")


def breakdown(samples: list[str], key, bins) -> list[dict]:
    """One row per bin of key(sample), in the order of bins (inclusive (low, high) bounds,
    high None for no upper bound): {'bin': bin_label(bounds), 'count': samples in the bin,
    and for each of OUTCOMES the fraction of the bin's samples with that outcome (None for
    an empty bin)}."""
    # BEGIN SOLUTION
    rows = []
    for bounds in bins:
        members = [s for s in samples if in_bin(key(s), bounds)]
        counts = Counter(outcome(s) for s in members)
        rows.append({"bin": bin_label(bounds), "count": len(members),
                     **{o: counts[o] / len(members) if members else None for o in OUTCOMES}})
    return rows
    # END SOLUTION


def properties(smiles: list[str]) -> dict:
    """QED, logP (Crippen) and molecular weight of each valid string."""
    mols = [Chem.MolFromSmiles(s) for s in smiles if s]
    mols = [m for m in mols if m is not None]
    return {"qed": [QED.qed(m) for m in mols], "logp": [Descriptors.MolLogP(m) for m in mols],
            "mol_wt": [Descriptors.MolWt(m) for m in mols]}


def train_canonical_set(train_path: Path, cache_dir: Path) -> set[str]:
    """The canonical SMILES of the training file, computed once and cached by file hash."""
    digest = hashlib.sha1(train_path.read_bytes()).hexdigest()[:16]
    cache = cache_dir / f"train_canonical_{digest}.txt"
    if cache.exists():
        return set(cache.read_text().split())
    strings = tqdm(read_smiles(train_path), desc=f"canonicalizing {train_path.name} (once, "
                   f"cached in {cache_dir})", unit="string", mininterval=2)
    result = {c for c in map(canonical, strings) if c is not None}
    atomic_write_text(cache, "\n".join(sorted(result)) + "\n")
    return result


# ---------------------------------------------------------------------------- sweep
def sweep_entry(log: dict) -> dict:
    """One row of the sweep table from a training log (as train.py writes it).

    Returns {'run', 'norm', 'lr', 'warmup', 'final_val_loss', 'trains': final validation
    loss below TRAIN_THRESHOLD (False when it is None), 'head_grad_norm_mean_100' and
    'head_grad_norm_max_100': the mean and maximum of head_grad_norm at the log points of
    EARLY_STEPS, None unless both points are logged and finite}.
    """
    # BEGIN SOLUTION
    config = log["config"]
    early = [r["head_grad_norm"] for r in log["log"] if r["step"] in EARLY_STEPS]
    finite = [g for g in early if g is not None]
    complete = len(early) == len(EARLY_STEPS) and len(finite) == len(early)
    final = log["final_val_loss"]
    return {
        "run": log["run"], "norm": config["norm"], "lr": config["lr"],
        "warmup": config["warmup"], "final_val_loss": final,
        "trains": final is not None and final < TRAIN_THRESHOLD,
        "head_grad_norm_mean_100": float(np.mean(finite)) if complete else None,
        "head_grad_norm_max_100": max(finite) if complete else None,
    }
    # END SOLUTION


def unigram_entropy(data_dir: Path) -> float:
    """Cross-entropy (nats per token) of predicting every validation target from the
    validation set's own token frequencies: the loss of a model that ignores its context."""
    train_path = data_dir / "smiles" / "train.txt"
    try:
        vocab = build_vocab(train_path)
    except ValueError as err:  # tokenize's message has no line number: find the line
        raise ValueError(locate_smiles_error(train_path, err)) from None
    targets = SmilesDataset(data_dir / "smiles" / "val.txt", vocab).targets
    counts = torch.bincount(targets[targets != IGNORE_INDEX], minlength=len(vocab)).double()
    p = counts[counts > 0] / counts.sum()
    return float(-(p * p.log()).sum())


def sweep(results_dir: Path, steps: int = SWEEP_STEPS) -> list[dict]:
    """One sweep_entry per training log of a steps-step run in results_dir."""
    entries = []
    for path in sorted(results_dir.glob(f"training_log_*_s{steps}.json")):
        try:
            entries.append(sweep_entry(read_json(path)))
        except (BadFileError, KeyError, TypeError, IndexError):
            raise HomeworkError(f"{path} is not a finished training log: delete it and "
                                "re-run that run") from None
    return entries


# ------------------------------------------------------------------------------ main run
def checkpoints(results_dir: Path, run: str, device) -> list[tuple]:
    """(step, model, vocab) of each step checkpoint of run and of its final model, by step;
    an empty list if the final model is missing."""
    final = results_dir / f"model_{run}.pth"
    if not final.exists():
        return []
    found = []
    for path in [*results_dir.glob(f"model_{run}_step*.pth"), final]:
        model, _, checkpoint = load_model(path, device)
        found.append((checkpoint["step"], model, vocab_of(checkpoint)))
    return sorted(found, key=lambda item: item[0])


def evaluate_main(results_dir: Path, run: str, train_path: Path, num_samples: int,
                  seed: int, device) -> dict | None:
    models = checkpoints(results_dir, run, device)
    if not models:
        print(f"skipping 'main': {results_dir / f'model_{run}.pth'} not found "
              f"(train it: see the README)")
        return None
    train_canon = train_canonical_set(train_path, results_dir / "cache")
    by_step = []
    for step, model, vocab in tqdm(models, desc=f"sampling {run}", unit="checkpoint"):
        samples = sample_run(model, vocab, num_samples, 1.0, seed, device)
        by_step.append({"step": step, **sample_metrics(samples, train_canon)})
        tqdm.write(f"step {step}: {by_step[-1]}")

    final = samples  # the final model's T = 1 samples, the same strings as sample.py's file
    by_temperature = []
    for temperature in TEMPERATURES:
        drawn = final if temperature == 1.0 else sample_run(model, vocab, num_samples,
                                                            temperature, seed, device)
        by_temperature.append({"temperature": temperature, **sample_metrics(drawn, train_canon)})

    wf_invalid = [s for s in final if outcome(s) == "well_formed_invalid"]
    train_smiles = read_smiles(train_path)
    train_sample = np.random.default_rng(seed).choice(
        train_smiles, min(NUM_PROPERTY_MOLECULES, len(train_smiles)), replace=False).tolist()
    write_json(results_dir / "properties.json", {
        "samples": properties(final), "train": properties(train_sample)})
    return {
        "run": run,
        "by_step": by_step,
        "by_length": breakdown(final, lambda s: len(tokenize(s)), LENGTH_BINS),
        "by_span": breakdown(final, max_open_ring_span, SPAN_BINS),
        "by_temperature": by_temperature,
        "outcomes": {o: sum(outcome(s) == o for s in final) / len(final) for o in OUTCOMES},
        "well_formed_invalid_reasons": dict(Counter(
            reason_category(invalid_reason(s)) for s in wf_invalid).most_common()),
        "examples_well_formed_invalid": [{"smiles": s, "reason": invalid_reason(s)}
                                         for s in wf_invalid[:12]],
    }


def previous_main(path: Path, run: str) -> dict | None:
    """The 'main' entry of an existing metrics.json for the same run, if there is one.

    The sweep needs only the committed logs, but the main run's evaluation needs its
    weights, which are not committed: re-evaluating the sweep on a fresh clone keeps the
    committed main-run numbers instead of dropping them.
    """
    if not path.exists():
        return None
    try:
        previous = read_json(path).get("main")
    except (BadFileError, AttributeError):
        raise HomeworkError(f"{path} is not a metrics file of this script: delete it and run "
                            "again") from None
    if previous is None or previous.get("run") != run:
        return None
    print(f"kept 'main' for {run} from the existing {path.name}")
    return previous


def parse_args(argv=None) -> argparse.Namespace:
    parser = ArgumentParser(__doc__)
    parser.add_argument("--run", default=MAIN_RUN, help="the long run (default %(default)s)")
    parser.add_argument("--num_samples", type=positive_int, default=NUM_SAMPLES)
    parser.add_argument("--sweep_steps", type=positive_int, default=SWEEP_STEPS,
                        help="the sweep's runs are the logs named *_s{sweep_steps}")
    add_common_args(parser, "problem3")
    args = parser.parse_args(argv)
    if (args.run, args.num_samples, args.sweep_steps) != (MAIN_RUN, NUM_SAMPLES, SWEEP_STEPS):
        explicit_results_dir(args, "problem3", f"an evaluation with --run {args.run} "
                             f"--num_samples {args.num_samples} --sweep_steps "
                             f"{args.sweep_steps}")
    return args


@script
def main(argv=None) -> int:
    args = parse_args(argv)
    device = setup(args)
    train_path = args.data_dir / "smiles" / "train.txt"
    if not train_path.exists():
        raise HomeworkError(missing_data_message(train_path))
    try:
        metrics = {"sweep": sweep(args.results_dir, args.sweep_steps),
                   "unigram_entropy": unigram_entropy(args.data_dir)}
    except (FileNotFoundError, ValueError) as err:
        raise HomeworkError(str(err)) from None
    print(f"sweep: {len(metrics['sweep'])} of {len(SWEEP)} runs present")
    main_metrics = evaluate_main(args.results_dir, args.run, train_path, args.num_samples,
                                 args.seed, device)
    if main_metrics is None:
        main_metrics = previous_main(args.results_dir / "metrics.json", args.run)
    if main_metrics is not None:
        metrics["main"] = main_metrics
    write_json(args.results_dir / "metrics.json", metrics)
    print(f"wrote {args.results_dir / 'metrics.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
