"""Pack what is graded into one zip to hand in (`make submission`), and check it.

Students: given; run it when your work is done and upload the zip it writes.

    python -m provided.submission [--out submission.zip]
    python -m provided.submission --check [submission.zip] [--part p2b ...]

The zip holds exactly what is graded, each file at its path in this folder, and nothing
else (no .venv, data/, caches, checkpoints, resume files, other weights or tries' files):

    code      problemN/**.py: the files you fill in, and any module or package of your own
              in a problem folder (folder and file names that Python can import; no tests)
    data      problemN/**.{json,csv,txt,npy} outside results/, that your code reads:
              DATA_BYTES (4 MiB) in all
    reports   problemN/REPORT.md
    results   problemN/results/*.json (metrics, the prescribed runs' training logs,
              attention maps, vocab, properties, ...), Problem 3's samples of its long run,
              and the figures problemN/results/figures/*.png
    weights   model_{run}.pth of the prescribed runs of Problems 1 and 2, and of Problem 3's
              long run, from which the grader recomputes their numbers (it samples the
              long run itself); the sweep's weights and the step checkpoints stay out

It then reads the zip back as the grader reads a submission and prints one line per
finding. An error is something the grader needs that is missing or that it cannot use: a
solution file missing or not compiling (its parts score 0), a file over the grader's size
limits (data files over DATA_BYTES in all), a run that would be unverified and why (a
training log without its weights, weights without their log, a metrics file whose runs have
no weights, a file that is not valid JSON or not a torch.save archive). A warning is work
that is partial or that the grader takes otherwise than it stands: a problem with no
results at all (its results points are not earned, its code is graded as usual), a figure
that REPORT.md shows and that is missing, a file of a problem folder that is not packed, a
given function (or given file) that differs from the handout's (the grader runs the
handout's), and what no prescribed run wrote in a results folder: a try's files (a run name
no configuration of config.py has; they are left out), a metrics.json of a try's runs, a
figure drawn from another metrics.json than the one beside it.

--check [ZIP] (default submission.zip) then gives the grader's verdict on the public tests
before the deadline: it unpacks the files of ZIP that the grader takes into a scratch
folder, with the handout's tests, provided/ and given code (each given function you changed
is put back as the handout has it, and named), and runs the public tests there (--part p1b
for one part's, repeatable) under the grader's limits (provided/limits.py: its resource
limits, environment, syscall policy and time limits per test and per part; one line says
which cannot be applied on this machine). Its exit status is pytest's.

Exit status 0: written, no errors (warnings may be listed). 1: written all the same, with
one line per error; the zip can still be handed in as partial work. 2: a bad flag or
folder, nothing written. The zip is written to a temporary file beside --out and renamed
into place, so an interrupted or failed run never leaves a half-written zip.

The size limits, the rule of what is taken from a problem folder (taken_problem_files) and
the list of graded result files below are the grader's own: it reads them from this module.
"""

import ast
import importlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from provided import limits
from provided.common import REPO_ROOT, ArgumentParser, HomeworkError, fail, script
from provided.given import SNAPSHOT as GIVEN_SNAPSHOT

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

# What the grader takes from a problem folder outside results/ (besides REPORT.md), by
# taken_problem_files: Python code, problemN/**.py, where every folder name and the file's
# stem are identifiers (modules and packages Python can import; test files are not taken),
# and data files that code reads: the suffixes DATA_SUFFIXES, DATA_BYTES in all (the three
# problems together, taken in order of their paths until the next would pass it).
DATA_SUFFIXES = (".json", ".csv", ".txt", ".npy")
DATA_BYTES = 4 * MiB
# the given files that are the student's: a problem folder's __init__.py, empty in the
# handout, is taken as the student's own module (a helper written there is graded); every
# other given file (config.py, ...) is the handout's in the grader
OWN_GIVEN = tuple(f"{problem}/__init__.py" for problem in PROBLEMS)
# a try's files in a results folder: a run name that no prescribed configuration has
RUN_FILE = re.compile(r"^(?:training_log_(?P<log>.+?)(?<!\.partial)\.json|model_(?P<model>.+)\.pth"
                      r"|samples_(?P<samples>.+)\.txt|resume_(?P<resume>.+)\.pth)$")


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


