"""The graded results, recomputed by trusted code from a submission's own artifacts. Runs in
the recomputation, a child the grader forks for each problem (course/grading/scoring.py), or
as this command:

    python -m course.grading.recompute SUBMISSION/problemN/results [--problem problemN]
                                       [--data_dir DIR]

Instructors only. A student can write any number into metrics.json; the results points judge
instead the numbers recomputed here, with the reference's own functions, from the files the
runs leave behind (the grader imports the repository's code, never the submission's):

    problem1  model_{run}.pth of the six runs, greedy-decoded on data/addition/test.csv
              (test_exact_match, test_token_accuracy); training_log_{run}.json (steps_to_95,
              late_val_exact_match), tied to its checkpoint: same config, and a last
              validation point that the checkpoint reproduces on data/addition/val.csv;
              the n1000 verdict from the two recomputed test scores
    problem2  model_{scheme}.pth of the four schemes on data/offset/test.npy (in_range,
              beyond, the four buckets beyond 64), tied to training_log_{scheme}.json: same
              config, and a last test accuracy (positions 0..63) that the checkpoint
              reproduces
    problem3  model_{MAIN_RUN}.pth, tied to training_log_{MAIN_RUN}.json (same run and
              config, its last step, the homework's vocabulary): NUM_SAMPLES samples the
              grader draws from it with the reference sampler (seed SAMPLE_SEED,
              temperature 1), scored with the reference checker and RDKit (novelty against
              data/smiles/train.txt: novel_matches); the submission's samples file only
              compared with them (a mismatch is said); the twelve sweep logs
              (final_val_loss, trains, head_grad_norm_at_100), each the prescribed
              configuration of its cell and internally consistent (learning rates, steps)

recompute() returns {run: {quantity: {"value", "claimed", "status", "why"}}} for the graded
quantities of problemN/results/reference_bands.json (and its claimed ones), with status

    verified    an artifact supports value, and metrics.json agrees (or does not state it)
    claimed     a quantity the bands do not grade because only a training log states it
                (bands.CLAIMED): its value as the log gives it, shown, worth no points
    differs     an artifact supports value, metrics.json says otherwise or nothing: the
                submission's own evaluation has a bug; value is still the one judged
    unverified  no artifact supports a number (missing, too large, unreadable, another
                run's or another model's, a log that is not its checkpoint's): value None

Every file of a submission is read from at most its *_BYTES limit; a checkpoint only with
torch.load(weights_only=True), as an uncompressed archive, its config the prescribed one
(FREE_FIELDS aside) and its tensors the reference model's keys, shapes and dtypes before
load_state_dict. Any failure is "unverified" for that run, never an exception; only the
grader's own data failing its fingerprint (DATA_SHA1, course/grading/grader_data.py, which the
grader also checks before it reads any submission) raises, GraderDataError.
"""

import argparse
import atexit
import dataclasses
import hashlib
import io
import json
import math
import os
import resource
import socket
import stat
import statistics
import sys
import zipfile
from collections import Counter
from contextlib import contextmanager
from pathlib import Path

import torch
from rdkit import Chem

from course.grading.accounts import sandbox_user
from course.grading.bands import LATE_POINTS, P2_BUCKETS
from course.grading.grader_data import DATA_SHA1, GraderDataError, check_data  # noqa: F401
from course.grading.zygote import Zygote
from problem1.config import RUNS as P1_RUNS
from problem1.config import Config as P1Config
from problem1.config import run_name as p1_run_name
from problem1.dataset import AdditionDataset
from problem1.model import NUM_DIGITS, score_predictions
from problem1.train import steps_to_95, validate
from problem2.config import RUNS as P2_RUNS
from problem2.config import Config as P2Config
from problem2.dataset import SEQUENCE_LENGTHS, OffsetDataset
from problem2.evaluate import per_position_counts, position_metrics
from problem3.config import (
    LOG_EVERY,
    MAIN_RUN,
    SWEEP,
    VAL_EVERY,
    cell_name,
    differences,
    vocab_of,
)
from problem3.config import RUNS as P3_RUNS
from problem3.config import Config as P3Config
from problem3.evaluate import canonical, sample_metrics, sweep_entry
from problem3.sample import NUM_SAMPLES, sample_run
from problem3.train import lr_at_step
from provided.common import DATA_DIR, REPO_ROOT
from provided.data_files import read_smiles
from provided.smiles import HOMEWORK_TOKENS, SMILES_PATTERN, SPECIALS
from provided.submission import LOG_BYTES, METRICS_BYTES, SAMPLES_BYTES, WEIGHTS_BYTES
from tests import seam

