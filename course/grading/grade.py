"""The grading run, which runs in the grader's own process: grade a submission, or a folder
of them, part by part; or build the Gradescope autograder.

    python -m course.grading.grade SUBMISSION_DIR --out results.json     # one submission
    python -m course.grading.grade SUBMISSIONS_DIR --csv scores.csv      # a folder of submissions
    python -m course.grading.grade --autograder build/autograder.zip  # the Gradescope zip

Instructors only: the handout leaves course/ out. The points are in course/grading/rubric.py.

The grader first starts the zygote
(course/grading/zygote.py), a fresh interpreter that forks every judge (and, through the
judges' wardens, every sandbox), then
reads what it trusts (course/grading/trusted.py: the rubric, the reference code, the public
and hidden tests, the bands). Each submission then goes through the stages of grade(), plain
calls with values between them:

    take_in        the submission's files copied defensively, its solution files taken
                   whole with the given code put back, and said where it was, its own
                   modules, packages and data files as they are (course/grading/intake.py)
    build_trees    the sandboxes' tree (that code, no test) and the judges' tree (the
                   tests over the handout's code)
    grade_results  each problem's results recomputed from its files and judged against the
                   bands (course/grading/scoring.py)
    run_judges     the tests, public then hidden, in judges (course/grading/judges.py,
                   judge.py), every call a test makes to the submission (tests/seam.py)
                   answered, with data only, by a sandbox of that test's own
                   (course/grading/sandbox.py)
    results_json   Gradescope's results.json (course/grading/gradescope.py)

So no process that judges a test ever runs the submission's code. A part's points are
shared equally among its tests. Each problem's results/metrics.json is checked against
problemN/results/reference_bands.json: each problem's status (every graded quantity
verified, unverified or differing, the result files missing) is shown at once, worth 0
points; the points and whether each value lies in its band (never the band) are shown after
publication. Before any submission is read the grader checks its own data (data/, by the
SHA-1 of course/grading/grader_data.py) and stops with one line naming the command that
makes it, exit 2; --code-only grades without it, every results entry then "not graded:
--code-only", earning nothing.

Output: Gradescope's results.json (`tests[]` with `name`, `score`, `max_score`,
`visibility`, `output`; no top-level `score`: Gradescope sums the tests, and hides that total
from students until publication since the hidden entries are `after_published`), written
before grading starts and again after every test, so that it exists whatever happens; and
a score table of the visible tests on stdout. The exit status is 0 whenever the submission
could be graded, whatever its score; 2 for a bad flag or the grader's own data missing or
wrong.
"""

import csv
import math
import os
import queue
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from course.grading import rubric as RUBRIC
from course.grading.accounts import (
    JUDGE_USER,
    NOT_ROOT,
    make_tree,
    release,
    sandbox_pool,
    sandbox_user,
)
from course.grading.grader_data import data_fault
from course.grading.gradescope import (
    DEADLINE_S,
    build_autograder,
    default_jobs,
    results_json,
    score_of,
    total,
)
from course.grading.intake import (
    GRADED_FOLDER,
    copy_submission,
    find_root,
    given_code_told,
    keep_graded_code,
    submission_code,
)
from course.grading.judges import WALL_FACTOR, Seat, run_tests
from course.grading.scoring import CODE_ONLY, grade_results, part_entries
from course.grading.trusted import Kit, read_kit
from course.grading.users import Sandbox, end_users, world_writable_folders
from course.grading.zygote import Zygote
from provided.common import DATA_DIR, REPO_ROOT, ArgumentParser, fail, script
from provided.limits import TEST_CPU_S  # the slowest reference test: 3.8 CPU-seconds idle
from provided.results import write_json

TOO_LATE = "not graded: the grading time limit was reached"
RESULTS_SHARE = 1 / 3  # of the grading's time, what recomputing the results may take
STOPPED = "not graded: the grader stopped before this test ran (time limit?)"


@dataclass
class Budget:
    """The time grading may take: a deadline for everything and a limit per test."""
    deadline: float  # time.monotonic() after which nothing more is run
    test_seconds: float

    def left(self) -> float:
        return self.deadline - time.monotonic()


