"""The student handout: solution regions removed, everything still imports, and every graded
test (public and hidden) fails on it rather than erroring, passing or hanging."""

import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from course.grading.handout import handout_gitignore, make_handout, tracked_files
from provided.given import strip_solutions

pytestmark = [pytest.mark.kit, pytest.mark.timeout(600)]

REPO = Path(__file__).resolve().parents[3]

SOURCE = '''def f(x):
    """Doc."""
    y = 1
    # BEGIN SOLUTION
    return x + y
    # END SOLUTION


class A:
    def __init__(self):
        # BEGIN SOLUTION
        self.a = 1
        # END SOLUTION
'''


def test_strip_solutions_replaces_each_region_at_its_indentation():
    out = strip_solutions(SOURCE)
    assert "return x + y" not in out and "self.a" not in out and "SOLUTION" not in out
    raises = [line for line in out.splitlines() if "NotImplementedError" in line]
    assert raises == ['    raise NotImplementedError("your solution here")',
                      '        raise NotImplementedError("your solution here")']
    assert "    y = 1\n" in out
    namespace = {}
    exec(compile(out, "handout", "exec"), namespace)
    with pytest.raises(NotImplementedError):
        namespace["f"](1)


@pytest.mark.parametrize("bad, message", [
    ("# END SOLUTION\n", "without BEGIN"),
    ("# BEGIN SOLUTION\nx = 1\n", "never closed"),
    ("# BEGIN SOLUTION\n# BEGIN SOLUTION\n", "inside another"),
])
def test_strip_solutions_rejects_broken_markers(bad, message):
    with pytest.raises(ValueError, match=message):
        strip_solutions(bad)


def outcomes(junit: Path) -> dict[str, str]:
    """{test id: 'passed' | 'failed' | 'error' | 'skipped'} from a JUnit XML report."""
    result = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        kinds = [child.tag for child in case if child.tag in ("failure", "error", "skipped")]
        name = f"{case.get('classname')}::{case.get('name')}"
        result[name] = {"failure": "failed", "error": "error",
                        "skipped": "skipped"}.get(kinds[0], kinds[0]) if kinds else "passed"
    return result


def graded_tests_in(handout: Path, junit: Path, *args: str) -> subprocess.CompletedProcess:
    """pytest on the handout's public tests and a copy of the hidden ones put into it, with
    the handout's code (not an installed copy), reported to junit."""
    shutil.copytree(REPO / "course" / "grading" / "hidden",
                    handout / "course" / "grading" / "hidden",
                    ignore=shutil.ignore_patterns("__pycache__"))
    env = {**os.environ, "PYTHONPATH": str(handout)}
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args,
                           "-m", "not kit", f"--junitxml={junit}", "tests",
                           "course/grading/hidden"],
                          cwd=handout, capture_output=True, text=True, env=env)


def test_handout_imports_and_every_graded_test_fails(tmp_path):
    handout = tmp_path / "handout"
    removed = make_handout(handout)
    assert removed >= 30
    assert not list(handout.glob("problem*/results/*"))
    assert not (handout / "course").exists()
    for path in handout.glob("problem*/*.py"):
        assert "BEGIN SOLUTION" not in path.read_text()
    # the hidden tests too must fail on the empty bodies
    junit = tmp_path / "report.xml"
    ran = graded_tests_in(handout, junit, "-q")
    assert ran.returncode == 1, ran.stdout[-3000:]  # 1: tests failed (2 or more: errors)
    results = outcomes(junit)
    assert len(results) > 100
    not_failed = {name: outcome for name, outcome in results.items() if outcome != "failed"}
    assert not not_failed, not_failed