# at most WEIGHTS_BYTES, LOG_BYTES, METRICS_BYTES or SAMPLES_BYTES of a submission's file are
# read: defined once, in provided/submission.py, whose `make submission` checks a student's
# files against them
# a config field a run may choose freely: another seed (or thread count) is the same experiment
FREE_FIELDS = {"problem1": ("seed",), "problem2": ("seed",), "problem3": ("seed", "threads")}
MAX_SEED = 2**32 - 1
# a log's last evaluation and the checkpoint's, recomputed here, may differ by this much
# (another device's rounding flips a few argmaxes); a claim may differ from the value by this
TIE_TOLERANCE = 0.005
CLAIM_TOLERANCE = 0.002
SAMPLE_TOKENS = 50  # Problem 3's max_len 52 less BOS and EOS: the longest sample
SAMPLE_SEED = 0  # the grader's draw from the main run's weights (sample.py's default seed)
# how far the scores of a submission's own samples file may lie from the grader's draw of
# the same weights: five binomial standard deviations at p = 1/2 over 1,000 samples
SAMPLES_AGREE = 5 * 0.5 / NUM_SAMPLES ** 0.5
P3_VOCAB_SIZE = len(SPECIALS) + len(HOMEWORK_TOKENS)
# Problem 2's training split, [sequences, length] (generate_datasets.OFFSET_SHAPES, which the
# autograder does not ship): what a prescribed run's config says it saw
P2_TRAIN_SHAPE = (20_000, SEQUENCE_LENGTHS["train"])
P2_BATCH = 200  # test sequences a forward pass: peak 150 MiB over the imports (1,000: 560)
NOT_STATED = object()  # a quantity metrics.json has no field for (it comes from a log)
ABSENT = object()  # a quantity metrics.json should state and does not


class Unverified(Exception):
    """Why no artifact supports a run's numbers (one sentence, naming the file)."""


# ------------------------------------------------------------------------------ entry point
def recompute(problem: str, results: Path, data_dir: Path = DATA_DIR, bands: dict | None = None,
              data_sha1: dict | None = DATA_SHA1) -> dict:
    """{run: {quantity: {"value", "claimed", "status", "why"}}} for every graded quantity of
    bands (default: problemN/results/reference_bands.json), recomputed from the artifacts in
    results (a submission's problemN/results/). data_sha1 None skips the data fingerprint
    (tests on tiny data). Never raises for a submission's files; GraderDataError if data_dir
    fails its fingerprint."""
    if bands is None:
        bands = json.loads((REPO_ROOT / problem / "results" / "reference_bands.json").read_text())
    check_data(problem, Path(data_dir), data_sha1)
    with one_thread():
        computed = RECOMPUTE[problem](Path(results), Path(data_dir))
    out = {}
    for run, quantities in bands.items():
        for quantity, band in quantities.items():
            entry = computed.get(run, {}).get(quantity)
            if band.get("graded", True):
                out.setdefault(run, {})[quantity] = entry or \
                    unverified("the grader does not recompute this quantity")
            elif str(band.get("not_graded", "")).startswith("claimed") and entry:
                out.setdefault(run, {})[quantity] = {**entry, "status": "claimed"} if \
                    entry["status"] in ("verified", "differs") else entry
    return out


@contextmanager
def one_thread():
    """torch on one CPU thread while the block runs (the budget is CPU seconds)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


# ---------------------------------------------------------------------------- the verdicts
def unverified(why: str, claimed=NOT_STATED) -> dict:
    """The entry of a quantity no artifact supports."""
    return {"value": None, "claimed": shown(claimed), "status": "unverified", "why": why}


def judged(value, claimed, why: str) -> dict:
    """The entry of a quantity an artifact supports (value, how it was found: why), with the
    student's claim from metrics.json (NOT_STATED: it has no field for it; ABSENT: missing)."""
    entry = {"value": value, "claimed": shown(claimed), "status": "verified", "why": why}
    if claimed is NOT_STATED:
        entry["why"] += "; metrics.json does not state it"
    elif claimed is ABSENT:
        entry.update(status="differs", why=why + "; metrics.json has no value for it")
    elif not agrees(value, claimed):
        entry.update(status="differs", why=f"{why}; metrics.json says {shown(claimed)!r}: the "
                                           "submission's evaluation disagrees with its artifacts")
    return entry


def agrees(value, claimed) -> bool:
    """Whether a claim is value (None for None; a number within CLAIM_TOLERANCE)."""
    if value is None or claimed is None:
        return value is None and claimed is None
    return is_number(claimed) and abs(float(claimed) - value) <= CLAIM_TOLERANCE


def is_number(x) -> bool:
    """A finite int or float (not a bool, not a 400-digit integer)."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return False
    try:
        return math.isfinite(float(x))
    except OverflowError:
        return False


def shown(claimed):
    """A claim as the report shows it: None for no claim, a number, else its repr cut short."""
    if claimed is NOT_STATED or claimed is ABSENT or claimed is None:
        return None
    return float(claimed) if is_number(claimed) else repr(claimed)[:40]


def claim(metrics, *keys):
    """metrics[key0][key1]...: the student's number, or ABSENT where a level is missing."""
    for key in keys:
        try:
            metrics = metrics[key]
        except (KeyError, IndexError, TypeError):
            return ABSENT
    return metrics


# ---------------------------------------------------------------------- submission's files
def read_capped(path: Path, limit: int) -> bytes:
    """The bytes of a regular file (no link, no FIFO) of at most limit bytes, or Unverified."""
    try:
        info = os.lstat(path)
    except OSError:
        raise Unverified(f"there is no {path.name}") from None
    if not stat.S_ISREG(info.st_mode):
        raise Unverified(f"{path.name} is not a regular file")
    if info.st_size > limit:
        raise Unverified(f"{path.name} holds {info.st_size} bytes, over the {limit} read")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(fd, "rb") as f:
            data = f.read(limit + 1)
    except OSError as err:
        raise Unverified(f"{path.name} cannot be read ({err.strerror})") from None
    if len(data) > limit:
        raise Unverified(f"{path.name} holds over the {limit} bytes read")
    return data