@dataclass
class Grader:
    """What grading needs, ready before any submission is read: the kit, a pool of sandbox
    users per job (course/grading/users.py), the zygote the sandboxes are forked from, one
    test's CPU time limit (CPU-seconds); code_only: the results are not graded (the grader
    has no data); judges: per job, the user its judge runs as; reader: the user a
    submission's weights are parsed as (course/grading/weights.py)."""
    kit: Kit
    sandboxes: list  # [job][user]: Sandbox
    zygote: Zygote
    test_seconds: float
    judges: list  # [job]: Sandbox
    reader: Sandbox  # who parses a submission's weights
    code_only: bool = False

    def close(self) -> None:
        self.zygote.close()
        release([user for pool in self.sandboxes for user in pool] + self.judges
                + [self.reader])


# ----------------------------------------------------------------------------- stages
@dataclass(frozen=True)
class Intake:
    """A submission taken in: its root (None without a problem folder), its code as graded
    ({path: bytes}), why a part's code could not be taken ({part: reason}), a note for
    the student, and the given code put back ({part: lines its visible entries say})."""
    root: Path | None
    code: dict
    reasons: dict
    note: str
    told: dict = field(default_factory=dict)


def take_in(submission: Path, kit: Kit, scratch: Path) -> Intake:
    """The submission copied into scratch/submission (everything the grader reads of it
    comes from this copy), and its code as graded (course/grading/intake.py)."""
    copy = scratch / "submission"
    copy.mkdir(mode=0o700)
    left_out = copy_submission(submission, copy)
    root = find_root(copy)
    code, reasons = submission_code(kit, root)
    told = given_code_told(kit, root)
    note = "" if root is not None else (
        "Your submission holds no problem1/, problem2/ or problem3/ folder: nothing could "
        "be graded. Submit the repository's folder (or its contents).")
    if left_out:
        note = "\n".join(filter(None, [note, "Files of your submission not graded:",
                                        *left_out[:20]]))
    lines = list(dict.fromkeys(line for part in told.values() for line in part))
    if lines:
        note = "\n".join(filter(None, [note, "Given code put back as the handout has it "
                                        "(python -m provided.submission --check says the same):",
                                        *lines[:20]]))
    return Intake(root, code, reasons, note, told)


def build_trees(kit: Kit, code: dict, parts: list[str], scratch: Path) -> tuple[Path, Path]:
    """(the sandboxes' template tree: the handout's code with the submission's, the public
    helpers, no test; the judges' tree: the tests, public and hidden, over the handout's
    code)."""
    template, judge_tree = scratch / "sandbox", scratch / "judge"
    make_tree(template, {**kit.sandbox_files(), **code})
    make_tree(judge_tree, kit.judge_files(parts))
    return template, judge_tree


def runnable(kit: Kit, parts: list[str], reasons: dict) -> list[str]:
    """The node ids to run, every public test before any hidden one, without the parts
    whose code could not be taken."""
    return [node for which in ("visible", "hidden") for part in parts
            if part not in reasons for node in kit.tests[part][which]]


def test_groups(kit: Kit, parts: list[str]) -> dict:
    """{node id: its group}: a part's public tests are a group, its hidden tests another;
    a group's tests may take judges.GROUP_TESTS tests' time limits together."""
    return {node: f"part {part} ({'public' if which == 'visible' else 'hidden'})"
            for part in parts for which in ("visible", "hidden")
            for node in kit.tests[part][which]}


def run_judges(grader: Grader, judge_tree: Path, template: Path, nodes: list[str],
               budget: Budget, scratch: Path):
    """Run nodes in judges, one per pool of sandbox users, side by side (node i in judge i mod
    jobs); yields (node, passed, output) as each outcome arrives, in this thread, then one
    for every node no judge reached, with the reason."""
    jobs = len(grader.sandboxes)
    arrived = queue.Queue()
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        groups = test_groups(grader.kit, list(grader.kit.tests))
        spent = {}  # {group: CPU-seconds}, of every judge's tests
        futures = [pool.submit(judge_share, grader, index, nodes[index::jobs], judge_tree,
                               template, budget, scratch, arrived.put, groups, spent)
                   for index in range(jobs)]
        done = 0
        while done < jobs:
            item = arrived.get()
            if item is None:
                done += 1
            else:
                yield item
        for future in futures:
            future.result()