def problem_file_kind(name: str) -> str | None:
    """What a file of a submission is to the grader, by its path relative to the root
    (posix): "code" or "data" (see taken_problem_files), "report" (REPORT.md), "results"
    (under problemN/results/, graded by its own rules), "skipped" (test files, caches,
    hidden files: never taken, never worth a word), "other" (not taken), or None outside
    the problem folders."""
    parts = name.split("/")
    if len(parts) < 2 or parts[0] not in PROBLEMS or any(p in ("", ".", "..") for p in parts):
        return None
    if parts[1] == "results":
        return "results"
    if any(p.startswith(".") or p == "__pycache__" for p in parts) or name.endswith(".pyc"):
        return "skipped"
    if name == f"{parts[0]}/REPORT.md":
        return "report"
    stem, dot, suffix = parts[-1].rpartition(".")
    if f"{dot}{suffix}" == ".py":
        if is_test_file(name):
            return "skipped"
        importable = all(p.isidentifier() for p in [*parts[1:-1], stem])
        return "code" if importable else "other"
    return "data" if f"{dot}{suffix}".lower() in DATA_SUFFIXES else "other"


def taken_problem_files(sizes: dict[str, int]) -> tuple[list[str], dict[str, str]]:
    """(the files of the problem folders, outside results/, that the grader takes, {file
    it does not take: why}) of a submission's {path relative to its root: bytes}: its code
    and REPORT.md, and its data files in order of their paths while they come to at most
    DATA_BYTES. Files that are never worth a word (tests, caches, hidden files) are in
    neither."""
    taken, left_out, data = [], {}, 0
    for name in sorted(sizes):
        kind = problem_file_kind(name)
        if kind in ("code", "report"):
            taken.append(name)
        elif kind == "data" and data + sizes[name] <= DATA_BYTES:
            taken.append(name)
            data += sizes[name]
        elif kind == "data":
            left_out[name] = (f"over the {amount(DATA_BYTES)} the grader takes of data files "
                              f"in all ({amount(data + sizes[name])} with it)")
        elif kind == "other":
            left_out[name] = ("not a kind the grader takes (Python modules and packages, "
                              f"REPORT.md, data files {', '.join(DATA_SUFFIXES)})")
    return taken, left_out


def run_of(name: str) -> str | None:
    """The run a results file is of (training_log_{run}.json, model_{run}.pth,
    samples_{run}.txt, resume_{run}.pth), or None."""
    found = RUN_FILE.match(name)
    return next((run for run in found.groupdict().values() if run), None) if found else None


# ------------------------------------------------------------------------- what is packed
def problem_folder_files(root: Path) -> tuple[dict[str, int], list[str]]:
    """({path relative to root: bytes} of the regular files of root's problem folders outside
    results/, [the links among them, which the grader never follows])."""
    sizes, links = {}, []
    for problem in PROBLEMS:
        for folder, dirs, names in os.walk(root / problem):
            here = Path(folder)
            dirs[:] = sorted(d for d in dirs if not (here == root / problem and d == "results")
                             and not d.startswith(".") and d != "__pycache__")
            for name in names:
                path = here / name
                relative = path.relative_to(root).as_posix()
                if path.is_symlink():
                    links.append(relative)
                elif path.is_file():
                    sizes[relative] = path.stat().st_size
    return sizes, links


def submission_files(root: Path, graded: dict) -> dict[str, Path]:
    """{name in the zip: file} of everything graded under root. graded: {problem: its
    graded_results, or None where the run registry could not be read}."""
    files = {}

    def add(path: Path) -> None:
        if path.is_file():
            files[path.relative_to(root).as_posix()] = path

    for name in taken_problem_files(problem_folder_files(root)[0])[0]:
        add(root / name)
    for problem in PROBLEMS:
        results = root / problem / "results"
        names = graded[problem]
        for path in sorted(results.glob("*.json")):
            if path.name in NOT_RESULTS or path.name.endswith(".partial.json"):
                continue
            if names is not None and run_of(path.name) and path.name not in names:
                continue  # a try's training log
            add(path)
        for path in sorted((results / "figures").glob("*.png")):
            add(path)
        if names is None:  # no run registry: the files by their patterns
            names = [p.name for p in results.glob("samples_*.txt")]
            if problem in WEIGHTS_PROBLEMS:
                names += [p.name for p in results.glob("model_*.pth")]
        for name in names:
            if not name.endswith(".json"):
                add(results / name)
    return dict(sorted(files.items()))


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


