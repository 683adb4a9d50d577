"""What course/INSTRUCTORS.md and course/README.md state, checked against the code: the
counts they give, the modules and files they name, the commands a TA types (no `sudo python`,
which takes the system's Python), and that `make seeds-cluster` trains nothing here and says
so first. A number that changes with the code fails here with the sentence to update."""

import importlib.util
import re
import subprocess
import sys
from fractions import Fraction

import pytest

from course.grading import rubric
from course.grading.mutants import MUTANTS
from provided.common import REPO_ROOT

pytestmark = pytest.mark.kit

INSTRUCTORS = (REPO_ROOT / "course" / "INSTRUCTORS.md").read_text()
README = (REPO_ROOT / "course" / "README.md").read_text()
DOCS = {"course/INSTRUCTORS.md": INSTRUCTORS, "course/README.md": README}


def flat(text: str) -> str:
    """text with every run of white space one space (sentences wrap across lines)."""
    return re.sub(r"\s+", " ", text)


def test_the_mistake_count_is_the_catalogues():
    found = re.search(r"current counts \((\d+) mistakes", flat(INSTRUCTORS))
    assert found and int(found.group(1)) == len(MUTANTS), \
        f"INSTRUCTORS.md's mistake count: write {len(MUTANTS)}"
    header = (REPO_ROOT / "course" / "grading" / "MISTAKES.md").read_text()
    assert f"Caught by the graded tests: {len(MUTANTS)} of {len(MUTANTS)}" in header, \
        "MISTAKES.md is older than mutants.py: make mutants"


def test_the_points_are_the_rubrics():
    code = sum(points for *_, points in rubric.PARTS.values())
    written, results = sum(rubric.WRITTEN.values()), sum(rubric.RESULTS.values())
    text = flat(INSTRUCTORS)
    assert (f"Points: {code} for code (`PARTS`), {written} for written answers (`WRITTEN`: "
            + ", ".join(map(str, rubric.WRITTEN.values())) + f"), {results} for results") in text
    assert f"(`RESULTS`: {', '.join(map(str, rubric.RESULTS.values()))})" in text
    assert f"all {code} code points of the {code + results}" in text
    assert f"scores {code}/{code + results} too" in text
    assert f"gives {code}/{code + results}: every code point" in flat(README)
    assert Fraction(code + results + written) == 168


def test_the_public_test_count_is_pytests():
    """The READMEs' count of the public tests is what pytest collects in tests/."""
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "tests",
                           "-p", "no:cacheprovider"], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=300)
    collected = re.search(r"(\d+) tests? collected", done.stdout)
    assert collected, done.stdout[-2000:] + done.stderr[-2000:]
    count = int(collected.group(1))
    found = re.search(r"`pytest` \(the public tests, (\d+)\)", flat(README))
    assert found and int(found.group(1)) == count, \
        f"course/README.md: write `pytest` (the public tests, {count})"
    students = re.search(r"`pytest` runs every public test \((\d+) tests",
                         flat((REPO_ROOT / "README.md").read_text()))
    assert students and int(students.group(1)) == count, \
        f"README.md: write `pytest` runs every public test ({count} tests"


def test_every_module_of_the_kit_is_in_the_file_map():
    for folder in ("grading", "tools"):
        for path in sorted((REPO_ROOT / "course" / folder).glob("*.py")):
            if path.name != "__init__.py":
                assert path.name in README, f"course/README.md's file map lacks {path.name}"


def test_every_module_a_command_names_exists():
    for where, text in DOCS.items():
        for module in set(re.findall(r"python -m ([\w.]+)", text)):
            if module.split(".")[0] in ("course", "provided", "problem1", "problem2",
                                         "problem3"):
                assert importlib.util.find_spec(module) is not None, f"{where}: {module}"


def test_root_runs_the_repositorys_python_not_the_systems():
    """`sudo python` resets PATH to the system's Python, which lacks the requirements."""
    for where, text in DOCS.items():
        assert not re.search(r"^\s*sudo python\b", text, re.M), f"{where}: sudo .venv/bin/python"
    assert "sudo .venv/bin/python -m course.grading.grade" in INSTRUCTORS


def test_the_cluster_path_trains_nothing_here_and_says_so_first():
    """make -n prints every command (and runs the recursive makes with -n): no training
    run and no samples10k, and the first line is the target's own account."""
    done = subprocess.run(["make", "-n", "seeds-cluster"], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    commands = [line for line in done.stdout.splitlines() if not line.startswith("make[")]
    assert "trains as a cluster job, none on this machine" in commands[0]
    assert not [line for line in commands if re.search(r"\.train\b|samples10k", line)
                and "echo" not in line]
    assert any("course.tools.cluster seeds --wait" in line for line in commands)
    assert "trains nothing on this machine, which its first\nline says" in INSTRUCTORS


def test_the_students_readme_counts_the_weights_the_grader_needs():
    """The root README's file map says how many weight files git keeps: the grader's."""
    from course.grading.handout import graded_weights

    words = {10: "ten", 11: "eleven", 12: "twelve"}
    count = len(graded_weights())
    student_readme = flat((REPO_ROOT / "README.md").read_text())
    assert f"git ignores all but the {words.get(count, count)} the grader needs" in \
        student_readme, f"README.md's file map should say the {count} weight files"
