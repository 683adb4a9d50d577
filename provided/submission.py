"""Pack what is graded into one zip to hand in (`make submission`), and check it.

Students: given; run it when your work is done and upload the zip it writes.

    python -m provided.submission [--out submission.zip]

The zip holds exactly what is graded, each file at its path in this folder, and nothing
else (no .venv, data/, caches, checkpoints, resume files or other weights):

    code      problemN/*.py: the files you fill in, and any module of your own beside them
    reports   problemN/REPORT.md
    results   problemN/results/*.json (metrics, training logs, attention maps, vocab,
              properties, ...), Problem 3's samples of its long run, and the figures
              problemN/results/figures/*.png
    weights   model_{run}.pth of the prescribed runs of Problems 1 and 2, and of Problem 3's
              long run, from which the grader recomputes their numbers (it samples the
              long run itself); the sweep's weights and the step checkpoints stay out

It then reads the zip back as the grader reads a submission and prints one line per
finding. An error is something the grader needs that is missing or that it cannot use: a
solution file missing or not compiling (its parts score 0), a file over the grader's size
limits, a run that would be unverified and why (a training log without its weights, weights
without their log, a metrics file whose runs have no weights, a file that is not valid JSON
or not a torch.save archive). A problem with no results at all is partial work, a warning:
its results points are not earned, its code is graded as usual. A figure that REPORT.md
shows and that is missing is a warning too.

Exit status 0: written, no errors (warnings may be listed). 1: written all the same, with
one line per error; the zip can still be handed in as partial work. 2: a bad flag or
folder, nothing written. The zip is written to a temporary file beside --out and renamed
into place, so an interrupted or failed run never leaves a half-written zip.

The size limits and the list of graded result files below are the grader's own: it reads
them from this module.
"""

import importlib
import io
import json
import os
import re
import sys
import tempfile
import zipfile
from pathlib import Path

from provided.common import REPO_ROOT, ArgumentParser, HomeworkError, fail, script

# What the grader takes from a submission: at most SUBMISSION_FILES files, none over
# SUBMISSION_FILE_BYTES, SUBMISSION_LIMIT_BYTES in all (the files unpacked, not the zip).
SUBMISSION_LIMIT_BYTES = 200 * 2**20
SUBMISSION_FILE_BYTES = 20 * 2**20
SUBMISSION_FILES = 5000
# at most this many bytes of a result file are read (the reference's are far smaller:
# Problem 1 weights 2.7 MB, Problem 2 79-112 KB, logs 1.3-16 KB, metrics 9-22 KB, samples 37 KB)
WEIGHTS_BYTES = 8 * 2**20
LOG_BYTES = 2**20
METRICS_BYTES = 5 * 2**20
SAMPLES_BYTES = 2**18

PROBLEMS = ("problem1", "problem2", "problem3")
WEIGHTS_PROBLEMS = ("problem1", "problem2")  # whose numbers are recomputed from the weights
# the files with solution regions (the parts' code): graded whole
SOLUTION_FILES = (
    "problem1/dataset.py", "problem1/attention.py", "problem1/model.py", "problem1/train.py",
    "problem1/evaluate.py",
    "problem2/dataset.py", "problem2/positional.py", "problem2/train.py", "problem2/evaluate.py",
    "problem3/dataset.py", "problem3/model.py", "problem3/train.py", "problem3/sample.py",
    "problem3/evaluate.py",
)
NOT_RESULTS = ("reference_bands.json",)  # the grader's own file, never a submission's
FIGURE_LINK = re.compile(r"\((results/figures/[^)\s]+\.png)\)")
MiB = 2**20


def graded_results(problem: str) -> dict[str, int]:
    """{file name in problemN/results: the most bytes of it the grader reads}: the results
    the grader recomputes and checks, per prescribed run of the run registry (RUNS in
    problemN/config.py): metrics.json, each run's training log, its weights (Problems 1 and
    2) and, for Problem 3, the weights and the samples of its long run."""
    config = importlib.import_module(f"{problem}.config")
    names = {"metrics.json": METRICS_BYTES}
    for run in config.RUNS:
        names[f"training_log_{run}.json"] = LOG_BYTES
        if problem in WEIGHTS_PROBLEMS:
            names[f"model_{run}.pth"] = WEIGHTS_BYTES
    if problem == "problem3":
        names[f"model_{config.MAIN_RUN}.pth"] = WEIGHTS_BYTES
        names[f"samples_{config.MAIN_RUN}.txt"] = SAMPLES_BYTES
    return names


def is_test_file(name: str) -> bool:
    base = name.rsplit("/", 1)[-1]
    return base == "conftest.py" or base.startswith("test_")


