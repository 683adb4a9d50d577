"""Grade a submission, or a folder of them, part by part; or build the Gradescope autograder.

    python -m course.grading.grade SUBMISSION_DIR --out results.json     # one submission
    python -m course.grading.grade SUBMISSIONS_DIR --csv scores.csv      # a folder of submissions
    python -m course.grading.grade --autograder build/autograder.zip  # the Gradescope zip

Instructors only: the handout leaves course/ out. The points are in course/grading/rubric.py.

The grader first starts the zygote (course/grading/sandbox.py), a fresh interpreter that forks
every sandbox, then reads what it trusts: the rubric, the reference code, the public and
hidden tests, the bands. A submission's code is its solution functions spliced into the
handout's files (course.grading.handout.splice); the tests, public then hidden, run in judges
(course/grading/judge.py) over the handout's own code, and every call a test makes to the
submission (tests/seam.py) is answered, with data only, by a sandbox of that test's own.
So no process that judges a test ever runs the submission's code. A part's points are
shared equally among its tests. Each problem's results/metrics.json is checked against
problemN/results/reference_bands.json (shown after publication, without the band); a
problem without one scores 0 there, saying so.

Output: Gradescope's results.json (`score`, `tests[]` with `name`, `score`, `max_score`,
`visibility`, `output`), written before grading starts and again after every test, so that
it exists whatever happens; and a score table of the visible tests on stdout. The exit
status is 0 whenever the submission could be graded, whatever its score.
"""

import csv
import json
import math
import os
import select
import stat
import sys
import tempfile
import threading
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from course.grading import bands as bands_tool
from course.grading import rubric as RUBRIC
from course.grading.handout import region_functions, splice, strip_solutions
from course.grading.judge import MAX_OUTPUT, Seat, run_tests
from course.grading.sandbox import (
    Sandbox,
    Zygote,
    kill_spawned,
    make_tree,
    remove_tree,
    sandbox_user,
)
from provided.common import REPO_ROOT, ArgumentParser, fail, script
from provided.results import write_json

HIDDEN_DIR = "course/grading/hidden"
# the repository files a run tree holds (besides its tests): code, fixtures, configuration
TREE_FILES = ("conftest.py", "pyproject.toml", "provided/**/*.py", "problem*/*.py",
              "problem1/position_table.pt", "tests/*.py", "tests/fixtures/*")
SUBMISSION_LIMIT_BYTES = 200 * 2**20
SUBMISSION_FILE_BYTES = 20 * 2**20
SUBMISSION_FILES = 5000  # files taken from a submission, at most
DEADLINE_S = 540  # Gradescope stops an autograder at 10 minutes, with no feedback at all
TEST_CPU_S = 20  # one test's limit at one full core (the slowest reference test: 3.5 s)
RUN_TESTS = 3  # a run may take as long as this many tests at their limit
GRADER_BYTES = 500 * 2**20  # the grader's own resident memory, measured: about 470 MiB
WORKER_BYTES = 300 * 2**20  # a worker's own pages on top of the grader's, with room to spare
TOO_LATE = "not graded: the grading time limit was reached"
GRADED_FOLDER = "graded_code"  # beside results.json: the submission's code as graded
STOPPED = "not graded: the grader stopped before this test ran (time limit?)"


# ------------------------------------------------------------------------------- the kit
@dataclass(frozen=True)
class Kit:
    """What grading trusts, read after the zygote has started (course/grading/sandbox.py)."""
    files: dict  # relative path -> bytes: reference code, public tests, fixtures, configuration
    hidden: dict  # part -> {relative path: bytes}
    bands: dict  # problem -> reference_bands.json
    tests: dict  # part -> {"visible": [node ids], "hidden": [node ids]}

    def handout(self) -> dict:
        """{path: bytes} of the handout's code: every solution region raises
        NotImplementedError."""
        return {name: strip_solutions(self.files[name].decode(), name).encode()
                for name in RUBRIC.REGIONS}

    def judge_files(self, parts: list[str]) -> dict:
        """The judges' tree: the tests, public and hidden, over the handout's code."""
        hidden = {name: data for part in parts for name, data in self.hidden[part].items()}
        return {**self.files, **self.handout(), **hidden}

    def sandbox_files(self) -> dict:
        """What every sandbox tree holds besides the submission's code: the handout's code,
        provided/, the public test helpers and fixtures; no test, no reference solution."""
        return {**{name: data for name, data in self.files.items()
                   if not is_test_file(name)}, **self.handout()}


def is_test_file(name: str) -> bool:
    """Whether a tree file holds tests (or pytest's configuration of them)."""
    base = name.rsplit("/", 1)[-1]
    return base == "conftest.py" or base.startswith("test_") or name.startswith(HIDDEN_DIR)


def read_kit(parts: list[str]) -> Kit:
    files = tree_files()
    hidden = {part: {f"{HIDDEN_DIR}/{path.name}": path.read_bytes()
                     for path in sorted((REPO_ROOT / HIDDEN_DIR).glob(f"test_hidden_{part}.py"))}
              for part in RUBRIC.PARTS}
    kit = Kit(files, hidden, read_bands(), {})
    return Kit(files, hidden, kit.bands, collect_tests(kit, parts))