# ------------------------------------------------------- what the folder holds besides
def folder_findings(root: Path, graded: dict, handout) -> tuple[list[str], list[str]]:
    """(errors, warnings) about root's folders that the zip does not show: files of a
    problem folder the grader does not take, what no prescribed run wrote in a results
    folder, and given code that differs from the handout's (handout: provided.given's
    Handout, or None where it is unknown)."""
    errors, warnings = not_taken(root, handout)
    for problem in PROBLEMS:
        if graded[problem] is not None:
            warnings += not_prescribed(root / problem / "results", problem, graded[problem])
    warnings += given_code_findings(root, handout)
    return errors, warnings


def not_taken(root: Path, handout, problems=PROBLEMS) -> tuple[list[str], list[str]]:
    """(errors, warnings) naming the files of root's problem folders (outside results/) that
    the grader does not take: data past DATA_BYTES (an error: code that reads it fails
    there), files of other kinds and links (warnings). The handout's own files (handout:
    provided.given's Handout, or None) are never named."""
    errors, warnings = [], []
    sizes, links = problem_folder_files(root)
    given = set(handout.files) | set(handout.given) if handout is not None else set()
    _, left_out = taken_problem_files({n: s for n, s in sizes.items() if n not in given})
    by_problem = {}
    for name, why in left_out.items():
        if name.split("/")[0] not in problems:
            continue
        if why.startswith("over the"):
            errors.append(f"{name} is left out, {why}: code that reads it fails in the grader")
        else:
            by_problem.setdefault(name.split("/")[0], []).append(name)
    for problem, names in by_problem.items():
        warnings.append(f"{problem}: {len(names)} file(s) not packed, not a kind the grader "
                        "takes (Python modules and packages, REPORT.md, data files "
                        f"{' '.join(DATA_SUFFIXES)}): {', '.join(names)}")
    warnings += [f"{name} is a link: not packed, the grader takes regular files only"
                 for name in links if name.split("/")[0] in problems]
    return errors, warnings


def not_prescribed(results: Path, problem: str, names: dict) -> list[str]:
    """Warnings about what no prescribed run wrote in a results folder: files of a run name
    that no configuration of the run registry has (a try's, left out of the zip), a
    metrics.json naming such runs, figures drawn from another metrics.json."""
    from provided.visualize import drawn_from, metrics_digest

    folder, warnings = f"{problem}/results", []
    runs = {run_of(name) for name in names} - {None}
    tries = sorted(path.name for path in results.glob("*")
                   if path.is_file() and run_of(path.name) not in runs | {None})
    if tries:
        warnings.append(f"{folder} holds files of runs that config.py does not prescribe "
                        f"(tries?), left out of the zip: {', '.join(tries)}; keep a try in "
                        "its own --results_dir")
    metrics = results / "metrics.json"
    try:
        named = sorted(run_names(json.loads(metrics.read_text(encoding="utf-8"))) - runs)
    except (OSError, ValueError, RecursionError):
        named = []  # absent or not JSON: an error of the zip's check already
    if named:
        warnings.append(f"{folder}/metrics.json is of runs that config.py does not prescribe "
                        f"({', '.join(named)}): a try's evaluation? run `python -m "
                        f"{problem}.evaluate` again (and its figures)")
    digest, stale = metrics_digest(results), []
    for path in sorted((results / "figures").glob("*.png")):
        try:
            stamped, source = drawn_from(path.read_bytes())
        except OSError:
            continue
        if stamped and source != digest:
            stale.append(path.name)
    if stale:
        warnings.append(f"{folder}/figures: {len(stale)} figure(s) drawn from another "
                        f"metrics.json than {folder}/metrics.json (a try's, or one since "
                        f"replaced): {', '.join(stale)}; draw them again: python "
                        f"provided/visualize.py {problem}")
    return warnings