# ------------------------------------------------------------------------- what is packed
def submission_files(root: Path, graded: dict) -> dict[str, Path]:
    """{name in the zip: file} of everything graded under root. graded: {problem: its
    graded_results, or None where the run registry could not be read}."""
    files = {}

    def add(path: Path) -> None:
        if path.is_file():
            files[path.relative_to(root).as_posix()] = path

    for problem in PROBLEMS:
        folder, results = root / problem, root / problem / "results"
        for path in sorted(folder.glob("*.py")):
            if not is_test_file(path.name):
                add(path)
        add(folder / "REPORT.md")
        for path in sorted(results.glob("*.json")):
            if path.name not in NOT_RESULTS and not path.name.endswith(".partial.json"):
                add(path)
        for path in sorted((results / "figures").glob("*.png")):
            add(path)
        names = graded[problem]
        if names is None:  # no run registry: the files by their patterns
            names = [p.name for p in results.glob("samples_*.txt")]
            if problem in WEIGHTS_PROBLEMS:
                names += [p.name for p in results.glob("model_*.pth")]
        for name in names:
            if not name.endswith(".json"):
                add(results / name)
    return files


def write_zip(out: Path, files: dict[str, Path]) -> None:
    """files into the zip out, atomically: a temporary file beside out, renamed into place
    only once it is complete (a failure leaves no partial zip and any previous one as it
    was)."""
    fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            # strict_timestamps=False: a file dated before 1980 is stored as of 1980
            with zipfile.ZipFile(f, "w", zipfile.ZIP_DEFLATED, strict_timestamps=False) as zf:
                for name, path in files.items():
                    zf.write(path, name)
        os.chmod(tmp, 0o644)  # mkstemp's files are owner-only
        os.replace(tmp, out)
    except BaseException as err:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(err, OSError) and err.filename is None:
            err.filename = str(out)
        raise


# ---------------------------------------------------------------- checked as it is graded
def check(archive: zipfile.ZipFile, graded: dict) -> tuple[list[str], list[str]]:
    """(errors, warnings) of a written zip, read back as the grader reads it."""
    errors, warnings = [], []
    members = {info.filename: info for info in archive.infolist()}
    bad = archive.testzip()
    if bad is not None:
        errors.append(f"{bad} is damaged in the zip (a bad CRC): run this again")
    for name, info in members.items():
        if info.file_size > SUBMISSION_FILE_BYTES:
            errors.append(f"{name}: {amount(info.file_size)}, over the grader's "
                          f"{amount(SUBMISSION_FILE_BYTES)} a file: it is left out")
    total = sum(info.file_size for info in members.values())
    if total > SUBMISSION_LIMIT_BYTES:
        errors.append(f"the files come to {amount(total)}, over the grader's "
                      f"{amount(SUBMISSION_LIMIT_BYTES)}: files past it are left out")
    if len(members) > SUBMISSION_FILES:
        errors.append(f"{len(members)} files, over the grader's {SUBMISSION_FILES}")
    for name in SOLUTION_FILES:
        if name not in members:
            errors.append(f"{name} is missing: every part it holds scores 0")
    for name in members:
        if name.endswith(".py"):
            try:
                compile(archive.read(name), name, "exec")
            except SyntaxError as err:
                cost = ": every part it holds scores 0" if name in SOLUTION_FILES else ""
                errors.append(f"{name}, line {err.lineno}: {err.msg} (the file does not "
                              f"compile{cost})")
            except (ValueError, UnicodeDecodeError) as err:
                errors.append(f"{name} cannot be read as Python source ({err})")
    for problem in PROBLEMS:
        if f"{problem}/REPORT.md" not in members:
            errors.append(f"{problem}/REPORT.md is missing: its written answers are graded "
                          "from it")
        results_errors, results_warnings = check_results(archive, members, problem,
                                                         graded[problem])
        errors += results_errors
        warnings += results_warnings
    return errors, warnings