def tree_files() -> dict:
    """{relative path: bytes} of the repository files every tree is made from."""
    return {path.relative_to(REPO_ROOT).as_posix(): path.read_bytes()
            for pattern in TREE_FILES for path in sorted(REPO_ROOT.glob(pattern))
            if path.is_file() and "__pycache__" not in path.parts}


def read_bands() -> dict:
    """{problem: its reference_bands.json} for every problem that has one."""
    bands = {}
    for problem in RUBRIC.RESULTS:
        path = REPO_ROOT / problem / "results" / "reference_bands.json"
        if path.exists():
            bands[problem] = json.loads(path.read_text())
    return bands


def collect_tests(kit: Kit, parts: list[str]) -> dict:
    """{part: {"visible": ids, "hidden": ids}}: each part's tests, collected (by marker)
    in a judges' tree."""
    tests = {}
    with tempfile.TemporaryDirectory(prefix="grade_collect_") as scratch:
        tree = Path(scratch)
        make_tree(tree, kit.judge_files(parts))
        ids = _collect_ids(tree)
    for part in parts:
        mine = [node for node, marks in ids.items() if part in marks]
        tests[part] = {"visible": [n for n in mine if not n.startswith(HIDDEN_DIR)],
                       "hidden": [n for n in mine if n.startswith(HIDDEN_DIR)]}
        if not mine:
            raise RuntimeError(f"no tests collected for {part}")
    return tests


def _collect_ids(tree: Path) -> dict:
    """{node id: [marker names]} of every test in tree, collected in a forked process."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(read_fd)
            os.chdir(tree)
            import sys

            import pytest

            sys.path.insert(0, str(tree))
            # the tree's own test modules, not those a pytest run around this one imported
            # from the repository under the same names (kit tests call setup in-process)
            for name in list(sys.modules):
                last = name.rsplit(".", 1)[-1]
                if (name.split(".")[0] == "tests" or name.startswith("course.grading.hidden")
                        or last == "conftest" or last.startswith("test_")):
                    del sys.modules[name]

            class Collector:
                def pytest_collection_finish(self, session):
                    found = {item.nodeid: [m.name for m in item.iter_markers()]
                             for item in session.items}
                    with os.fdopen(write_fd, "w") as out:
                        json.dump(found, out)
            null = os.open(os.devnull, os.O_RDWR)
            os.dup2(null, 1)
            pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", "tests",
                         HIDDEN_DIR], plugins=[Collector()])
        finally:
            os._exit(0)
    os.close(write_fd)
    with os.fdopen(read_fd) as source:
        text = source.read()
    os.waitpid(pid, 0)
    if not text:
        raise RuntimeError("the reference tests could not be collected")
    return json.loads(text)

# -------------------------------------------------------------------- the submission
def read_regular(path: Path, limit: int) -> bytes | None:
    """path's bytes if it is a regular file of at most limit bytes, else None: opened without
    following a link (O_NOFOLLOW) and without waiting on a FIFO (O_NONBLOCK), checked on the
    open file itself (fstat), and read no further than limit."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode) or status.st_size > limit:
            return None
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, min(2**20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        return None if size > limit else b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def copy_submission(source: Path, out: Path) -> list[str]:
    """The submission's regular files (no links, FIFOs or devices, nothing over the size
    limits) under out: everything the grader reads of a submission comes from this copy.
    Returns a note per file of a problem folder left out (a path too long to copy, or one
    over the limits), for the student to see: the grader reads nothing else."""
    total, count, notes = 0, 0, []
    for folder, dirs, names in os.walk(source, followlinks=False):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d != "__pycache__"]
        for name in names:
            path = Path(folder) / name
            relative = path.relative_to(source)
            noted = any(part.startswith("problem") for part in relative.parts[:2])
            if path.suffix == ".pth" and not (name.startswith("model_")
                                              and path.parent.name == "results"):
                continue  # weights: only the runs' own (step checkpoints, resume files stay)
            if count >= SUBMISSION_FILES:
                notes += [f"{relative}: left out, over {SUBMISSION_FILES} files"] * noted
                continue
            data = read_regular(path, min(SUBMISSION_FILE_BYTES, SUBMISSION_LIMIT_BYTES - total))
            if data is None:
                if noted and path.is_file() and not path.is_symlink():
                    notes.append(f"{relative}: left out, over the size limits "
                                 f"({SUBMISSION_FILE_BYTES / 2**20:g} MiB a file, "
                                 f"{SUBMISSION_LIMIT_BYTES / 2**20:g} MiB in all)")
                continue  # a link, FIFO, device or unreadable file: never read
            target = out / relative
            try:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)
            except OSError as err:  # a path too long for the grader's copy, say
                notes += [f"{relative}: left out, it could not be copied "
                          f"({err.strerror or type(err).__name__})"] * noted
                continue
            total, count = total + len(data), count + 1
    return notes