def test_the_handout_is_the_tree_without_the_course(tmp_path):
    """Every file of the handout but the solution files is the repository's own, byte for
    byte; nothing from course/ or the reference results comes along, nor any tool's cache."""
    out = tmp_path / "handout"
    make_handout(out)
    names = {path.relative_to(out).as_posix() for path in out.rglob("*") if path.is_file()}
    expected = {name for name in tracked_files(REPO)
                if not name.startswith("course/") and "/results/" not in name}
    assert names == expected
    for name in names:
        if not (name.startswith("problem") and name.endswith(".py")) and name != ".gitignore":
            assert (out / name).read_bytes() == (REPO / name).read_bytes(), name
    assert (out / ".gitignore").read_text() == handout_gitignore((REPO / ".gitignore").read_text())
    assert not (out / ".ruff_cache").exists()


def test_a_hand_in_by_repository_keeps_every_file_make_submission_packs(tmp_path):
    """The handout's .gitignore ignores none of the files the grader needs (every graded
    result file of provided.submission.graded_results, the figures, the reports, the code),
    so that a student's repository pulled by Gradescope carries what `make submission`
    packs; the sweep's weights, resume files and step checkpoints stay ignored."""
    from provided.submission import PROBLEMS, graded_results

    out = tmp_path / "handout"
    make_handout(out)
    subprocess.run(["git", "init", "-q"], cwd=out, check=True)
    needed = [f"{problem}/results/{name}" for problem in PROBLEMS
              for name in graded_results(problem)]
    needed += [f"{problem}/{name}" for problem in PROBLEMS
               for name in ("REPORT.md", "results/figures/x.png", "results/vocab.json")]
    assert sum(name.endswith(".pth") for name in needed) == 11
    ignored = ["problem3/results/model_post_lr0.01_w0.pth", "problem3/results/resume_x.pth",
               "problem3/results/model_pre_lr0.001_w500_s4000_step1000.pth",
               "problem1/results/seeds/seed1/model_forward_n1000.pth"]
    found = subprocess.run(["git", "check-ignore", "--no-index", *needed, *ignored], cwd=out,
                           capture_output=True, text=True).stdout.split()
    assert sorted(found) == sorted(ignored)


def timing_rows(text: str, heading: str) -> dict[str, str]:
    """{job: time} of the first Markdown table after the line starting with heading."""
    lines = text[text.index(heading):].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| job") or
                 line.startswith("| step"))
    rows = {}
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        job, time = (cell.strip() for cell in line.strip("|").rsplit("|", 1))
        rows[job] = time
    return rows


def test_the_students_timings_are_the_instructors_measurement():
    """One set of timings: every time in the student README's compute budget is one the
    instructors' README measured (same run, same machine)."""
    students = timing_rows((REPO / "README.md").read_text(), "## Compute budget")
    instructors = (REPO / "course" / "README.md").read_text()
    measured = " ".join(timing_rows(instructors, "## How long things take").values())
    measured += " " + instructors[instructors.index("## How long things take"):][:2000]
    missing = {job: time for job, time in students.items() if time.split(" each")[0]
               not in measured}
    assert len(students) >= 8 and not missing, (
        f"the student README's timings {missing} are not in course/README.md's 'How long things "
        "take': quote the same measurement in both")


def test_the_handout_filled_with_the_alternatives_passes_every_graded_test(tmp_path):
    """Solutions written differently (course/grading/alternatives) pass every public and
    hidden test: a new test that pins a choice the docstrings leave open (an attribute's
    name, a loop instead of a reshape, ...) fails here, not in a course (about 20 s)."""
    filled = tmp_path / "filled"
    make_handout(filled, fill=REPO / "course" / "grading" / "alternatives")
    junit = tmp_path / "report.xml"
    ran = graded_tests_in(filled, junit, "-q", "-rf")
    results = outcomes(junit)
    not_passed = {name: outcome for name, outcome in results.items() if outcome != "passed"}
    assert ran.returncode == 0 and not not_passed, (
        f"the alternatives do not pass {not_passed}: does the test check more than the "
        f"docstring promises?\n{ran.stdout[-3000:]}")
    assert len(results) > 200