def run_names(data, depth: int = 0) -> set[str]:
    """The values of the "run" entries of a metrics file (Problem 3: main.run and each
    sweep entry's run), two levels deep at most."""
    found = set()
    if isinstance(data, dict):
        if isinstance(data.get("run"), str):
            found.add(data["run"])
        values = data.values()
    elif isinstance(data, list):
        values = data
    else:
        return found
    if depth < 2:
        for value in values:
            found |= run_names(value, depth + 1)
    return found


def given_code_findings(root: Path, handout) -> list[str]:
    """One warning per problem file whose given code differs from the handout's: which
    given function, method or class the grader puts back, which it adds; a given file
    (config.py, ...) the grader takes whole from the handout. A problem folder's
    __init__.py is the student's (OWN_GIVEN): never named."""
    from provided.given import given_changes, read_source

    if handout is None:
        return [f"{GIVEN_SNAPSHOT} is missing or damaged: your given code is not compared "
                "with the handout's; restore the file from the handout"]
    warnings = []
    for name, text in handout.files.items():
        path = root / name
        try:
            student = read_source(path.read_bytes())
            ours = ast.dump(ast.parse(student))
        except (OSError, SyntaxError, ValueError, UnicodeDecodeError, RecursionError):
            continue  # missing or not compiling: an error of the zip's check already
        if name in OWN_GIVEN:
            continue  # the student's to fill: taken as it is
        if name not in handout.regions:
            if ours != ast.dump(ast.parse(text)):
                warnings.append(f"{name} differs from the handout's, which the grader uses "
                                "instead: move what you added into a module of your own")
            continue
        changed, lacking = given_changes(student, text, handout.regions[name])
        said = []
        if changed:
            said.append(f"given code you changed, {', '.join(changed)}: the grader runs the "
                        "handout's version (put your change in a function of your own)")
        if lacking:
            said.append(f"lacking {', '.join(lacking)}: the grader adds the handout's")
        if said:
            warnings.append(f"{name}: " + "; ".join(said))
    return warnings


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


# --------------------------------------------------------- --check: the public tests on it
# what a check's scratch folder takes from this folder (the grader takes them from its own
# copy of the handout: its tree files, less the problem folders' code, which is the
# handout's (provided/handout_code.json) and the zip's; a kit test holds the two lists equal)
CHECK_TREE = ("conftest.py", "pyproject.toml", "provided/**/*.py", "provided/handout_code.json",
              "problem1/position_table.pt", "tests/*.py", "tests/fixtures/*")
PART = re.compile(r"^p[1-3][a-e]$")


def zip_root(members: list[str]) -> str:
    """The folder of the zip that holds the problem folders ('' at its top, or one folder
    down, as the grader finds a repository unpacked one level down)."""
    if any(name.split("/")[0] in PROBLEMS for name in members):
        return ""
    tops = sorted({name.split("/")[0] for name in members
                   if len(name.split("/")) > 2 and name.split("/")[1] in PROBLEMS})
    return tops[0] + "/" if tops else ""


def checked_tree(archive: zipfile.ZipFile, source: Path, handout, out: Path) -> list[str]:
    """Lay out in out what the grader's tests would run on for the zip: this folder's tests,
    provided/ and fixtures, the handout's problem code, and the files of the zip the grader
    takes, each solution file with its given code put back (provided.given.graded_source).
    Returns one line per change the grader makes to what the zip holds."""
    from provided.given import given_changes, graded_source, read_source

    for pattern in CHECK_TREE:
        for path in sorted(source.glob(pattern)):
            if path.is_file() and "__pycache__" not in path.parts:
                target = out / path.relative_to(source)
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(path.read_bytes())
    for name, text in handout.files.items():
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_text(text, encoding="utf-8")
    prefix = zip_root(archive.namelist())
    infos = {info.filename[len(prefix):]: info for info in archive.infolist()
             if info.filename.startswith(prefix) and not info.is_dir()}
    sizes = {name: info.file_size for name, info in infos.items()
             if problem_file_kind(name) not in (None, "results", "report")
             and info.file_size <= SUBMISSION_FILE_BYTES}
    taken, left_out = taken_problem_files(sizes)
    notes = [f"{name}: not taken, {why}" for name, why in left_out.items()]
    notes += [f"{name}: not in the zip: every part it holds runs the handout's stubs"
              for name in handout.regions if name not in sizes]
    for name in taken:
        data = archive.read(infos[name])
        if name in handout.regions:
            try:
                student = read_source(data)
                data = graded_source(student, handout.files[name],
                                     handout.regions[name]).encode()
            except (SyntaxError, ValueError, UnicodeDecodeError, RecursionError) as err:
                notes.append(f"{name}: cannot be read as Python ({type(err).__name__}): "
                             "every part it holds fails")
                continue  # the handout's stubs stay
            changed, lacking = given_changes(student, handout.files[name],
                                             handout.regions[name])
            notes += [f"{name}: {what} is given code you changed: the handout's version is "
                      "used" for what in changed]
            notes += [f"{name}: {what} is not in your file: the handout's is used"
                      for what in lacking]
        elif name in handout.files and name not in OWN_GIVEN:
            if data.replace(b"\r\n", b"\n") != handout.files[name].encode():
                notes.append(f"{name}: a given file: the handout's is used, not yours")
            continue
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_bytes(data)
    return notes