def find_root(submission: Path) -> Path | None:
    """The folder of a submission that holds problem1/, problem2/ or problem3/ (Gradescope
    may unpack a repository one level down)."""
    for folder in [submission, *sorted(p for p in submission.iterdir() if p.is_dir())]:
        if any((folder / f"problem{n}").is_dir() for n in (1, 2, 3)):
            return folder
    return None


def submission_code(kit: Kit, root: Path | None) -> tuple[dict, dict]:
    """({path: bytes} of the submission's code as graded, {part: a reason its code could not
    be taken}): each solution file is the handout's with the submission's functions spliced
    in (course.grading.handout.splice), plus any module of its own the submission added to a
    problem folder (a helper file).

    Only the solution functions come along from a submission's file, with the imports,
    functions, classes and literal constants they may use that the handout lacks. So code
    outside the solution regions (provided code the submission changed, statements at
    module level) is never graded or run, and a function the submission lacks stays
    unsolved (NotImplementedError)."""
    handout, code, reasons = kit.handout(), {}, {}
    for name, functions in RUBRIC.REGIONS.items():
        problem = name.split("/")[0]
        parts = sorted(set(functions.values()))
        submitted = root / name if root is not None else None
        if root is None or not (root / problem).is_dir():
            reasons.update(dict.fromkeys(parts, f"your submission has no {problem}/ folder"))
            continue
        if not submitted.is_file():
            reasons.update(dict.fromkeys(parts, f"your submission has no {name}"))
            continue
        try:
            student = submitted.read_text()
            compile(student, name, "exec")
        except SyntaxError as err:
            reasons.update(dict.fromkeys(parts, f"{name}, line {err.lineno}: {err.msg} (the "
                                                "file does not compile)"))
            continue
        except (UnicodeDecodeError, ValueError, RecursionError, MemoryError) as err:
            reasons.update(dict.fromkeys(parts, f"{name} cannot be read as Python source: "
                                                f"{type(err).__name__}"))
            continue
        try:
            code[name] = splice(handout[name].decode(), student,
                                region_functions(kit.files[name].decode())).encode()
        except (SyntaxError, ValueError, RecursionError, MemoryError) as err:
            reasons.update(dict.fromkeys(parts, f"{name}: its functions could not be taken "
                                                f"({type(err).__name__}: {err})"[:300]))
    for folder in sorted({name.split("/")[0] for name in RUBRIC.REGIONS}):
        if root is None:
            break
        for added in sorted((root / folder).glob("*.py")):
            name = f"{folder}/{added.name}"
            if name not in kit.files and added.stem.isidentifier() and not is_test_file(name):
                code[name] = added.read_bytes()
    return code, reasons

# --------------------------------------------------------------------------- grading
@dataclass
class Budget:
    """The time grading may take: a deadline for everything and a limit per test."""
    deadline: float  # time.monotonic() after which nothing more is run
    test_seconds: float

    def left(self) -> float:
        return self.deadline - time.monotonic()


@dataclass
class Grader:
    """What grading needs, ready before any submission is read: the kit, one sandbox user
    per job, the zygote the sandboxes are forked from, one test's time limit."""
    kit: Kit
    sandboxes: list
    zygote: Zygote
    test_seconds: float

    def close(self) -> None:
        self.zygote.close()

def part_entries(kit: Kit, part: str, which: str, outcomes: dict, reason: str) -> list[dict]:
    """Gradescope test entries of a part's public ("visible") or hidden tests, from
    {node id: (passed, output)}; a test without an outcome scores 0 with reason."""
    problem, letter, _, points = RUBRIC.PARTS[part]
    nodes = kit.tests[part][which]
    share = points / sum(map(len, kit.tests[part].values()))  # public and hidden alike
    hidden = which == "hidden"
    entries = []
    for node in nodes:
        passed, output = outcomes.get(node, (False, reason))
        entries.append({
            "name": f"{problem} {letter} ({part}): {node.split('::', 1)[1]}"
                    + (" [hidden]" if hidden else ""),
            "score": share if passed else 0.0, "max_score": share,
            "visibility": "after_published" if hidden else "visible",
            "output": "" if passed else output[:MAX_OUTPUT], "tags": [part]})
    return entries


RESULT_FILE_BYTES = 5 * 2**20  # a metrics file or training log the grader reads


def results_files(folder: Path, problem: str, out: Path) -> Path:
    """out holding only the submission's result files the grader reads, as plain files:
    metrics.json, and per prescribed run (by the run registry) its training log, its
    weights (Problems 1 and 2) and, for Problem 3's long run, its samples, each within its
    size limit (course.grading.recompute). A run name in metrics.json then names no other file:
    with no folder in out, a path such as training_log_x/../../secret.json resolves to
    nothing."""
    import importlib

    from course.grading import recompute

    config = importlib.import_module(f"{problem}.config")
    names = {"metrics.json": RESULT_FILE_BYTES}
    for run in config.RUNS:
        names[f"training_log_{run}.json"] = recompute.LOG_BYTES
        if problem != "problem3":
            names[f"model_{run}.pth"] = recompute.WEIGHTS_BYTES
    if problem == "problem3":
        names[f"samples_{config.MAIN_RUN}.txt"] = recompute.SAMPLES_BYTES
    out.mkdir(mode=0o700)
    for name, limit in names.items():
        data = read_regular(folder / name, limit)
        if data is not None:
            (out / name).write_bytes(data)
    return out


