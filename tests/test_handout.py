"""The student handout: solution regions removed, everything still imports, tests fail."""

import subprocess
import sys

import pytest

from provided.handout import make_handout, strip_solutions

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


def test_handout_imports_and_its_tests_fail_rather_than_crash(tmp_path):
    removed = make_handout(tmp_path)
    assert removed >= 30
    assert not (tmp_path / "problem1" / "REPORT.md").exists()
    assert not list(tmp_path.glob("problem*/results/*"))
    for path in tmp_path.glob("problem*/*.py"):
        assert "BEGIN SOLUTION" not in path.read_text()

    def pytest_in_handout(*args):
        return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                               *args], cwd=tmp_path, capture_output=True, text=True)

    collected = pytest_in_handout("--collect-only")
    assert collected.returncode == 0, collected.stdout[-2000:]  # every test file imports
    for test in ["tests/test_problem1_attention.py", "tests/test_problem2_positional.py",
                 "tests/test_problem3.py::test_causal_mask"]:
        failed = pytest_in_handout("-x", test)
        assert failed.returncode == 1, failed.stdout[-2000:]  # 1: tests failed, not errors