def judge_share(grader: Grader, index: int, nodes: list[str], judge_tree: Path,
                template: Path, budget: Budget, scratch: Path, report, groups: dict,
                spent: dict) -> None:
    """Judge index's share of the tests (in a thread of run_judges): each outcome, then
    each node left without one, reported as (node, passed, output); None when done."""
    try:
        pool = grader.sandboxes[index]
        work = scratch / f"work{index}"
        work.mkdir(mode=0o711)
        seat = Seat(grader.zygote, pool, grader.judges[index], template, work, work / "pytest")
        result = run_tests(judge_tree, nodes, seat, str(REPO_ROOT), budget.test_seconds,
                           budget.deadline, TOO_LATE,
                           lambda node, passed, output: report((node, passed, output)), groups,
                           spent)
        end_users(pool)
        for node in nodes:
            if node not in result.outcomes:
                report((node, False, result.unreached or STOPPED))
    finally:
        report(None)


def code_entries(kit: Kit, parts: list[str], outcomes: dict, reasons: dict,
                 told: dict | None = None) -> list[dict]:
    """Every part's test entries, public then hidden, from {node: (passed, output)}; a test
    without an outcome scores 0 with its part's reason (or STOPPED); told: {part: lines}
    that each of its public entries ends with (the given code put back)."""
    told = told or {}
    return [entry for part in parts for which in ("visible", "hidden")
            for entry in part_entries(kit, part, which, outcomes, reasons.get(part, STOPPED),
                                      told.get(part, ()))]


def save(out: Path | None, results: dict) -> dict:
    if out is not None:
        write_json(out, results)
    return results


def grade(submission: Path, grader: Grader, parts: list[str], out: Path | None,
          budget: Budget, keep: Path | None = None) -> dict:
    """Gradescope's results.json for one submission folder, written to out (if given)
    before grading and after every test, so that a stopped grader still leaves one. The
    submission's code exactly as graded is kept in keep (default: GRADED_FOLDER beside
    out)."""
    kit, start = grader.kit, time.monotonic()
    # before the submission is read: a grader stopped there leaves this
    save(out, results_json(code_entries(kit, parts, {}, {}), start))
    with tempfile.TemporaryDirectory(prefix="grade_") as scratch:
        scratch = Path(scratch)
        scratch.chmod(0o711)
        taken = take_in(submission, kit, scratch)
        template, judge_tree = build_trees(kit, taken.code, parts, scratch)
        keep = keep or (out.parent / GRADED_FOLDER if out is not None else None)
        if keep is not None:
            keep_graded_code(keep, taken.code)
        results = grade_results(kit, taken.root, scratch,
                                CODE_ONLY if grader.code_only else None,
                                (grader.zygote.path, grader.reader),
                                time.monotonic() + budget.left() * RESULTS_SHARE)
        outcomes = {}
        save(out, results_json(code_entries(kit, parts, outcomes, taken.reasons, taken.told)
                               + results, start, taken.note))
        for node, passed, output in run_judges(grader, judge_tree, template,
                                               runnable(kit, parts, taken.reasons), budget,
                                               scratch):
            outcomes.setdefault(node, (passed, output))
            save(out, results_json(code_entries(kit, parts, outcomes, taken.reasons, taken.told)
                                   + results, start, taken.note))
        return save(out, results_json(code_entries(kit, parts, outcomes, taken.reasons, taken.told)
                                      + results, start, taken.note))


# ------------------------------------------------------------------------------- main
@contextmanager
def hidden_from_sandbox():
    """While grading, the repository is closed to every user but its owner: its top-level
    entries lose their group and other permissions (the folders of this Python's own
    environment, which the sandbox user must import from, excepted) and the root keeps
    only traversal, so that no sandbox can read a reference solution, a hidden test or a
    band. Restored afterwards."""
    changed = []
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