def recomputed(problem: str, folder: Path, out: Path, bands: dict, seconds: float = 180) -> dict:
    """course.grading.recompute's {run: {quantity: {"value", "claimed", "status", "why"}}} for the
    submission's results folder (its files copied plain to out first, results_files),
    computed in a forked child, which alone imports the recomputation (its memory is
    returned when it ends); or {"fault": why} if the grader's own data is missing or the
    child failed."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(read_fd)
            from course.grading import recompute

            try:
                results = results_files(folder, problem, out)
                answer = {"found": recompute.recompute(problem, results, bands=bands)}
            except recompute.GraderDataError as err:
                answer = {"fault": f"the grader's data is not the homework's ({err})"}
            except Exception as err:  # a fault of the grader's: never the student's points
                answer = {"fault": f"the grader failed ({type(err).__name__}: {err})"[:300]}
            with os.fdopen(write_fd, "w") as pipe:
                json.dump(answer, pipe, default=repr)
        finally:
            os._exit(0)
    os.close(write_fd)
    chunks, deadline = [], time.monotonic() + seconds
    with os.fdopen(read_fd, "rb") as pipe:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([pipe], [], [], deadline - time.monotonic())
            if not ready:
                break
            chunk = os.read(pipe.fileno(), 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
    try:
        os.kill(pid, 9)
    except ProcessLookupError:
        pass
    os.waitpid(pid, 0)
    try:
        answer = json.loads(b"".join(chunks))
    except ValueError:
        return {"fault": f"the grader could not recompute {problem}'s results in {seconds:.0f} s"}
    return answer.get("found") if "found" in answer else {"fault": answer.get("fault", "")}


def grade_results(kit: Kit, root: Path | None, scratch: Path) -> list[dict]:
    """Each problem's graded numbers, recomputed by trusted code from the submission's own
    files (course/grading/recompute.py: weights, logs, samples), against the reference bands: one
    entry per graded quantity, or one 0-point entry saying why a problem's results could
    not be checked. Only a recomputed value can earn points; one that no file supports is
    "unverified" and earns none. A quantity's entry is shown after publication only and
    names no band: the student sees the value and whether it lies in the reference range,
    never the range, and where their metrics.json says otherwise."""
    entries = []
    for problem, points in RUBRIC.RESULTS.items():
        bands = kit.bands.get(problem)
        if bands is None:
            continue
        checks = [(run, q, band) for run, quantities in bands.items()
                  for q, band in quantities.items() if band.get("graded", True)]
        tag = f"{problem}-results"
        folder = root / problem / "results" if root is not None else None
        if folder is None or not (folder / "metrics.json").is_file():
            entries.append({"name": f"{problem} results", "score": 0.0, "max_score": points,
                            "visibility": "visible", "tags": [tag],
                            "output": f"your submission has no {problem}/results/metrics.json"})
            continue
        found = recomputed(problem, folder, scratch / f"{problem}-results", bands)
        for run, quantity, band in checks:
            if "fault" in found:
                item = {"status": "fault", "why": found["fault"]}
            else:
                item = found.get(run, {}).get(quantity) or {
                    "status": "unverified", "why": "nothing was recomputed for it"}
            inside, words = result_words(item, band, quantity)
            entries.append({
                "name": f"{problem} results: {run} {quantity}",
                "score": points / len(checks) if inside else 0.0,
                "max_score": points / len(checks), "visibility": "after_published",
                "tags": [tag], "output": words})
    return entries


def result_words(item: dict, band: dict, quantity: str) -> tuple[bool, str]:
    """(whether a recomputed quantity earns its points, what its entry says)."""
    status, why = item.get("status"), str(item.get("why", ""))[:300]
    if status == "fault":
        return False, f"not graded: {why}; please tell the course staff"
    if status not in ("verified", "differs"):
        return False, f"unverified, no points: {why}"
    value = item.get("value")
    inside, _ = in_band(value, band, quantity)
    words = f"recomputed from your files {_shown(value)}: " + (
        "inside the reference range" if inside else "outside the reference range")
    if status == "differs":
        words += (f"; your metrics.json says {_shown(item.get('claimed'))} (check how your "
                  "evaluation computes it)")
    return inside, words


def _shown(value) -> str:
    return f"{value:.6g}" if isinstance(value, float) else repr(value)[:40]


def in_band(value, band: dict, quantity: str = "") -> tuple[bool, str]:
    """(whether value is accepted, the band in words). None (e.g. steps_to_95 never reached)
    is accepted when some reference seed had None too; anything not a finite number is not
    accepted otherwise."""
    missing = band.get("missing", [])
    words = f"{band['n_seeds'] + len(missing)} seeds"
    if missing:
        words += f", {len(missing)} of them without a value (e.g. never reached)"
    if not band["n_seeds"]:
        return value is None, words
    low, high = bands_tool.band_limits(band, quantity)
    words += (f"; mean {band['mean']:.4g}, sd {band['sd'] or 0:.2g}, range "
              f"[{band['min']:.4g}, {band['max']:.4g}]; accepted [{low:.4g}, {high:.4g}]")
    if value is None:
        return bool(missing), words
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False, words + " (yours is not a number)"
    try:
        value = float(value)  # a 400-digit integer does not fit: not a result
    except OverflowError:
        return False, words + " (yours is not a number)"
    if not math.isfinite(value):
        return False, words + " (yours is not a number)"
    return low <= value <= high, words


# --------------------------------------------------------------------------- output
def summary(entries: list[dict]) -> str:
    """The score table of the visible tests: one row per part and per problem's results,
    then the totals, and one line on the hidden tests (their points are not shown)."""
    visible = [e for e in entries if e["visibility"] == "visible"]
    rows, totals = [], {}
    for part, (problem, letter, title, _) in RUBRIC.PARTS.items():
        mine = [e for e in visible if part in e["tags"]]
        if mine:
            rows.append((problem, f"{letter} {title} (public tests)", _sum(mine, "score"),
                         _sum(mine, "max_score")))
    for problem in RUBRIC.RESULTS:
        mine = [e for e in visible if f"{problem}-results" in e["tags"]]
        if mine:
            rows.append((problem, "results within the reference bands", _sum(mine, "score"),
                         _sum(mine, "max_score")))
    lines = [f"{'problem':<10} {'part':<58} {'score':>6} {'max':>6}"]
    for problem, part, score, maximum in rows:
        lines.append(f"{problem:<10} {part:<58} {score:6.2f} {maximum:6.2f}")
        totals.setdefault(problem, [0.0, 0.0])
        totals[problem][0] += score
        totals[problem][1] += maximum
    for problem, (score, maximum) in totals.items():
        lines.append(f"{problem:<10} {'total of the visible tests':<58} {score:6.2f} "
                     f"{maximum:6.2f}")
    hidden = _sum([e for e in entries if e["visibility"] != "visible"], "max_score")
    lines.append(f"{'all':<10} {'visible tests':<58} {_sum(visible, 'score'):6.2f} "
                 f"{_sum(visible, 'max_score'):6.2f}")
    if hidden:
        lines.append(f"Hidden tests worth {hidden:.2f} more points are graded too; their "
                     "results are shown when the grades are published.")
    notes = sorted({e["output"].splitlines()[0] for e in entries if e["visibility"] == "visible"
                    and e["output"].startswith(("not graded", "your submission has no"))})
    return "\n".join(lines + notes)


def _sum(entries: list[dict], key: str) -> float:
    return round(sum(e[key] for e in entries), 4)


def results_json(entries: list[dict], start: float, note: str = "") -> dict:
    output = summary(entries) + (f"\n{note}" if note else "")
    return {"score": _sum(entries, "score"), "execution_time": round(time.monotonic() - start),
            "output": output, "visibility": "visible", "stdout_visibility": "hidden",
            "tests": entries}


def grade(submission: Path, grader: Grader, parts: list[str], out: Path | None,
          budget: Budget, keep: Path | None = None) -> dict:
    """Gradescope's results.json for one submission folder, written to out (if given)
    before grading and after every test, so that a stopped grader still leaves one. The
    submission's code exactly as graded is kept in keep (default: GRADED_FOLDER beside
    out). The tests run in judges, one per sandbox user, side by side: every public test
    before any hidden one."""
    kit = grader.kit
    start = time.monotonic()
    if out is not None:  # before the submission is read: a grader stopped there leaves this
        write_json(out, results_json(
            [e for part in parts for which in ("visible", "hidden")
             for e in part_entries(kit, part, which, {}, STOPPED)], start))
    with tempfile.TemporaryDirectory(prefix="grade_") as scratch:
        scratch = Path(scratch)
        scratch.chmod(0o711)
        copy = scratch / "submission"
        copy.mkdir(mode=0o700)
        left_out = copy_submission(submission, copy)
        root = find_root(copy)
        code, reasons = submission_code(kit, root)
        template = scratch / "sandbox"
        make_tree(template, {**kit.sandbox_files(), **code})
        judge_tree = scratch / "judge"
        make_tree(judge_tree, kit.judge_files(parts))
        keep = keep or (out.parent / GRADED_FOLDER if out is not None else None)
        if keep is not None:
            keep_graded_code(keep, code)
        nodes = {(part, which): kit.tests[part][which] for part in parts
                 for which in ("visible", "hidden")}
        outcomes = {}
        results = grade_results(kit, root, scratch)
        note = "" if root is not None else (
            "Your submission holds no problem1/, problem2/ or problem3/ folder: nothing could "
            "be graded. Submit the repository's folder (or its contents).")
        if left_out:
            note = "\n".join(filter(None, [note, "Files of your submission not graded:",
                                            *left_out[:20]]))

        def entries(unreached: dict) -> list[dict]:
            return [e for part in parts for which in ("visible", "hidden")
                    for e in part_entries(kit, part, which, outcomes,
                                          reasons.get(part) or unreached.get(part, STOPPED))
                    ] + results

        saving = threading.Lock()  # the judges' threads report side by side

        def save() -> None:
            if out is not None:
                with saving:
                    write_json(out, results_json(entries({}), start, note))
        save()
        runnable = [node for (part, which), ids in sorted(
            nodes.items(), key=lambda item: item[0][1] == "hidden") if part not in reasons
            for node in ids]
        shares = [runnable[i::len(grader.sandboxes)] for i in range(len(grader.sandboxes))]
        unreached = {}

        def one(index: int) -> None:
            sandbox = grader.sandboxes[index]
            work = scratch / f"work{index}"
            work.mkdir(mode=0o711)
            seat = Seat(grader.zygote, sandbox, template, work, work / "pytest")

            def on_outcome(node, passed, output):
                outcomes[node] = (passed, output)
                save()
            result = run_tests(judge_tree, shares[index], seat, str(REPO_ROOT),
                               budget.test_seconds, budget.deadline, TOO_LATE, on_outcome)
            kill_spawned(work, sandbox)
            for part in parts:
                if any(n in shares[index] and n not in outcomes
                       for n in kit.tests[part]["visible"] + kit.tests[part]["hidden"]):
                    unreached[part] = result.unreached or STOPPED
        with ThreadPoolExecutor(max_workers=len(grader.sandboxes)) as pool:
            for future in as_completed([pool.submit(one, i) for i in range(len(shares))]):
                future.result()
        final = results_json(entries(unreached), start, note)
        if out is not None:
            write_json(out, final)
    return final


def keep_graded_code(folder: Path, code: dict) -> None:
    """The submission's code exactly as graded, in folder (replaced; a results.json there,
    which grade keeps writing, stays)."""
    if folder.is_dir() and not folder.is_symlink():
        for entry in folder.iterdir():
            if entry.name != "results.json":
                remove_tree(entry)
    else:
        remove_tree(folder)
    for name, data in code.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)

# ------------------------------------------------------------------------ autograder
SETUP_SH = """#!/usr/bin/env bash
# Gradescope runs this once when it builds the autograder image (Ubuntu, Python >= 3.10).
# AUTOGRADER_ROOT is for the kit's own simulation of Gradescope; Gradescope leaves it unset.
set -euo pipefail
ROOT=${AUTOGRADER_ROOT:-/autograder}
apt-get update && apt-get install -y python3 python3-pip python3-venv
python3 -m venv "$ROOT/venv"
. "$ROOT/venv/bin/activate"
cd "$ROOT/source"
pip install torch --index-url https://download.pytorch.org/whl/cpu
pip install -r requirements.txt
# the data the results are recomputed on (course/grading/recompute.py checks its fingerprints); the
# kit's own simulation sets AUTOGRADER_NO_DATA, which leaves the results "not graded"
[ -n "${AUTOGRADER_NO_DATA:-}" ] || python generate_datasets.py
# the user submissions run as; the grading files are root's alone
id -u hw-sandbox >/dev/null 2>&1 || useradd --system --no-create-home \\
    --shell /usr/sbin/nologin hw-sandbox