def check_results(archive: zipfile.ZipFile, members: dict, problem: str,
                  names: dict | None) -> tuple[list[str], list[str]]:
    """(errors, warnings) of one problem's results in the zip."""
    folder = f"{problem}/results"
    if names is None:
        return [], []  # the registry's failure is an error already
    present = {name for name in names if f"{folder}/{name}" in members}
    figures = [m for m in members if m.startswith(f"{folder}/figures/")]
    if not present:
        return [], [f"{folder}: no results (metrics.json, logs, weights): partial work, its "
                    "results points are not earned"]
    errors, warnings = [], []
    for name in sorted(present):
        path = f"{folder}/{name}"
        size = members[path].file_size
        if size > names[name]:
            errors.append(f"{path}: {amount(size)}, over the {amount(names[name])} the "
                          "grader reads: it is unverified")
        elif name.endswith(".json"):
            try:
                json.loads(archive.read(path))
            except (ValueError, RecursionError):
                errors.append(f"{path} is not valid JSON: the grader cannot read it (re-run "
                              "the step that writes it)")
        elif name.endswith(".pth") and not torch_archive(archive.read(path)):
            errors.append(f"{path} is not a torch.save archive (truncated?): the run is "
                          "unverified (train it again)")

    def missing(name: str) -> bool:
        return name not in present

    if missing("metrics.json"):
        errors.append(f"{folder}/metrics.json is missing: the results are graded only with it "
                      f"(run `python -m {problem}.evaluate`)")
    runs = sorted(name[len("training_log_"):-len(".json")] for name in names
                  if name.startswith("training_log_"))
    for run in runs:
        log, weights = f"training_log_{run}.json", f"model_{run}.pth"
        if problem in WEIGHTS_PROBLEMS:
            if missing(weights) and not missing(log):
                errors.append(f"{folder}/{weights} is missing beside its training log: the "
                              f"grader recomputes run {run} from its weights, so it is "
                              "unverified")
            elif missing(log) and not missing(weights):
                errors.append(f"{folder}/{log} is missing beside {weights}: the grader ties "
                              f"each checkpoint to its log, so run {run} is unverified")
            elif missing(log):
                errors.append(f"run {run} has neither {weights} nor {log} in {folder}: "
                              "it is unverified")
        elif missing(log):
            errors.append(f"{folder}/{log} is missing: run {run} is unverified")
        elif weights in names and missing(weights):
            errors.append(f"{folder}/{weights} is missing: the grader draws the samples it "
                          f"scores from these weights, so run {run}'s sample scores are "
                          "unverified")
    for name in names:
        if name.startswith("samples_") and missing(name):
            warnings.append(f"{folder}/{name} is missing: the grader scores its own samples "
                            "of the weights and compares them with this file (run "
                            f"`python -m {problem}.sample`)")
    report = f"{problem}/REPORT.md"
    if report in members:
        shown = FIGURE_LINK.findall(archive.read(report).decode("utf-8", "replace"))
        lost = sorted({f"{problem}/{link}" for link in shown} - set(figures))
        if lost:
            warnings.append(f"{report} shows {len(lost)} figure(s) that are missing: "
                            + ", ".join(lost))
    return errors, warnings


def torch_archive(data: bytes) -> bool:
    """Whether data is a zip of uncompressed entries, as torch.save writes (the grader
    loads nothing else)."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            return all(e.compress_type == zipfile.ZIP_STORED for e in archive.infolist())
    except (zipfile.BadZipFile, ValueError, OSError, EOFError):
        return False


def registry(problem: str) -> tuple[dict | None, str | None]:
    """(graded_results(problem), None), or (None, why) where the problem's run registry
    cannot be imported (its config.py imports your model code)."""
    try:
        return graded_results(problem), None
    except Exception as err:  # the student's own code, imported: anything can go wrong
        return None, (f"{problem}/config.py cannot be imported ({type(err).__name__}: "
                      f"{str(err).splitlines()[0] if str(err) else ''}): its runs' files are "
                      "not checked, fix that first")


def amount(size: int) -> str:
    """A size as the limits are set: 8.0 MiB, 256.0 KiB, 900 bytes."""
    if size >= MiB:
        return f"{size / MiB:.1f} MiB"
    return f"{size / 1024:.1f} KiB" if size >= 1024 else f"{size} bytes"


def size_text(size: int) -> str:
    return f"{size / 1e6:.1f} MB" if size >= 1e5 else f"{size / 1e3:.0f} KB"


# ----------------------------------------------------------------------------- the script
@script
def main(argv=None) -> int:
    parser = ArgumentParser(__doc__)
    parser.add_argument("--out", type=Path, default=Path("submission.zip"),
                        help="the zip to write (default: %(default)s)")
    parser.add_argument("--root", type=Path, default=REPO_ROOT,
                        help="the homework folder to pack (default: this one, %(default)s)")
    args = parser.parse_args(argv)
    root, out = args.root, args.out
    if not root.is_dir() or not any((root / p).is_dir() for p in PROBLEMS):
        fail(f"--root {root} holds no problem1/, problem2/ or problem3/ folder: give the "
             "homework folder")
    if out.suffix != ".zip":
        fail(f"--out {out} must end in .zip (Gradescope unpacks a zip)")
    if out.is_dir():
        fail(f"--out {out} is a folder: give a file name, e.g. {out / 'submission.zip'}")
    if not out.resolve().parent.is_dir():
        fail(f"--out {out}: the folder {out.parent} does not exist")
    graded, errors = {}, []
    for problem in PROBLEMS:
        graded[problem], why = registry(problem)
        if why:
            errors.append(why)
    files = submission_files(root, graded)
    if not files:
        raise HomeworkError(f"{root} holds none of the graded files: nothing to hand in")
    write_zip(out, files)
    with zipfile.ZipFile(out) as archive:
        found, warnings = check(archive, graded)
        unpacked = sum(info.file_size for info in archive.infolist())
    errors += found
    for line in warnings:
        print(f"warning: {line}", file=sys.stderr)
    for line in errors:
        print(f"error: {line}", file=sys.stderr)
    print(f"wrote {out}: {len(files)} files, {size_text(out.stat().st_size)} "
          f"({size_text(unpacked)} unpacked)"
          + (f"; {len(errors)} error(s) above: it can be handed in as it is, but what they "
             "name is not graded" if errors else ""))
    return 1 if errors else 0


if __name__ == "__main__":
    raise SystemExit(main())
