"""The grader's modules are cut by process (course/grading/__init__.py is the map): each
says in its first lines which process runs it, the imports between them form no circle,
and what the zygote imports (its two entries, judge.py and sandbox.py, and theirs) holds
nothing secret, since every sandbox is forked from it."""

import ast
import json
import subprocess
import sys

import pytest

from provided.common import REPO_ROOT

pytestmark = pytest.mark.kit

GRADING = REPO_ROOT / "course" / "grading"
BY_PROCESS = ("grade", "trusted", "intake", "scoring", "gradescope", "judges", "users",
              "zygote", "judge", "warden", "sandbox")
# what a process forked from the zygote may hold of the repository: no rubric, no hidden
# test, no band, no reference code (problemN), no recomputation
ZYGOTE_MAY_IMPORT = {"course", "course.grading", "course.grading.judge",
                     "course.grading.sandbox", "course.grading.users",
                     "course.grading.warden",
                     "course.grading.zygote", "course.grading.paths",
                     "course.grading.syscalls", "course.grading.landlock",
                     "course.grading.weights",
                     "provided", "provided.limits"}  # the handout's own limits: no secret


def grading_imports(name: str) -> set[str]:
    """The course.grading modules that course/grading/<name>.py imports (lazy ones too)."""
    tree = ast.parse((GRADING / f"{name}.py").read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "course.grading":
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                "course.grading."):
            found.add(node.module.split(".")[2])
    return found - {"kit", "hidden", "alternatives"}


def test_each_module_says_which_process_runs_it():
    for name in BY_PROCESS:
        doc = ast.get_docstring(ast.parse((GRADING / f"{name}.py").read_text())) or ""
        first = " ".join(doc.split("\n\n")[:2]).lower()
        assert "runs" in first and any(p in first for p in (
            "grader", "zygote", "judge", "sandbox")), (
            f"course/grading/{name}.py's docstring must open by saying which process runs it")


def test_the_grading_imports_form_no_circle():
    graph = {path.stem: grading_imports(path.stem) for path in GRADING.glob("*.py")
             if path.stem != "__init__"}
    done, path = set(), []

    def visit(node):
        assert node not in path, f"an import circle: {' -> '.join(path + [node])}"
        if node in done:
            return
        path.append(node)
        for child in sorted(graph.get(node, ())):
            visit(child)
        path.pop()
        done.add(node)
    for node in sorted(graph):
        visit(node)


def test_the_zygote_holds_nothing_secret():
    """What the zygote imports before it forks (its entries, by name) is in every judge and
    sandbox: it must not be the rubric, a test, a band or the reference code."""
    probe = ("import importlib, json, sys; from course.grading.zygote import ENTRIES\n"
             "for m in ENTRIES.values(): importlib.import_module(m)\n"
             "print(json.dumps(sorted(k for k in sys.modules if k.split('.')[0] in "
             "('course', 'tests', 'problem1', 'problem2', 'problem3', 'provided', 'conftest'))))")
    out = subprocess.run([sys.executable, "-c", probe], cwd=REPO_ROOT, capture_output=True,
                         text=True, check=True).stdout
    extra = set(json.loads(out)) - ZYGOTE_MAY_IMPORT
    assert not extra, f"the zygote's entries import {sorted(extra)}: every sandbox would hold them"