chmod 700 "$ROOT/source"
"""

RUN_AUTOGRADER = """#!/usr/bin/env bash
# Gradescope runs this for every submission: the results land in /autograder/results.
ROOT=${AUTOGRADER_ROOT:-/autograder}
. "$ROOT/venv/bin/activate"
cd "$ROOT/source"
chmod 700 "$ROOT/source" "$ROOT/results" 2>/dev/null || true
python -m course.grading.grade "$ROOT/submission" --out "$ROOT/results/results.json"
if [ ! -s "$ROOT/results/results.json" ]; then  # the grader itself failed: say so, score 0
  echo '{"score": 0, "tests": [], "output": "The autograder failed before it could grade' \
       'this submission; please tell the course staff."}' > "$ROOT/results/results.json"
fi
"""

AUTOGRADER_FILES = ("requirements.txt", "conftest.py", "pyproject.toml", "generate_datasets.py",
                    "provided/**/*", "problem*/*.py", "problem1/position_table.pt",
                    "problem*/results/reference_bands.json", "tests/**/*",
                    "course/__init__.py", "course/grading/*.py", "course/grading/hidden/*")


def autograder_files() -> list[str]:
    """The repository files the autograder needs, relative to the root."""
    names = {path.relative_to(REPO_ROOT).as_posix() for pattern in AUTOGRADER_FILES
             for path in REPO_ROOT.glob(pattern)
             if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"}
    return sorted(names)


def build_autograder(path: Path) -> None:
    """The zip Gradescope takes: setup.sh, run_autograder and the repository's grading
    files, all at the zip's root (Gradescope unpacks it into /autograder/source)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, text in (("setup.sh", SETUP_SH), ("run_autograder", RUN_AUTOGRADER)):
            info = zipfile.ZipInfo(name)
            info.external_attr = 0o755 << 16
            archive.writestr(info, text)
        for name in autograder_files():
            archive.write(REPO_ROOT / name, name)
    os.replace(tmp, path)