def setup(parts: list[str], jobs: int | None = None, code_only: bool = False) -> Grader:
    """What grading needs, ready before any submission is read: the grader's data checked
    first (one line and exit 2 if it is missing or not the homework's, unless code_only),
    then the zygote (a fresh interpreter, so no sandbox ever holds what the grader reads
    next), then the kit. jobs defaults to what the CPU quota and the memory allow. Root
    only (one line and exit 2 otherwise): every judge and sandbox takes a user of its own."""
    if os.geteuid() != 0:
        fail(NOT_ROOT)
    if not code_only:
        check_grader_data()
    jobs = jobs or default_jobs()
    sandboxes = [sandbox_pool() for _ in range(jobs)]
    judges = [sandbox_user(JUDGE_USER) for _ in range(jobs)]
    world_writable_folders()  # found once: every judge's warden cleans up after its users
    zygote = Zygote()
    print(f"sandbox isolation: {zygote.isolation}", flush=True)
    return Grader(read_kit(parts), sandboxes, zygote, TEST_CPU_S, judges, sandbox_user(),
                  code_only)


def check_grader_data(data_dir: Path | None = None) -> None:
    """Stop (one line, exit 2) unless every data file the results are recomputed on (in
    data_dir, default DATA_DIR) is the homework's (course/grading/grader_data.py: SHA-1
    only, a few milliseconds)."""
    fault = data_fault(data_dir or DATA_DIR)
    if fault is not None:
        fail(f"{fault}; or grade the code alone, knowingly, with --code-only")


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
                        help=f"one test's CPU time limit (default {TEST_CPU_S} CPU-seconds, its "
                             "code's and the test's own; a test that sleeps or waits ends "
                             f"after {WALL_FACTOR} times that of wall-clock time)")
    parser.add_argument("--code-only", action="store_true",
                        help="grade the code without the grader's data: every results entry "
                             "then says 'not graded: --code-only' and earns nothing")
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
    grader = setup(parts, args.jobs, code_only=args.code_only)
    if args.test_seconds:
        grader.test_seconds = args.test_seconds
    try:
        with hidden_from_sandbox():
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
    grader failed on is a row with the reason, the others go on. An entry that is not a
    folder (a zip) is named in one line and skipped."""
    submissions = sorted(p for p in folder.iterdir() if p.is_dir())
    for stray in sorted(p for p in folder.iterdir() if not p.is_dir()):
        print(f"{stray.name}: skipped, not a submission folder (a class folder as it comes, "
              "zips and repositories: python -m course.grading.unpack CLASS SUBMISSIONS "
              "first)", flush=True)
    columns = ["submission", "score", "max_score", *parts, "results", "note"]
    rows = []
    for path in submissions:
        budget = Budget(time.monotonic() + deadline, grader.test_seconds)
        keep = private_folder(csv_path.parent / GRADED_FOLDER) / path.name
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
            by_part = {part: total([t for t in tests if part in t["tags"]], "score")
                       for part in parts}
            results_points = total([t for t in tests if t["tags"][0].endswith("-results")],
                                  "score")
            rows.append({"submission": path.name, "score": score_of(results),
                         "max_score": total(tests, "max_score"), **by_part,
                         "results": results_points, "note": ""})
            print(f"{path.name}: {rows[-1]['score']:.2f} / {rows[-1]['max_score']:.2f}",
                  flush=True)
        write_csv(csv_path, columns, rows)
    write_csv(csv_path, columns, rows)
    print(f"wrote {csv_path}: {len(rows)} submissions")
    return 0


def private_folder(folder: Path) -> Path:
    """folder, made if missing and closed to every user but its owner (the grader): every
    submission's graded code and results.json lie under it, and no sandbox may read another
    submission's."""
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o700)
    return folder


def write_csv(path: Path, columns: list[str], rows: list[dict]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
    os.replace(tmp, path)


if __name__ == "__main__":
    raise SystemExit(main())
