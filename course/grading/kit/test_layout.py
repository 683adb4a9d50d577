"""The repository's two audiences: the root is the homework as students receive it, and
course/ holds everything for instructors only. Imports run from course/ into the root,
never back, so that the handout (the tree without course/) imports and runs."""

import ast
import re
from pathlib import Path

import pytest

from course.grading.handout import tracked_files
from provided.common import REPO_ROOT

pytestmark = pytest.mark.kit

HOMEWORK_TOP_LEVEL = {".ci", ".gitignore", "Makefile", "README.md", "conftest.py", "course",
                      "data", "generate_datasets.py", "problem1", "problem2", "problem3",
                      "provided", "pyproject.toml", "requirements.txt", "tests"}


def imported_roots(source: str) -> set[str]:
    """The top-level names of every module a source file imports (lazy imports included)."""
    roots = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots


def test_imported_roots_finds_lazy_and_dotted_imports():
    source = "import os.path\ndef f():\n    from course.grading import grade\n"
    assert imported_roots(source) == {"os", "course"}


def test_imports_run_from_the_course_into_the_homework():
    offenders = [name for name in tracked_files(REPO_ROOT)
                 if name.endswith(".py") and not name.startswith("course/")
                 and "course" in imported_roots((REPO_ROOT / name).read_text())]
    assert not offenders, (f"{offenders} import course/: the handout leaves course/ out, so "
                           "move the code that needs it under course/")


def test_the_top_level_is_the_homework_and_one_course_folder():
    top = {name.split("/")[0] for name in tracked_files(REPO_ROOT)}
    assert top == HOMEWORK_TOP_LEVEL, (
        f"unexpected top-level entries {sorted(top - HOMEWORK_TOP_LEVEL)}, missing "
        f"{sorted(HOMEWORK_TOP_LEVEL - top)}: instructors-only files go under course/")


COURSE_INCLUDE = "-include course/course.mk"


def test_no_homework_file_names_the_course():
    """The students' files say nothing of course/ (the handout has none), except the README's
    pointer for instructors, CI's step that runs the course's tests where they exist, and the
    Makefile's one line that includes the course's targets where they exist."""
    allowed = {"README.md", ".ci/run"}

    def text(name: str) -> str:
        source = (REPO_ROOT / name).read_text()
        return source.replace(COURSE_INCLUDE, "") if name == "Makefile" else source

    naming = [name for name in tracked_files(REPO_ROOT)
              if not name.startswith("course/") and "/results/" not in name
              and name not in allowed and not name.endswith((".png", ".pt"))
              and "course/" in text(name)]
    assert not naming, f"{naming} name course/: keep instructors' matters under course/"


def test_the_makefile_includes_the_course_only_where_it_exists():
    """`-include`: in the handout (no course/) make runs without the course's targets."""
    lines = (REPO_ROOT / "Makefile").read_text().splitlines()
    assert COURSE_INCLUDE in lines, "the root Makefile must `-include course/course.mk`"


LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


REFERENCE_REPORT = re.compile(r"course/reports/(problem\d)\.md")


def link_base(name: str) -> Path:
    """Where a document's relative links start: its own folder, but a reference report's,
    which is rendered as problemN/REPORT.md (course/INSTRUCTORS.md), starts at problemN/."""
    report = REFERENCE_REPORT.fullmatch(name)
    return REPO_ROOT / report.group(1) if report else (REPO_ROOT / name).parent


def test_every_relative_link_of_the_readmes_and_reports_resolves():
    documents = ["README.md", *(n for n in tracked_files(REPO_ROOT)
                                if n.endswith(".md") and (n.startswith("course/")
                                                          or n.endswith("REPORT.md")))]
    broken = [f"{name}: {target}" for name in documents
              for target in LINK.findall((REPO_ROOT / name).read_text())
              if "://" not in target and not (link_base(name) / target).resolve().exists()]
    assert not broken, f"links to files that do not exist: {broken}"
