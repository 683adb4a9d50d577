"""Plant one edited solution file in a scratch copy of the repository and run its part's
graded tests there, public and hidden, in one local pytest: the student's own view (the
messages of a local run, the upstream hints of tests/parts.py's RELIES_ON included).

Used by course/tools/fresh_mistakes.py --local and course/tools/mutation.py. Instructors
only. The scratch copy holds the problem folders (without results/), tests/, provided/, the
course's Python files and the root's configuration; data/ is a link to the repository's. A
planted file is written, tested and put back, so one copy serves every plant in turn.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from contextlib import contextmanager
from pathlib import Path

from provided.common import REPO_ROOT

HIDDEN = "course/grading/hidden"
ROOT_FILES = ("conftest.py", "pyproject.toml")


def _ignore(folder: str, names: list[str]) -> set[str]:
    skip = {"results", "__pycache__", "reports", "tables"}
    return {n for n in names if n in skip or n.endswith((".pth", ".png"))}


@contextmanager
def scratch_copy():
    """A scratch copy of what the graded tests need, deleted afterwards."""
    with tempfile.TemporaryDirectory(prefix="plant_") as scratch:
        root = Path(scratch) / "repo"
        root.mkdir()
        for name in ("problem1", "problem2", "problem3", "tests", "provided", "course"):
            shutil.copytree(REPO_ROOT / name, root / name, ignore=_ignore)
        for name in ROOT_FILES:
            shutil.copy2(REPO_ROOT / name, root / name)
        (root / "data").symlink_to(REPO_ROOT / "data")
        yield root


def part_tests(root: Path, part: str) -> list[str]:
    """The part's graded test files: the public files that hold a test of the part (the -m
    marker then picks its tests) and its hidden file."""
    public = sorted(path.relative_to(root).as_posix() for path in (root / "tests").glob("test_*.py")
                    if re.search(rf"\bmark\.{part}\b", path.read_text()))
    return [*public, f"{HIDDEN}/test_hidden_{part}.py"]


def _forked_pytest(root: Path, args: list[str], timeout: float) -> str | None:
    """pytest.main(args) in a child forked from this process, which has imported torch
    already (a fresh interpreter spends about 1.5 s of CPU on that import): the child drops
    every module of the repository first, so the tests import root's files. Returns None,
    or what went wrong (an exit status beyond 1, a timeout)."""
    import pytest  # noqa: F401 (imported once, in the parent)

    pid = os.fork()
    if pid == 0:  # the child
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 1)
            os.dup2(devnull, 2)
            os.chdir(root)
            for name in list(sys.modules):
                top = name.split(".")[0]
                if top in ("tests", "course", "provided", "conftest") or top.startswith("problem"):
                    del sys.modules[name]
            sys.path.insert(0, str(root))
            import pytest as child_pytest

            os._exit(int(child_pytest.main(args)))
        finally:
            os._exit(70)
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            code = os.waitstatus_to_exitcode(status)
            return None if code in (0, 1) else f"pytest ended with status {code}"
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            return f"timed out after {timeout} s"
        time.sleep(0.02)


def run_part(root: Path, part: str, first_failure: bool = False, timeout: float = 600,
             fork: bool = False) -> dict:
    """Run part's graded tests in root: {'failed': [{'name', 'visibility', 'message'}],
    'passed': int, 'seconds': CPU seconds of the run (its children's), 'error': text or
    None}. first_failure stops at the first failing test (pytest -x); fork runs pytest in a
    forked child of this process (_forked_pytest) instead of a new interpreter."""
    report = root / ".plant_junit.xml"
    report.unlink(missing_ok=True)
    args = ["-q", "-p", "no:cacheprovider", "-m", part, "--junitxml", str(report),
            "-o", "junit_family=xunit1", *(["-x"] if first_failure else []),
            *part_tests(root, part)]
    before = os.times()
    if fork:
        error = _forked_pytest(root, args, timeout)
    else:
        env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "OMP_NUM_THREADS": "1"}
        try:
            done = subprocess.run([sys.executable, "-m", "pytest", *args], cwd=root, env=env,
                                  capture_output=True, text=True, timeout=timeout)
            error = (None if done.returncode in (0, 1)
                     else done.stdout[-2000:] + done.stderr[-2000:])
        except subprocess.TimeoutExpired:
            error = f"timed out after {timeout} s"
    after = os.times()
    seconds = (after.children_user - before.children_user
               + after.children_system - before.children_system)
    failed, passed = [], 0
    if report.exists():
        for case in ET.parse(report).getroot().iter("testcase"):
            problem = case.find("failure")
            if problem is None:
                problem = case.find("error")
            if problem is None:
                passed += case.find("skipped") is None
                continue
            hidden = HIDDEN.replace("/", ".") in case.get("classname", "")
            failed.append({"name": case.get("name"),
                           "visibility": "hidden" if hidden else "visible",
                           "message": problem.get("message") or (problem.text or "")})
    elif error is None:
        error = "no test report"
    return {"failed": failed, "passed": passed, "seconds": seconds, "error": error}


@contextmanager
def planted(root: Path, relative: str, text: str):
    """root/relative holds text for the with-block, then its old text again."""
    path = root / relative
    old = path.read_text()
    path.write_text(text)
    try:
        yield path
    finally:
        path.write_text(old)
        os.utime(path, (time.time(), time.time()))