def read_json_capped(path: Path, limit: int = LOG_BYTES):
    """The JSON in path (read_capped), or Unverified."""
    data = read_capped(path, limit)
    try:
        return json.loads(data)
    except (ValueError, RecursionError):  # bad JSON or UTF-8, a 5,000-digit number, nesting
        raise Unverified(f"{path.name} is not valid JSON") from None


def read_metrics(results: Path):
    """The student's metrics.json, or {} where there is none to read (then nothing is claimed)."""
    try:
        return read_json_capped(results / "metrics.json", METRICS_BYTES)
    except Unverified:
        return {}


def read_checkpoint(path: Path) -> dict:
    """{'config': dict, 'model': {name: tensor}, ...} from a torch.save archive of at most
    WEIGHTS_BYTES, loaded with weights_only=True by a weights reader (read_weights);
    Unverified otherwise. An archive must hold its entries uncompressed (torch.save's own),
    so its size bounds what loading allocates."""
    data = read_capped(path, WEIGHTS_BYTES)
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            entries = archive.infolist()
    except (zipfile.BadZipFile, ValueError, OSError, EOFError):
        raise Unverified(f"{path.name} is not a torch.save archive") from None
    if any(e.compress_type != zipfile.ZIP_STORED for e in entries) or \
            sum(e.file_size for e in entries) > WEIGHTS_BYTES:
        raise Unverified(f"{path.name} holds compressed entries: torch.save writes none")
    reply = read_weights(data)
    if "error" in reply:
        raise Unverified(f"{path.name}: {reply['error']}"[:300])
    checkpoint = reply.get("checkpoint")
    if not isinstance(checkpoint, dict) or not isinstance(checkpoint.get("config"), dict) \
            or not isinstance(checkpoint.get("model"), dict):
        raise Unverified(f"{path.name} is not a checkpoint of this repository (config, model)")
    return checkpoint


@dataclasses.dataclass
class WeightsReaders:
    """Where weights are parsed: the zygote that forks a weights reader per archive
    (course/grading/weights.py) and the sandbox user it runs as. The grader gives its own
    (set_readers); otherwise the first archive starts a zygote of its own and takes a user
    (root only)."""
    zygote: object = None
    uid: int | None = None
    gid: int | None = None


READERS = WeightsReaders()
READ_SECONDS = 120


def set_readers(zygote_path: str, uid: int, gid: int) -> None:
    """Parse weights in readers forked by the zygote at zygote_path, as uid:gid."""
    READERS.zygote, READERS.uid, READERS.gid = Zygote.at(zygote_path), uid, gid


def read_weights(data: bytes) -> dict:
    """A weights reader's answer to an archive: {"checkpoint": {...}} with the tensors
    rebuilt from raw bytes (tests/seam.py's decoding: nothing is unpickled here), or
    {"error": why}."""
    if READERS.zygote is None:
        READERS.zygote = Zygote()
        atexit.register(READERS.zygote.close)
        user = sandbox_user()
        READERS.uid, READERS.gid = user.uid, user.gid
    ours, theirs = socket.socketpair()
    try:
        READERS.zygote.fork("weights", {"uid": READERS.uid, "gid": READERS.gid},
                            theirs.fileno())
    finally:
        theirs.close()
    try:
        with ours:
            ours.settimeout(READ_SECONDS)
            seam.send(ours, data)
            message = seam.receive(ours)
        if message is None:
            return {"error": "its reader ended without an answer (a hostile archive?)"}
        tree, blobs = seam.unpack(message)
        reply = seam.Decoder(blobs, _no_handles).decode(tree)
    except (OSError, seam.SeamError) as err:
        return {"error": f"its reader failed ({type(err).__name__})"}
    return reply if isinstance(reply, dict) else {"error": "its reader's answer is malformed"}


def _no_handles(node):
    raise seam.SeamError("a weights reader sends data only")


# ------------------------------------------------------------------ configs and checkpoints
def saved_config(config_class, saved: dict, name: str):
    """config_class(**saved), or Unverified (a field it lacks: another kind of run)."""
    try:
        return config_class(**saved)
    except (TypeError, ValueError):
        raise Unverified(f"{name} holds another kind of run's config") from None


def check_prescribed(problem: str, config, prescribed, name: str) -> None:
    """Unverified unless config is prescribed, but for FREE_FIELDS (each a whole number)."""
    saved = dataclasses.asdict(config)
    for field in FREE_FIELDS[problem]:
        value = saved[field]
        if isinstance(value, bool) or not isinstance(value, int) or \
                not 0 <= value <= MAX_SEED:
            raise Unverified(f"{name}: its {field} {value!r} is not a whole number")
    wanted = {**dataclasses.asdict(prescribed), **{f: saved[f] for f in FREE_FIELDS[problem]}}
    changed = differences(saved, wanted)
    if changed:
        raise Unverified(f"{name} is not the prescribed run {prescribed.run} "
                         f"({'; '.join(changed)[:200]})")


