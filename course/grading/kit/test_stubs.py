"""No points for a non-solution: the handout with every solution region a stub
(course/grading/stubs.py) that raises, returns None, returns zeros or returns its own input
passes no graded test, public or hidden, of any of the 15 parts.

All seven kinds run in one tree and one pytest process (kind 'any': each stub reads its
kind at each call, and the tree's plugin stub_plugin.py runs every test once per kind), and
without tracebacks (--tb=no: formatting 1,500 failures would be most of the time): about
15 CPU-seconds, 24-33 s measured on 2 cores with a load of 5 beside it."""

import json
import os
import shutil
import subprocess
import sys

import pytest
import torch

from course.grading.stubs import ANY, STUBS, make_stubbed_handout, stub_solutions
from provided.common import REPO_ROOT

pytestmark = [pytest.mark.kit, pytest.mark.timeout(600)]

SOURCE = '''import torch


def f(n, x, y=None):
    """Doc."""
    # BEGIN SOLUTION
    return x + n
    # END SOLUTION


class A:
    def __init__(self, a):
        self.b = 2
        # BEGIN SOLUTION
        self.a = a
        # END SOLUTION

    def size(self):
        # BEGIN SOLUTION
        return 3
        # END SOLUTION
'''
RAISED = {"raises": ValueError, "raises_type_error": TypeError,
          "raises_runtime_error": RuntimeError, "raises_file_not_found": FileNotFoundError}


def stubbed(kind: str, keep=()) -> dict:
    namespace = {}
    exec(compile(stub_solutions(SOURCE, kind, keep=keep), "stubbed", "exec"), namespace)
    return namespace


def test_the_kinds_are_the_non_solutions_of_the_issue():
    assert set(STUBS) == {*RAISED, "returns_none", "returns_zeros", "returns_input"}


@pytest.mark.parametrize("kind", sorted(RAISED))
def test_a_raising_stub_raises_for_every_input(kind):
    space = stubbed(kind)
    for args in [(1, 2), (0, torch.ones(3)), ("a", None)]:
        with pytest.raises(RAISED[kind]):
            space["f"](*args)
    with pytest.raises(RAISED[kind]):
        space["A"](1)


def test_the_returning_stubs():
    x = torch.arange(3.0)
    none, zeros, same = stubbed("returns_none"), stubbed("returns_zeros"), stubbed("returns_input")
    assert none["f"](2, x) is None and none["A"](1).size() is None
    assert torch.equal(zeros["f"](2, x), torch.zeros(3)) and zeros["f"](2, 5) == 0
    assert zeros["A"](1).size() == 0
    assert same["f"](2, x) == 2 and same["A"](1).size() is None
    for space in (none, zeros, same):  # __init__ returns None: the object constructs
        made = space["A"](1)
        assert made.b == 2 and not hasattr(made, "a")


def test_a_kept_region_keeps_its_body_and_loses_its_markers():
    text = stub_solutions(SOURCE, "raises", keep={"A.__init__"})
    assert "SOLUTION" not in text and "        self.a = a\n" in text
    space = stubbed("raises", keep={"A.__init__", "A.size"})
    assert space["A"](1).a == 1 and space["A"](1).size() == 3
    with pytest.raises(ValueError):
        space["f"](1, 2)


def test_an_any_stub_takes_its_kind_at_each_call(monkeypatch):
    space = stubbed(ANY)
    for kind, raised in RAISED.items():
        monkeypatch.setenv("STUB_KIND", kind)
        with pytest.raises(raised):
            space["f"](1, 2)
    monkeypatch.setenv("STUB_KIND", "returns_input")
    assert space["f"](5, 2) == 5 and space["A"](1).b == 2
    monkeypatch.setenv("STUB_KIND", "returns_zeros")
    assert torch.equal(space["f"](1, torch.ones(2)), torch.zeros(2))
    monkeypatch.delenv("STUB_KIND")
    with pytest.raises(RuntimeError, match="names no stub"):
        space["f"](1, 2)


def test_no_graded_test_passes_on_a_stub(tmp_path):
    tree, report = tmp_path / "stubbed", tmp_path / "outcomes.json"
    assert make_stubbed_handout(tree, ANY) >= 30
    shutil.copytree(REPO_ROOT / "course" / "grading" / "hidden",
                    tree / "course" / "grading" / "hidden",
                    ignore=shutil.ignore_patterns("__pycache__"))
    env = {**os.environ, "PYTHONPATH": str(tree), "OMP_NUM_THREADS": "1",
           "STUB_KINDS": ",".join(STUBS), "STUB_REPORT": str(report)}
    ran = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "-p", "stub_plugin", "--tb=no", "tests", "course/grading/hidden"],
                         cwd=tree, capture_output=True, text=True, env=env, timeout=500)
    tail = ran.stdout[-1500:] + ran.stderr[-1500:]
    assert ran.returncode == 1 and report.exists(), tail  # 1: tests failed, nothing else
    results = json.loads(report.read_text())
    counts = {kind: len(tests) for kind, tests in results.items()}
    assert set(results) == set(STUBS), tail
    assert min(counts.values()) > 200 and len(set(counts.values())) == 1, (counts, tail)
    earned = {kind: sorted(test for test, outcome in tests.items() if outcome != "failed")
              for kind, tests in results.items()}
    earned = {kind: tests for kind, tests in earned.items() if tests}
    assert not earned, (
        "these graded tests do not fail on a stub (a body that does nothing), so they grant "
        "points for nothing: a test that checks an error must also check, in the same test, "
        "that valid input gives the right value, and a test of a type or a shape a value "
        f"too. {{stub kind: [test]}}: {earned}")
