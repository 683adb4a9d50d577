"""The grader's modules are cut by process (course/grading/__init__.py is the map): each
says in its first lines which process runs it, the imports between them form no circle,
and what the zygote imports (its entries, judge.py and weights.py, and theirs) holds
nothing secret, since every judge, warden and sandbox is forked from it."""

import ast
import json
import subprocess
import sys

import pytest

from provided.common import REPO_ROOT

pytestmark = pytest.mark.kit

GRADING = REPO_ROOT / "course" / "grading"
BY_PROCESS = ("grade", "trusted", "intake", "scoring", "gradescope", "judges", "accounts",
              "users", "zygote", "judge", "warden", "sandbox", "pipe", "weights")
# what a process forked from the zygote may hold of the repository: no rubric, no hidden
# test, no band, no reference code (problemN), no recomputation
ZYGOTE_MAY_IMPORT = {"course", "course.grading", "course.grading.judge",
                     "course.grading.sandbox", "course.grading.users",
                     "course.grading.warden", "course.grading.pipe",
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


# ------------------------------------------------------------------ the process map
MAP = REPO_ROOT / "course" / "README.md"
PROCESSES = {"grader", "zygote", "judge", "warden", "sandbox", "recomputation",
             "weights reader"}
CALL_PATH = ["grader", "judge", "warden", "sandbox"]  # a graded test's call, in order
FORMATS = {"JSON lines on a pipe", "seam frames", "a JSON request with a descriptor",
           "the CPU_STOP signal", "one JSON object on a pipe"}
NUMBERS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}


def process_map() -> dict[str, dict[str, str]]:
    """course/README.md's process map: {process: {column: cell}}."""
    text = MAP.read_text()
    assert "<!-- process map -->" in text, "course/README.md has lost its process map"
    table = text.split("<!-- process map -->")[1].split("<!-- end process map -->")[0]
    rows = [[cell.strip() for cell in line.strip().strip("|").split("|")]
            for line in table.strip().splitlines()]
    header = rows[0]
    return {row[0]: dict(zip(header, row)) for row in rows[2:]}


def talks_to(row: dict) -> dict[str, set[str]]:
    """{process: {formats}} of a row's "talks to, in" cell ("judge: seam frames; ...")."""
    found = {}
    for part in row["talks to, in"].split(";"):
        others, formats = part.split(":", 1)
        for process in others.split(","):
            found[process.strip()] = {f.strip() for f in formats.replace(", and", ",").split(",")}
    return found


def calls_in(name: str, function: str) -> list[str]:
    """The names called in course/grading/<name>.py's function, in order ("os.fork")."""
    tree = ast.parse((GRADING / f"{name}.py").read_text())
    body = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)
                and n.name == function)
    return [ast.unparse(n.func) for n in ast.walk(body) if isinstance(n, ast.Call)]


def test_the_process_map_names_each_process_its_module_and_who_starts_it():
    """Each row's module says in its first lines that it runs in that process; who starts
    each process is what the code does: the grader the zygote, the zygote the judges and
    the weights readers (its ENTRIES), a judge its warden before it drops root and reads a
    test, the warden each test's sandbox."""
    from course.grading.zygote import ENTRIES

    found = process_map()
    assert set(found) == PROCESSES, sorted(found)
    for process, row in found.items():
        doc = ast.get_docstring(ast.parse((GRADING / row["module"]).read_text())) or ""
        opening = " ".join(doc.split("\n\n")[:2]).lower().replace("\n", " ")
        assert "runs" in opening and process in opening, (
            f"course/grading/{row['module']}'s docstring must open by saying it runs in "
            f"the {process}")
    started = {process: row["started by"].split(",")[0].split()[0]
               for process, row in found.items()}
    assert started["recomputation"] == "grader" and "os.fork" in calls_in("scoring",
                                                                         "recomputed")
    assert {p for p, by in started.items() if by == "zygote"} == {
        "weights reader" if entry == "weights" else entry for entry in ENTRIES}
    assert "Zygote" in calls_in("grade", "setup") and started["zygote"] == "grader"
    in_judge = calls_in("judge", "main")
    assert started["warden"] == "judge" and in_judge.index("Warden") < in_judge.index(
        "drop_root") < in_judge.index("run_judge"), "the warden is forked first"
    assert started["sandbox"] == "warden" and {"os.fork", "sandbox.main"} <= set(
        calls_in("warden", "start"))


def test_the_process_map_says_who_each_process_runs_as():
    from course.grading.accounts import JUDGE_USER, POOL, SANDBOX_USER

    found = process_map()
    assert found["grader"]["runs as"] == found["warden"]["runs as"] == "root"
    assert found["zygote"]["runs as"] == "root"
    assert found["judge"]["runs as"].startswith(JUDGE_USER + ",")
    assert found["weights reader"]["runs as"] == SANDBOX_USER
    sandbox = found["sandbox"]["runs as"]
    assert sandbox.startswith(SANDBOX_USER) and NUMBERS[sandbox.split()[3]] == POOL, sandbox


def test_a_graded_call_crosses_four_processes_in_one_framing():
    """Along a graded test's call (grader, judge, warden, sandbox) each process talks to the
    next; every format the map names is one of three; the warden's messages are the seam's
    own frames (no framing of its own) and the zygote serves the grader alone."""
    found = process_map()
    links = {process: talks_to(row) for process, row in found.items()}
    for one, other in zip(CALL_PATH, CALL_PATH[1:]):
        assert other in links[one] and one in links[other], (one, other)
    assert {f for process in links.values() for fs in process.values() for f in fs} <= FORMATS
    assert links["warden"] == {"judge": {"seam frames"}, "sandbox": {"seam frames"}}
    assert set(links["zygote"]) == {"grader", "recomputation"}
    assert all(process in PROCESSES for talks in links.values() for process in talks), links
    warden = (GRADING / "warden.py").read_text()
    assert "struct.Struct(" not in warden and "struct.pack(" not in warden
    assert {"seam.send", "seam.receive"} <= set(calls_in("warden", "write_message")
                                                 + calls_in("warden", "read_message"))