def check_state(model: torch.nn.Module, state: dict, name: str) -> None:
    """Unverified unless state holds exactly model's tensors: keys, shapes, dtypes, strided,
    finite (checked before load_state_dict, which then cannot fail)."""
    expected = model.state_dict()
    if set(state) != set(expected):
        missing = sorted(set(expected) - set(state))
        extra = sorted(str(k)[:40] for k in set(state) - set(expected))
        raise Unverified(f"{name} holds another model's weights (missing {missing[:3]}, "
                         f"unexpected {extra[:3]})")
    for key, tensor in expected.items():
        given = state[key]
        if not isinstance(given, torch.Tensor) or given.layout != torch.strided or \
                given.device.type != "cpu" or given.shape != tensor.shape or \
                given.dtype != tensor.dtype:
            shape = tuple(given.shape) if isinstance(given, torch.Tensor) else type(given).__name__
            raise Unverified(f"{name} holds another model's weights ({key}: {shape}, not "
                             f"{tuple(tensor.shape)} {tensor.dtype})")
        if given.is_floating_point() and not torch.isfinite(given).all():
            raise Unverified(f"{name} holds non-finite weights ({key})")


def load_run(problem: str, path: Path, config_class, prescribed, checkpoint=None):
    """(model in eval mode, its Config) from a checkpoint of the prescribed run (read from
    path unless given); Unverified otherwise. build_model's seeding (Problem 2) leaves the
    process's generator as it was."""
    checkpoint = read_checkpoint(path) if checkpoint is None else checkpoint
    config = saved_config(config_class, checkpoint["config"], path.name)
    check_prescribed(problem, config, prescribed, path.name)
    with torch.random.fork_rng(devices=[]):
        model = config.build_model()
    check_state(model, checkpoint["model"], path.name)
    model.load_state_dict(checkpoint["model"])
    return model.eval(), config


def weights_digest(model: torch.nn.Module) -> str:
    """SHA-1 of a model's tensors, by name: two runs with one digest hold the same weights."""
    digest = hashlib.sha1()
    for key, tensor in sorted(model.state_dict().items()):
        digest.update(key.encode())
        digest.update(tensor.detach().contiguous().numpy().tobytes())
    return digest.hexdigest()


def load_runs(problem: str, results: Path, config_class, prescribed: dict) -> dict:
    """{run: (model, config) or the Unverified} for each prescribed run (run -> Config);
    runs whose checkpoints hold the same weights are all unverified."""
    loaded = {}
    for run, config in prescribed.items():
        try:
            loaded[run] = load_run(problem, results / f"model_{run}.pth", config_class, config)
        except Unverified as err:
            loaded[run] = err
        except Exception as err:  # whatever a hostile file may still cause: that run only
            loaded[run] = Unverified(f"model_{run}.pth cannot be used ({type(err).__name__})")
    digests = {run: weights_digest(item[0]) for run, item in loaded.items()
               if not isinstance(item, Unverified)}
    for run, digest in digests.items():
        twins = [other for other, d in digests.items() if d == digest and other != run]
        if twins:
            loaded[run] = Unverified(f"model_{run}.pth holds the same weights as "
                                     f"model_{twins[0]}.pth")
    return loaded


def check_log_config(log, config, name: str) -> None:
    """Unverified unless log is a finished log of config's run: its run and config saved."""
    if not isinstance(log, dict) or log.get("run") != config.run or \
            log.get("config") != dataclasses.asdict(config):
        raise Unverified(f"{name} is not the log of its checkpoint (run or config differ)")


def tied(logged, recomputed: float, what: str, name: str) -> None:
    """Unverified unless the log's last evaluation is the checkpoint's, recomputed here."""
    if not is_number(logged) or abs(logged - recomputed) > TIE_TOLERANCE:
        raise Unverified(f"{name}'s last {what} {shown(logged)!r} is not its checkpoint's "
                         f"({recomputed:.4f}): the log and the weights are of different runs")


def fractions(values, count: int) -> bool:
    """Whether every value is k / count for a whole k in 0..count (a score over a split)."""
    return all(is_number(v) and 0 <= v <= 1 and abs(v * count - round(v * count)) < 1e-6
               for v in values)


# ------------------------------------------------------------------------------- Problem 1
def problem1(results: Path, data_dir: Path) -> dict:
    """{run: {test_exact_match, test_token_accuracy, steps_to_95, late_val_exact_match},
    "verdicts": {reversed_beats_forward_n1000}}: entries (judged / unverified)."""
    metrics = read_metrics(results)
    splits = {(order, split): AdditionDataset(data_dir, split, order)
              for order in ("forward", "reversed") for split in ("val", "test")}
    prescribed = {run: P1Config(**options) for run, options in P1_RUNS.items()}
    out = {}
    for run, loaded in load_runs("problem1", results, P1Config, prescribed).items():
        out[run] = p1_run(run, loaded, results, splits, metrics.get(run) if
                          isinstance(metrics, dict) else None)
    out["verdicts"] = {"reversed_beats_forward_n1000": p1_verdict(out, metrics)}
    return out