def check_main(args) -> int:
    """--check: the public tests on the files of a zip that the grader takes."""
    from provided.given import handout_code

    zip_path = args.check
    handout = handout_code(args.root)
    if handout is None:
        raise HomeworkError(f"{args.root / GIVEN_SNAPSHOT} is missing or damaged: restore it "
                            "from the handout (the check puts back the given code from it)")
    for part in args.part or []:
        if not PART.match(part):
            fail(f"--part {part}: a part is p1a .. p3e (see the README's table of the parts)")
    if not zip_path.is_file():
        fail(f"{zip_path} not found: write it first with `make submission` (or give the zip "
             "to check)")
    scratch = Path(tempfile.mkdtemp(prefix="submission_check_"))
    try:
        try:
            with zipfile.ZipFile(zip_path) as archive:
                notes = checked_tree(archive, args.root, handout, scratch)
        except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, NotImplementedError) as err:
            fail(f"{zip_path} is not a zip that can be read ({err}): write it again with "
                 "`make submission`")
        print(f"checking {zip_path} as the grader takes it: the public tests"
              + (f" of {', '.join(args.part)}" if args.part else "")
              + ", on your files with the handout's given code", flush=True)
        for line in notes:
            print(f"note: {line}", flush=True)
        command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
                   "-p", "provided.check_limits",
                   f"--timeout={limits.WALL_FACTOR * limits.TEST_CPU_S}"]
        if args.part:
            command += ["-m", " or ".join(args.part)]
        env = {**os.environ, **limits.ENVIRONMENT, "PYTHONPATH": os.pathsep.join(
            [str(scratch), *filter(None, [os.environ.get("PYTHONPATH")])]),
               "PYTHONDONTWRITEBYTECODE": "1"}
        done = subprocess.run(command, cwd=scratch, env=env)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"--check of {zip_path}: "
          + ("every public test passed" if done.returncode == 0 else
             f"pytest exit status {done.returncode} (the failures above are the grader's "
             "public outcomes too)"))
    return done.returncode


# ----------------------------------------------------------------------------- the script
@script
def main(argv=None) -> int:
    parser = ArgumentParser(__doc__)
    parser.add_argument("--out", type=Path, default=Path("submission.zip"),
                        help="the zip to write (default: %(default)s)")
    parser.add_argument("--root", type=Path, default=REPO_ROOT,
                        help="the homework folder to pack (default: this one, %(default)s)")
    parser.add_argument("--check", type=Path, nargs="?", const=Path("submission.zip"),
                        metavar="ZIP", help="run the public tests on the files of ZIP (default "
                        "submission.zip) that the grader takes, instead of packing")
    parser.add_argument("--part", action="append", metavar="PART",
                        help="with --check: only this part's tests, e.g. p2b (repeatable)")
    args = parser.parse_args(argv)
    root, out = args.root, args.out
    if not root.is_dir() or not any((root / p).is_dir() for p in PROBLEMS):
        fail(f"--root {root} holds no problem1/, problem2/ or problem3/ folder: give the "
             "homework folder")
    if args.part and args.check is None:
        fail("--part is for --check: give --check [ZIP] too")
    if args.check is not None:
        return check_main(args)
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
    from provided.given import handout_code

    more_errors, more_warnings = folder_findings(root, graded, handout_code(root))
    errors += more_errors
    warnings += more_warnings
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
