"""What grading trusts, read once by the grader before any submission: the kit.

Runs in the grader (course/grading/grade.py), after the zygote has started
(course/grading/zygote.py), so that no judge or sandbox is forked from a process that holds
any of it: the repository's code and public tests, the handout's code (every solution region
stripped, once), the hidden tests, the reference bands, and each part's tests collected by
marker.
"""

import functools
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from course.grading import rubric as RUBRIC
from course.grading.accounts import make_tree
from course.grading.paths import HIDDEN_DIR
from provided.common import REPO_ROOT
from provided.given import strip_solutions

# the repository files a run tree holds (besides its tests): code, fixtures, configuration
TREE_FILES = ("conftest.py", "pyproject.toml", "provided/**/*.py", "problem*/*.py",
              "problem1/position_table.pt", "tests/*.py", "tests/fixtures/*")


@dataclass(frozen=True)
class Kit:
    """What grading trusts, read after the zygote has started (course/grading/zygote.py)."""
    files: dict  # relative path -> bytes: reference code, public tests, fixtures, configuration
    hidden: dict  # part -> {relative path: bytes}
    bands: dict  # problem -> reference_bands.json
    tests: dict  # part -> {"visible": [node ids], "hidden": [node ids]}

    @functools.cached_property
    def handout(self) -> dict:
        """{path: bytes} of the handout's code: every solution region raises
        NotImplementedError (stripped once, at the first use)."""
        return {name: strip_solutions(self.files[name].decode(), name).encode()
                for name in RUBRIC.REGIONS}

    def judge_files(self, parts: list[str]) -> dict:
        """The judges' tree: the tests, public and hidden, over the handout's code."""
        hidden = {name: data for part in parts for name, data in self.hidden[part].items()}
        return {**self.files, **self.handout, **hidden}

    def sandbox_files(self) -> dict:
        """What every sandbox tree holds besides the submission's code: the handout's code,
        provided/, the public test helpers and fixtures; no test, no reference solution."""
        return {**{name: data for name, data in self.files.items()
                   if not is_test_file(name)}, **self.handout}


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