def p1_run(run: str, loaded, results: Path, splits: dict, claims) -> dict:
    """One run's four entries: the test scores from its checkpoint, the log's two numbers
    once the log is tied to that checkpoint."""
    names = ("test_exact_match", "test_token_accuracy", "steps_to_95")
    claimed = {q: claim(claims, q) for q in names}
    if isinstance(loaded, Unverified):
        return {**{q: unverified(str(loaded), claimed[q]) for q in names},
                "late_val_exact_match": unverified(str(loaded))}
    model, config = loaded
    exact, token = validate(model, splits[config.digit_order, "test"])
    source = f"model_{run}.pth on the test split"
    out = {"test_exact_match": judged(exact, claimed["test_exact_match"], source),
           "test_token_accuracy": judged(token, claimed["test_token_accuracy"], source)}
    try:
        points = p1_log(results / f"training_log_{run}.json", config,
                        model, splits[config.digit_order, "val"])
    except Unverified as err:
        return {**out, "steps_to_95": unverified(str(err), claimed["steps_to_95"]),
                "late_val_exact_match": unverified(str(err))}
    late = statistics.fmean(point["val_exact_match"] for point in points[-LATE_POINTS:])
    source = f"training_log_{run}.json, tied to model_{run}.pth"
    return {**out, "steps_to_95": judged(steps_to_95(points), claimed["steps_to_95"], source),
            "late_val_exact_match": judged(late, NOT_STATED, source)}


def p1_log(path: Path, config, model, val) -> list[dict]:
    """The validation points [{step, val_exact_match, ...}] of a run's log, or Unverified
    unless it is its checkpoint's (config; a validation every eval_every steps, each a
    score over val; its steps_to_95; its last point what the checkpoint scores on val)."""
    log = read_json_capped(path)
    check_log_config(log, config, path.name)
    points = log.get("log")
    steps = list(range(config.eval_every, config.steps + 1, config.eval_every))
    if not isinstance(points, list) or not all(isinstance(p, dict) for p in points) or \
            [p.get("step") for p in points] != steps:
        raise Unverified(f"{path.name} does not validate every {config.eval_every} steps "
                         f"up to {config.steps}")
    if not fractions([p.get("val_exact_match") for p in points], len(val)) or \
            not fractions([p.get("val_token_accuracy") for p in points], 4 * len(val)):
        raise Unverified(f"{path.name} holds validation scores that no model scores on the "
                         f"{len(val)} validation sums")
    if log.get("steps_to_95") != steps_to_95(points):
        raise Unverified(f"{path.name} says steps_to_95 {shown(log.get('steps_to_95'))!r}, "
                         f"its own points {steps_to_95(points)}")
    tied(points[-1]["val_exact_match"], greedy_exact_match(model, val),
         "validation exact match", path.name)
    return points


def greedy_exact_match(model, dataset) -> float:
    """validate's exact match over a split (AdditionDataset), in one teacher-forced pass at
    half the cost: a sum is decoded right greedily iff the argmax over the digit logits is
    right at each of its 4 positions after the true prefix (the greedy prefix is then the
    true one, by induction), so the two fractions are the same."""
    with torch.inference_mode():
        logits, _ = model(dataset.src, dataset.tgt_in)  # [N, 4, vocab]
    return score_predictions(logits[..., :NUM_DIGITS].argmax(dim=-1), dataset.tgt_out)[0]


def p1_verdict(out: dict, metrics) -> dict:
    """reversed n1000's test exact match above forward n1000's, from the recomputed scores."""
    pair = (p1_run_name("reversed", 1000), p1_run_name("forward", 1000))
    entries = [out[run]["test_exact_match"] for run in pair]
    claims = [claim(metrics, run, "test_exact_match") for run in pair]
    claimed = float(claims[0] > claims[1]) if all(map(is_number, claims)) else ABSENT
    if any(e["value"] is None for e in entries):
        return unverified(f"needs both n1000 test scores ({pair[0]}, {pair[1]})", claimed)
    return judged(float(entries[0]["value"] > entries[1]["value"]), claimed,
                  "from the two recomputed n1000 test exact matches")


# ------------------------------------------------------------------------------- Problem 2
def problem2(results: Path, data_dir: Path) -> dict:
    """{scheme: {in_range, beyond, bucket_64-79, ..., bucket_112-127}}: entries."""
    metrics = read_metrics(results)
    test = OffsetDataset(data_dir, "test", k=P2Config.k)
    sequences, length = P2_TRAIN_SHAPE
    prescribed = {scheme: P2Config(**options, train_sequences=sequences, train_length=length)
                  for scheme, options in P2_RUNS.items()}
    return {scheme: p2_run(scheme, loaded, results, test, metrics.get(scheme) if
                           isinstance(metrics, dict) else None)
            for scheme, loaded in load_runs("problem2", results, P2Config, prescribed).items()}


def p2_run(scheme: str, loaded, results: Path, test, claims) -> dict:
    """One scheme's six entries from its checkpoint, once its log is tied to it."""
    names = ["in_range", "beyond", *(f"bucket_{b}" for b in P2_BUCKETS)]
    claimed = {"in_range": claim(claims, "in_range"), "beyond": claim(claims, "beyond"),
               **{f"bucket_{b}": claim(claims, "beyond_buckets", i)
                  for i, b in enumerate(P2_BUCKETS)}}
    try:
        if isinstance(loaded, Unverified):
            raise loaded
        model, config = loaded
        counts = per_position_counts(model, test.tokens, test.targets, P2_BATCH)
        found = position_metrics(counts["correct"], counts["count"])
        p2_log(results / f"training_log_{scheme}.json", config, found["in_range"])
    except Unverified as err:
        return {q: unverified(str(err), claimed[q]) for q in names}
    values = {"in_range": found["in_range"], "beyond": found["beyond"],
              **{f"bucket_{b}": v for b, v in zip(P2_BUCKETS, found["beyond_buckets"])}}
    source = f"model_{scheme}.pth on the test split"
    return {q: judged(values[q], claimed[q], source) for q in names}


