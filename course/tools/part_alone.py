"""Each part alone, and each mistake's blast radius: local pytest runs, no grader (minutes).

    python -m course.tools.part_alone [--parts p1d ...]            # each part filled alone
    python -m course.tools.part_alone --mistakes [NAME ...] [--write]  # the blast radius

Instructors only. The grader grades every part on the student's own code in every other
part, so a part earns all its points only if its tests need no other part's code. Both
measurements run pytest as a student would (the seam's loopback behaves as the grader
does, so a local run predicts the grade), in a tree that is the handout plus the hidden
tests (course/grading/hidden/), one pytest process at a time:

1. Part alone: the handout with only that part's reference functions spliced in (every
   other region raises NotImplementedError), then `pytest -m <part>`: the tests of the part
   that fail there, and the points they cost.
2. Blast radius (--mistakes): the handout filled with the reference, one catalogued mistake
   (course/grading/mutants.py) planted, then the tests of every part of its problem: the
   points each *other* part loses (and whether its own part still catches it). --write puts
   the matrix into course/grading/MISTAKES.md (between its `blast radius` markers).

A part's points are shared equally among its tests, public and hidden (course/grading/rubric.py).
The exit status is 1 if a part alone is short, or a mistake costs points outside its part or
goes uncaught in its own.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from course.grading import rubric
from course.grading.handout import fill_regions, make_handout
from course.grading.mutants import BLAST_BEGIN as BEGIN_MARK
from course.grading.mutants import BLAST_END as END_MARK
from course.grading.mutants import MISTAKES_FILE, MUTANTS, submission_with
from course.grading.paths import HIDDEN_DIR
from course.tools.grade_check import fill_one_part
from provided.common import REPO_ROOT, ArgumentParser, fail, script
from provided.results import atomic_write_text

# A pytest plugin written into each tree: {node id: [part, outcome]} of the tests that ran.
PLUGIN_NAME = "_part_alone_outcomes"
PLUGIN = '''import json, os
import pytest
from tests.parts import PARTS

SEEN = {}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    parts = [m.name for m in item.iter_markers() if m.name in PARTS]
    old = SEEN.get(item.nodeid, [parts[0] if parts else "", "passed"])
    failed = report.failed
    SEEN[item.nodeid] = [old[0], "failed" if failed or old[1] == "failed" else "passed"]


def pytest_sessionfinish(session):
    with open(os.environ["PART_ALONE_OUT"], "w") as out:
        json.dump(SEEN, out)
'''


def tree_with_tests(tree: Path) -> Path:
    """tree (a handout) with the hidden tests and the outcome plugin added."""
    shutil.copytree(REPO_ROOT / HIDDEN_DIR, tree / HIDDEN_DIR,
                    ignore=shutil.ignore_patterns("__pycache__"), dirs_exist_ok=True)
    (tree / f"{PLUGIN_NAME}.py").write_text(PLUGIN)
    return tree


def run_tests(tree: Path, marker: str, timeout: float = 1800) -> dict:
    """{node id: (part, "passed" | "failed")} of `pytest -m marker` (public and hidden tests)
    run in tree, with tree's code only on the path."""
    out = tree / "outcomes.json"
    out.unlink(missing_ok=True)
    env = {**os.environ, "PYTHONPATH": str(tree), "PART_ALONE_OUT": str(out),
           "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", PLUGIN_NAME,
         "-m", marker, "tests", HIDDEN_DIR], cwd=tree, env=env, capture_output=True,
        text=True, timeout=timeout)
    if not out.exists():
        fail(f"pytest -m '{marker}' in {tree} ran no test (status {done.returncode}):\n"
             + done.stdout[-3000:] + done.stderr[-2000:])
    return {name: tuple(value) for name, value in json.loads(out.read_text()).items()}


def points_lost(outcomes: dict) -> dict:
    """{part: (points lost, failing tests)} of the parts with a failing test."""
    tests = {}
    for part, outcome in outcomes.values():
        total, failed = tests.get(part, (0, 0))
        tests[part] = (total + 1, failed + (outcome == "failed"))
    return {part: (rubric.PARTS[part][3] * failed / total, failed)
            for part, (total, failed) in tests.items() if failed}


def alone(handout: Path, scratch: Path, parts: list[str]) -> dict:
    """{part: {"failed": [test ids], "score": points, "max": points, "seconds": s}}."""
    found = {}
    for part in parts:
        start = time.monotonic()
        tree = tree_with_tests(fill_one_part(handout, scratch / f"alone_{part}", part,
                                             rubric.REGIONS))
        outcomes = run_tests(tree, part)
        failed = sorted(name for name, (_, outcome) in outcomes.items() if outcome == "failed")
        points = rubric.PARTS[part][3]
        lost = points * len(failed) / max(len(outcomes), 1)
        found[part] = {"failed": failed, "tests": len(outcomes), "max": points,
                       "score": round(points - lost, 2),
                       "seconds": round(time.monotonic() - start, 1)}
        shutil.rmtree(tree)
        print(f"{part}: {points - lost:.2f} / {points} ({len(outcomes)} tests, "
              f"{found[part]['seconds']:.0f} s)" + "".join(f"\n    FAIL {n}" for n in failed),
              flush=True)
    return found