# ------------------------------------------------------------------------ resources
def cgroup_files(name_v2: str, controller: str, name_v1: str) -> list[Path]:
    """Where this process's cgroup keeps a limit: its own cgroup's file (the path that
    /proc/self/cgroup names), then the mount's root (a container sees its own there)."""
    own = []
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            if controllers == "":
                own.append(Path("/sys/fs/cgroup" + path) / name_v2)
            elif controller in controllers.split(","):
                own.append(Path(f"/sys/fs/cgroup/{controller}{path}") / name_v1)
    except (OSError, ValueError):
        pass
    return own + [Path("/sys/fs/cgroup") / name_v2,
                  Path(f"/sys/fs/cgroup/{controller}") / name_v1]


def cpu_quota() -> float:
    """The CPUs this process may use: the cgroup's quota if it has one, else the cores
    it may run on (a container reports the host's count in os.cpu_count())."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (
        os.cpu_count() or 1)
    for path in cgroup_files("cpu.max", "cpu", "cpu.cfs_quota_us"):
        try:
            quota = (_cgroup2_cpu if path.name == "cpu.max" else _cgroup1_cpu)(path)
        except (OSError, ValueError, ZeroDivisionError):
            continue
        if quota:
            return min(cores, quota)
    return float(cores)


def _cgroup2_cpu(path: Path) -> float | None:
    quota, period = path.read_text().split()[:2]
    return None if quota == "max" else int(quota) / int(period)


def _cgroup1_cpu(path: Path) -> float | None:
    quota = int(path.read_text())
    period = int((path.parent / "cpu.cfs_period_us").read_text())
    return None if quota <= 0 else quota / period


def memory_limit() -> int:
    """Bytes this process may use: the cgroup's limit if it has one, else the memory
    available on the machine."""
    for path in cgroup_files("memory.max", "memory", "memory.limit_in_bytes"):
        try:
            text = path.read_text().strip()
        except OSError:
            continue
        if text.isdigit() and int(text) < 2**60:
            return int(text)
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return GRADER_BYTES + WORKER_BYTES


@contextmanager
def hidden_from_sandbox(sandboxes: list[Sandbox]):
    """While grading, the repository is closed to every user but its owner: its top-level
    entries lose their group and other permissions (the folders of this Python's own
    environment, which the sandbox user must import from, excepted) and the root keeps
    only traversal, so that no sandbox can read a reference solution, a hidden test or a
    band. Restored afterwards."""
    changed = []
    if sandboxes[0].sealed:
        python = {Path(p).resolve() for p in {sys.prefix, sys.base_prefix}}
        keep = {folder for p in python for folder in [p, *p.parents]}
        for path in sorted(REPO_ROOT.iterdir()):
            mode = path.lstat().st_mode
            if path.resolve() in keep or path.is_symlink() or not mode & 0o077:
                continue
            changed.append((path, mode & 0o7777))
            path.chmod(mode & 0o700)
        mode = REPO_ROOT.stat().st_mode & 0o7777
        if mode & 0o066:
            changed.append((REPO_ROOT, mode))
            REPO_ROOT.chmod(mode & 0o711)
    try:
        yield
    finally:
        for path, mode in reversed(changed):
            path.chmod(mode)


# ------------------------------------------------------------------------------- main
def setup(parts: list[str], jobs: int | None = None, scratch: Path | None = None) -> Grader:
    """What grading needs, ready before any submission is read: the zygote first (a fresh
    interpreter, so no sandbox ever holds what the grader reads next), then the kit. jobs
    defaults to what the CPU quota and the memory allow."""
    jobs = jobs or default_jobs()
    sandboxes = [sandbox_user() for _ in range(jobs)]
    if not sandboxes[0].sealed:
        print("note: not running as root, so submissions run as your own user, unsealed; "
              "grade untrusted submissions as root or on Gradescope", flush=True)
    folder = Path(tempfile.mkdtemp(prefix="grade_zygote_", dir=scratch))
    zygote = Zygote(folder)
    print(f"sandbox isolation: {zygote.isolation}", flush=True)
    test_seconds = TEST_CPU_S / min(1.0, cpu_quota() / jobs)
    return Grader(read_kit(parts), sandboxes, zygote, test_seconds)


def default_jobs() -> int:
    """Parts graded side by side: one per whole CPU of the quota, as far as the memory
    allows (the grader's share, then WORKER_BYTES a job), at least one."""
    by_memory = (memory_limit() - GRADER_BYTES) // WORKER_BYTES
    return int(max(1, min(math.floor(cpu_quota()), by_memory)))


def parse_args(argv=None):
    parser = ArgumentParser(__doc__)
    parser.add_argument("submission", type=Path, nargs="?",
                        help="a submission's folder, or a folder of submission folders")
    parser.add_argument("--out", type=Path, default=Path("results.json"),
                        help="Gradescope results file of one submission (default %(default)s)")
    parser.add_argument("--csv", type=Path, default=None,
                        help="grade every submission folder inside SUBMISSION into this CSV")
    parser.add_argument("--parts", nargs="+", default=None, help="only these parts, e.g. p1b")
    parser.add_argument("--jobs", type=int, default=None,
                        help="parts graded side by side (default: as many as the CPU quota "
                             "and the memory allow, e.g. 1 in Gradescope's 0.5 vCPU)")
    parser.add_argument("--deadline", type=float, default=DEADLINE_S,
                        help="seconds for one submission; tests not reached by then score 0 "
                             "(default %(default)s, inside Gradescope's 10 minutes)")
    parser.add_argument("--test-seconds", type=float, default=None,
                        help=f"one test's time limit (default {TEST_CPU_S} s at one full core, "
                             "scaled to the container's CPU quota)")
    parser.add_argument("--autograder", type=Path, default=None,
                        help="write the Gradescope autograder zip here and stop")
    return parser.parse_args(argv)


def check_output_path(path: Path, flag: str) -> None:
    if path.is_dir():
        fail(f"{flag} {path} is a folder: give a file name, e.g. {path / 'results.json'}")
    if not path.parent.is_dir():
        fail(f"{flag} {path}: the folder {path.parent} does not exist")


@script
def main(argv=None) -> int:
    args = parse_args(argv)
    if args.autograder is not None:
        check_output_path(args.autograder, "--autograder")
        build_autograder(args.autograder)
        print(f"wrote {args.autograder}")
        return 0
    if args.submission is None or not args.submission.is_dir():
        fail(f"{args.submission} is not a folder: give a submission's folder")
    parts = args.parts or list(RUBRIC.PARTS)
    unknown = [p for p in parts if p not in RUBRIC.PARTS]
    if unknown:
        fail(f"--parts {' '.join(unknown)}: not parts of the rubric ({' '.join(RUBRIC.PARTS)})")
    if args.jobs is not None and args.jobs < 1:
        fail(f"--jobs {args.jobs}: give 1 or more")
    for flag, value in (("--deadline", args.deadline), ("--test-seconds", args.test_seconds)):
        if value is not None and not (0 < value < math.inf):
            fail(f"{flag} {value}: give a positive number of seconds")
    output = args.csv if args.csv is not None else args.out
    check_output_path(output, "--csv" if args.csv is not None else "--out")
    start = time.monotonic()
    grader = setup(parts, args.jobs)
    if args.test_seconds:
        grader.test_seconds = args.test_seconds
    try:
        with hidden_from_sandbox(grader.sandboxes):
            if args.csv is not None:
                return grade_folder(args.submission, args.csv, grader, parts, args.deadline)
            budget = Budget(start + args.deadline, grader.test_seconds)
            results = grade(args.submission, grader, parts, args.out, budget)
    finally:
        grader.close()
    print(results["output"])
    print(f"wrote {args.out}")
    return 0


def grade_folder(folder: Path, csv_path: Path, grader: Grader, parts: list[str],
                 deadline: float) -> int:
    """One CSV row per submission folder inside folder: total and per-part scores (hidden
    tests included: the CSV is the instructor's), and a note; each submission's code as
    graded and its results.json in GRADED_FOLDER/<name>/ beside the CSV (what
    course.grading.class_report reads). The CSV is rewritten after every submission; one the
    grader failed on is a row with the reason, the others go on."""
    submissions = sorted(p for p in folder.iterdir() if p.is_dir())
    columns = ["submission", "score", "max_score", *parts, "results", "note"]
    rows = []
    for path in submissions:
        budget = Budget(time.monotonic() + deadline, grader.test_seconds)
        keep = csv_path.parent / GRADED_FOLDER / path.name
        try:
            keep.mkdir(parents=True, exist_ok=True)
            results = grade(path, grader, parts, keep / "results.json", budget, keep=keep)
        except Exception as err:  # a grader failure on one submission: the others go on
            rows.append({"submission": path.name, "score": 0.0,
                         "note": f"not graded: the grader failed ({type(err).__name__}: "
                                 f"{err})"[:300]})
            print(f"{path.name}: {rows[-1]['note']}", flush=True)
        else:
            tests = results["tests"]
            by_part = {part: _sum([t for t in tests if part in t["tags"]], "score")
                       for part in parts}
            results_points = _sum([t for t in tests if t["tags"][0].endswith("-results")],
                                  "score")
            rows.append({"submission": path.name, "score": results["score"],
                         "max_score": _sum(tests, "max_score"), **by_part,
                         "results": results_points, "note": ""})
            print(f"{path.name}: {results['score']:.2f} / {rows[-1]['max_score']:.2f}",
                  flush=True)
        write_csv(csv_path, columns, rows)
    write_csv(csv_path, columns, rows)
    print(f"wrote {csv_path}: {len(rows)} submissions")
    return 0


def write_csv(path: Path, columns: list[str], rows: list[dict]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
    os.replace(tmp, path)


if __name__ == "__main__":
    raise SystemExit(main())