def p2_log(path: Path, config, in_range: float) -> None:
    """Unverified unless path is the checkpoint's log: its config, one record per epoch,
    and a last test accuracy (positions 0..63) what the checkpoint scores (in_range)."""
    log = read_json_capped(path)
    check_log_config(log, config, path.name)
    records = log.get("log")
    if not isinstance(records, list) or not all(isinstance(r, dict) for r in records) or \
            [r.get("epoch") for r in records] != list(range(1, config.epochs + 1)):
        raise Unverified(f"{path.name} does not record the {config.epochs} epochs")
    per_epoch = math.ceil(config.train_sequences / config.batch_size)
    if [r.get("step") for r in records] != [e * per_epoch for e in range(1, config.epochs + 1)]:
        raise Unverified(f"{path.name} does not take {per_epoch} steps an epoch")
    tied(records[-1].get("test_accuracy"), in_range, "test accuracy", path.name)


# ------------------------------------------------------------------------------- Problem 3
def problem3(results: Path, data_dir: Path) -> dict:
    """{cell: {final_val_loss, trains, head_grad_norm_at_100}, "main": {well_formed,
    validity, uniqueness, novelty}}: entries."""
    metrics = read_metrics(results)
    sweep = claim(metrics, "sweep")
    rows = {}
    for entry in sweep if isinstance(sweep, list) else []:
        try:
            rows[cell_name(entry["norm"], entry["lr"], entry["warmup"])] = entry
        except (KeyError, TypeError, ValueError, OverflowError):
            continue
    out = {}
    for run, options in SWEEP.items():
        cell = cell_name(options["norm"], options["lr"], options["warmup"])
        prescribed = P3Config(**options, vocab_size=P3_VOCAB_SIZE)
        out[cell] = p3_cell(results / f"training_log_{run}.json", prescribed, rows.get(cell))
    out["main"] = p3_main(results, data_dir / "smiles" / "train.txt",
                          claim(metrics, "main", "by_step", -1))
    return out


def p3_cell(path: Path, prescribed, row) -> dict:
    """A sweep cell's three entries from its log (p3_log), with metrics.json's row."""
    claimed = {"final_val_loss": claim(row, "final_val_loss"), "trains": claim(row, "trains")}
    if is_number(claimed["trains"]) or isinstance(claimed["trains"], bool):
        claimed["trains"] = float(claimed["trains"])
    try:
        log = p3_log(path, prescribed)
        entry = sweep_entry(log)
    except Unverified as err:
        return {"final_val_loss": unverified(str(err), claimed["final_val_loss"]),
                "trains": unverified(str(err), claimed["trains"]),
                "head_grad_norm_at_100": unverified(str(err))}
    at_100 = next(p["head_grad_norm"] for p in log["log"] if p["step"] == 100)
    source = f"{path.name}"
    return {"final_val_loss": judged(entry["final_val_loss"], claimed["final_val_loss"], source),
            "trains": judged(float(entry["trains"]), claimed["trains"], source),
            "head_grad_norm_at_100": judged(at_100, NOT_STATED, source)}


def p3_log(path: Path, prescribed) -> dict:
    """The log of a sweep run, or Unverified unless it is the prescribed run's and consistent:
    a point every LOG_EVERY steps with lr_at_step's rate and finite-or-null norms, a
    validation every VAL_EVERY steps, final_val_loss the last of them."""
    log = read_json_capped(path)
    if not isinstance(log, dict) or not isinstance(log.get("config"), dict):
        raise Unverified(f"{path.name} is not a training log")
    config = saved_config(P3Config, log["config"], path.name)
    check_prescribed("problem3", config, prescribed, path.name)
    if log.get("run") != config.run or log["config"] != dataclasses.asdict(config):
        raise Unverified(f"{path.name} is not a finished log of {config.run} (its run name, or "
                         "a config field it lacks)")
    points, val = log.get("log"), log.get("val")
    if not isinstance(points, list) or not all(isinstance(p, dict) for p in points) or \
            [p.get("step") for p in points] != list(range(LOG_EVERY, config.steps + 1, LOG_EVERY)):
        raise Unverified(f"{path.name} does not log every {LOG_EVERY} steps up to {config.steps}")
    for point in points:
        if not is_number(point.get("lr")) or not math.isclose(
                point["lr"], lr_at_step(point["step"], config.lr, config.warmup),
                rel_tol=1e-9) or not all(
                k in point and (point[k] is None or (is_number(point[k]) and point[k] >= 0))
                for k in ("head_grad_norm", "total_grad_norm")):
            raise Unverified(f"{path.name}, step {point['step']}: not the learning rate of its "
                             "schedule, or a gradient norm that is not a norm")
    if not isinstance(val, list) or not all(isinstance(v, dict) for v in val) or \
            [v.get("step") for v in val] != list(range(VAL_EVERY, config.steps + 1, VAL_EVERY)) \
            or not all("val_loss" in v and (v["val_loss"] is None or is_number(v["val_loss"]))
                       for v in val):
        raise Unverified(f"{path.name} does not validate every {VAL_EVERY} steps")
    if "final_val_loss" not in log or log["final_val_loss"] != val[-1]["val_loss"]:
        raise Unverified(f"{path.name}'s final_val_loss is not its last validation loss")
    return log