def blast(handout: Path, scratch: Path, names: list[str] | None) -> dict:
    """{mistake: {"part", "caught": its own part's failing tests, "lost": {other part:
    [points, failing tests]}, "failed": [...], "seconds"}} of each mistake planted in the
    reference, the tests of every part of its problem run (its own part's as a check that
    the mistake is still caught)."""
    reference = scratch / "reference"
    shutil.copytree(handout, reference)
    fill_regions(reference, REPO_ROOT)
    tree_with_tests(reference)
    found = {}
    for mutant in MUTANTS:
        if names and mutant.name not in names:
            continue
        start = time.monotonic()
        problem = rubric.PARTS[mutant.part][0]
        parts = [p for p, named in rubric.PARTS.items() if named[0] == problem]
        planted = submission_with(mutant, scratch / "planted")
        original = (reference / mutant.file).read_text()
        (reference / mutant.file).write_text((planted / mutant.file).read_text())
        try:
            outcomes = run_tests(reference, " or ".join(parts))
        finally:
            (reference / mutant.file).write_text(original)
            shutil.rmtree(planted)
        lost = points_lost({n: v for n, v in outcomes.items() if v[0] != mutant.part})
        found[mutant.name] = {
            "part": mutant.part,
            "caught": sorted(n for n, (p, o) in outcomes.items()
                             if p == mutant.part and o == "failed"),
            "lost": {p: [round(points, 2), n] for p, (points, n) in lost.items()},
            "failed": sorted(n for n, (p, o) in outcomes.items()
                             if p != mutant.part and o == "failed"),
            "seconds": round(time.monotonic() - start, 1)}
        where = ", ".join(f"{p} -{points:.2f} ({n} tests)" for p, (points, n) in lost.items())
        print(f"{mutant.name}: {where or 'nothing outside its part'}"
              + ("" if found[mutant.name]["caught"] else "; NOT CAUGHT in its own part")
              + f" ({found[mutant.name]['seconds']:.0f} s)", flush=True)
    return found


def markdown(found: dict) -> str:
    """The blast-radius section of MISTAKES.md: each mistake that costs points outside its
    part, with the parts and points; then how many cost nothing there."""
    costly = {name: f for name, f in found.items() if f["lost"]}
    lines = [BEGIN_MARK, "", "## Blast radius", "",
             "Generated by `python -m course.tools.part_alone --mistakes --write`: each "
             "mistake planted alone in the reference, the tests of the *other* parts of its "
             "problem run (public and hidden; a part's points shared equally among its tests). "
             f"Mistakes that cost points outside their own part: {len(costly)} of {len(found)}."
             f" Still caught by their own part's tests there: "
             f"{sum(1 for f in found.values() if f['caught'])} of {len(found)}.", ""]
    if costly:
        lines += ["| mistake | part | other parts that lose points |", "|---|---|---|"]
        for name, f in costly.items():
            where = "; ".join(f"{p}: {points:.2f} ({n} tests)" for p, (points, n)
                              in f["lost"].items())
            lines.append(f"| `{name}` | {f['part']} | {where} |")
        lines.append("")
    lines.append(END_MARK)
    return "\n".join(lines) + "\n"


def write_blast(found: dict) -> None:
    """MISTAKES.md with its blast-radius section (added at the end, or replaced)."""
    text = MISTAKES_FILE.read_text()
    section = markdown(found)
    pattern = re.compile(re.escape(BEGIN_MARK) + ".*?" + re.escape(END_MARK) + "\n?", re.S)
    text = pattern.sub(lambda _: section, text) if pattern.search(text) else (
        text.rstrip("\n") + "\n\n" + section)
    atomic_write_text(MISTAKES_FILE, text)


@script
def main(argv=None) -> int:
    parser = ArgumentParser(__doc__)
    parser.add_argument("--parts", nargs="+", default=None, choices=list(rubric.PARTS))
    parser.add_argument("--mistakes", nargs="*", default=None,
                        help="the blast radius of these mistakes (all if none named)")
    parser.add_argument("--write", action="store_true",
                        help="with --mistakes (all): rewrite MISTAKES.md's blast radius")
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = parser.parse_args(argv)
    if args.write and (args.mistakes is None or args.mistakes):
        fail("--write needs --mistakes with no names (the whole catalogue)")
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="part_alone_") as scratch:
        scratch = Path(scratch)
        handout = scratch / "handout"
        make_handout(handout)
        if args.mistakes is not None:
            found = blast(handout, scratch, args.mistakes)
            bad = [name for name, f in found.items() if f["lost"] or not f["caught"]]
            if args.write:
                write_blast(found)
        else:
            found = alone(handout, scratch, args.parts or list(rubric.PARTS))
            bad = [part for part, f in found.items() if f["failed"]]
    if args.json:
        args.json.write_text(json.dumps(found, indent=1))
    print(f"{len(found) - len(bad)} of {len(found)} clean ({time.monotonic() - start:.0f} s)"
          + (f"; not clean: {' '.join(bad)}" if bad else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