def p3_main(results: Path, train_path: Path, claims) -> dict:
    """The main run's four entries from its weights: NUM_SAMPLES samples the grader draws
    itself from model_{MAIN_RUN}.pth (the reference sampler, temperature 1, SAMPLE_SEED),
    scored by sample_metrics. The samples file the submission holds earns nothing by
    itself: its scores are compared with the grader's and a mismatch is said in the why."""
    names = ("well_formed", "validity", "uniqueness", "novelty")
    claimed = {q: claim(claims, q) for q in names}
    try:
        model, vocab = load_main(results)
    except Unverified as err:
        return {q: unverified(str(err), claimed[q]) for q in names}
    except Exception as err:  # whatever a hostile file may still cause: these entries only
        return {q: unverified(f"model_{MAIN_RUN}.pth cannot be used ({type(err).__name__})",
                              claimed[q]) for q in names}
    train = read_smiles(train_path)
    with torch.random.fork_rng(devices=[]):
        found = scored(sample_run(model, vocab, NUM_SAMPLES, 1.0, SAMPLE_SEED, "cpu"), train)
    source = (f"{NUM_SAMPLES} samples the grader drew from model_{MAIN_RUN}.pth (seed "
              f"{SAMPLE_SEED}, temperature 1), with the reference checker and RDKit"
              f"{samples_file_note(results / f'samples_{MAIN_RUN}.txt', found, train)}")
    return {q: judged(found[q], claimed[q], source) for q in names}


def load_main(results: Path):
    """(model, vocabulary) of the main run from model_{MAIN_RUN}.pth, or Unverified unless
    it is the prescribed run's, finished (its step the run's last), trained on the homework's
    vocabulary, and the checkpoint of training_log_{MAIN_RUN}.json (the same run and
    config, seed included)."""
    path = results / f"model_{MAIN_RUN}.pth"
    checkpoint = read_checkpoint(path)
    prescribed = P3Config(**P3_RUNS[MAIN_RUN], vocab_size=P3_VOCAB_SIZE)
    model, config = load_run("problem3", path, P3Config, prescribed, checkpoint)
    tokens = checkpoint.get("vocab")
    if not isinstance(tokens, list) or not all(isinstance(t, str) for t in tokens) or \
            sorted(tokens) != sorted(HOMEWORK_TOKENS):
        raise Unverified(f"{path.name} was not trained on the homework's vocabulary")
    if checkpoint.get("step") != config.steps:
        raise Unverified(f"{path.name} is not the run's last step ({config.steps})")
    log_name = f"training_log_{MAIN_RUN}.json"
    check_log_config(read_json_capped(results / log_name), config, log_name)
    return model, vocab_of(checkpoint)


def scored(samples: list[str], train: list[str]) -> dict:
    """sample_metrics of samples, novelty against the training strings (novel_matches)."""
    distinct = {c for c in map(canonical, samples) if c is not None}
    return sample_metrics(samples, novel_matches(distinct, train))


def samples_file_note(path: Path, found: dict, train: list[str]) -> str:
    """How the submission's own samples file compares with the grader's samples: nothing
    when its scores lie within SAMPLES_AGREE of the grader's (another sampler's draws of the
    same model), else one clause naming the file and the difference."""
    try:
        own = scored(read_samples(path), train)
    except Unverified as err:
        return f"; the submission's samples file was not compared ({err})"
    far = [f"{q} {own[q]:.3f} (the grader's {found[q]:.3f})" for q in found
           if (own[q] is None) != (found[q] is None)
           or (own[q] is not None and abs(own[q] - found[q]) > SAMPLES_AGREE)]
    if not far:
        return ""
    return (f"; {path.name} is not a sample of these weights: " + ", ".join(far)
            + " (it earns nothing by itself)")


def read_samples(path: Path) -> list[str]:
    """The NUM_SAMPLES lines of a samples file (blank lines are empty samples), or Unverified
    unless each could come from the homework's model: at most SAMPLE_TOKENS tokens, all of
    the homework's vocabulary."""
    try:
        text = read_capped(path, SAMPLES_BYTES).decode("utf-8")
    except UnicodeDecodeError:
        raise Unverified(f"{path.name} is not UTF-8 text") from None
    lines = text[:-1].split("\n") if text.endswith("\n") else None
    if lines is None or len(lines) != NUM_SAMPLES:
        raise Unverified(f"{path.name} does not hold {NUM_SAMPLES} lines, one sample each")
    for number, line in enumerate(lines, start=1):
        tokens = SMILES_PATTERN.findall(line)
        if "".join(tokens) != line or not set(tokens) <= HOMEWORK_TOKENS or \
                len(tokens) > SAMPLE_TOKENS:
            raise Unverified(f"{path.name}, line {number}: not a sample of the homework's model "
                             f"(tokens outside its vocabulary, or over {SAMPLE_TOKENS})")
    return lines


# ----------------------------------------------------------------------- novelty, exactly
# A distinct valid sample is novel unless some training string has its canonical SMILES.
# Canonicalizing all 100,000 training strings costs about 20 s, so only the candidates are:
# the strings whose molecule could be a sample's, by two invariants of the molecular graph
# that any SMILES of a molecule shows (heavy atoms per element, ring closures and triple
# bonds; then (element, degree) per heavy atom). About 3% of the training set remains.
FORMULA_CHARACTERS = frozenset("CcNnOoSsFlBr[]H()=#-123456789")
SYMBOLS = {"C": "C", "c": "C", "N": "N", "n": "N", "[nH]": "N", "O": "O", "o": "O", "S": "S",
           "s": "S", "F": "F", "Cl": "Cl", "Br": "Br"}
FORMULA_ELEMENTS = ("C", "N", "O", "S", "F", "Cl", "Br")


def novel_matches(distinct: set[str], train: list[str]) -> set[str]:
    """The members of distinct (canonical SMILES) that are the canonical SMILES of some
    training string: distinct & {canonical(t) for t in train}, canonicalizing only the
    training strings whose formula_key and degree_key some member's molecule shares."""
    molecules = [m for m in map(Chem.MolFromSmiles, distinct) if m is not None]
    formulas = {molecule_formula(m) for m in molecules} | {None}
    degrees = {molecule_degrees(m) for m in molecules} | {None}
    candidates = [t for t in train if formula_key(t) in formulas]
    candidates = [t for t in candidates if degree_key(t) in degrees]
    return distinct & {canonical(t) for t in candidates}


def formula_key(smiles: str) -> tuple | None:
    """(heavy atoms of each FORMULA_ELEMENTS, ring-closure digits, triple bonds) read from a
    SMILES string of the 22 tokens; None for any other string (then it is a candidate)."""
    count = smiles.count
    if not set(smiles) <= FORMULA_CHARACTERS or not (
            count("[") == count("]") == count("H") == count("[nH]") and
            count("l") == count("Cl") and count("r") == count("B") == count("Br")):
        return None
    atoms = (count("C") - count("Cl") + count("c"), count("N") + count("n"),
             count("O") + count("o"), count("S") + count("s"), count("F"), count("Cl"),
             count("Br"))
    return (*atoms, sum(count(d) for d in "123456789"), count("#"))


def molecule_formula(molecule) -> tuple:
    """formula_key of any SMILES of an RDKit molecule: ring closures are twice its cycle
    rank (bonds - atoms + fragments)."""
    symbols = Counter(atom.GetSymbol() for atom in molecule.GetAtoms())
    if set(symbols) - set(FORMULA_ELEMENTS):
        return ("another element",)
    rank = molecule.GetNumBonds() - molecule.GetNumAtoms() + len(Chem.GetMolFrags(molecule))
    triple = sum(b.GetBondType() == Chem.BondType.TRIPLE for b in molecule.GetBonds())
    return (*(symbols[e] for e in FORMULA_ELEMENTS), 2 * rank, triple)


def degree_key(smiles: str) -> tuple | None:
    """Sorted ((element, heavy-atom degree), count) of a SMILES string's graph, parsed from its
    tokens (branches, ring closures); None if a token is not of the 22 or the string does not
    parse (then it is a candidate)."""
    elements, degree, previous, branches, rings = [], [], None, [], {}
    tokens = SMILES_PATTERN.findall(smiles)
    if "".join(tokens) != smiles:
        return None
    try:
        for token in tokens:
            if token in SYMBOLS:
                elements.append(SYMBOLS[token])
                degree.append(0)
                if previous is not None:
                    degree[previous] += 1
                    degree[-1] += 1
                previous = len(elements) - 1
            elif token == "(":
                branches.append(previous)
            elif token == ")":
                previous = branches.pop()
            elif token.isdigit() and previous is not None:
                if token in rings:
                    degree[rings.pop(token)] += 1
                    degree[previous] += 1
                else:
                    rings[token] = previous
            elif token not in ("=", "#", "-"):
                return None
    except IndexError:
        return None
    return tuple(sorted(Counter(zip(elements, degree)).items()))


def molecule_degrees(molecule) -> tuple:
    """degree_key of any SMILES of an RDKit molecule."""
    return tuple(sorted(Counter((a.GetSymbol(), a.GetDegree())
                                for a in molecule.GetAtoms()).items()))


RECOMPUTE = {"problem1": problem1, "problem2": problem2, "problem3": problem3}


# ------------------------------------------------------------------------------------- CLI
def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", type=Path, help="a submission's problemN/results folder")
    parser.add_argument("--problem", choices=tuple(RECOMPUTE),
                        help="default: the results folder's parent's name")
    parser.add_argument("--data_dir", type=Path, default=DATA_DIR)
    args = parser.parse_args(argv)
    problem = args.problem or args.results.resolve().parent.name
    if problem not in RECOMPUTE:
        parser.error(f"say --problem: {args.results} is not under problem1..3/")
    start = cpu_seconds()
    found = recompute(problem, args.results, args.data_dir)
    for run, quantities in found.items():
        for quantity, entry in quantities.items():
            value = "-" if entry["value"] is None else f"{entry['value']:.6g}"
            print(f"{run:>20} {quantity:<24} {entry['status']:<10} {value:>10}  {entry['why']}")
    print(f"{problem}: {cpu_seconds() - start:.2f} CPU seconds", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
