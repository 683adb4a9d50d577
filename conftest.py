"""The grading suite's one rule, checked at collection: every test under tests/ carries
exactly one part marker, p1a .. p3e (registered in pyproject.toml); `pytest -m p1b` runs the
tests of Problem 1, Part B. A test that breaks the rule stops the run with a UsageError that
lists it, so that no test is silently graded twice or not at all.
"""

from pathlib import Path

import pytest

PARTS = frozenset(f"p{problem}{letter}" for problem in (1, 2, 3) for letter in "abcde")
GRADED_FOLDER = "tests/"

@pytest.fixture(autouse=True)
def submission_seam():
    """Every test reaches the code it grades through tests/seam.py, in a session of its own
    (set up before, and closed after, every other fixture of the test)."""
    from tests import seam

    with seam.session():
        yield


def pytest_configure(config):
    """One torch thread per test process. The tests run tiny models, which a second thread
    does not speed up, while on a busy machine (or with the grader's parts run side by side)
    threads that wait for a core make a test many times slower, up to its timeout."""
    import torch

    torch.set_num_threads(1)


def _relative(item, root: Path) -> str | None:
    try:
        return Path(item.path).resolve().relative_to(root).as_posix()
    except ValueError:
        return None


@pytest.hookimpl(tryfirst=True)  # before -m deselects anything: every collected test is checked
def pytest_collection_modifyitems(config, items):
    root = config.rootpath.resolve()
    problems = []
    for item in items:
        path = _relative(item, root)
        if path is None:
            continue
        parts = sorted({mark.name for mark in item.iter_markers()} & PARTS)
        if path.startswith(GRADED_FOLDER) and len(parts) != 1:
            problems.append(f"{item.nodeid} has {', '.join(parts) or 'no marker'}; a graded "
                            f"test (under {GRADED_FOLDER}) must carry exactly one part marker, "
                            "p1a .. p3e (e.g. pytestmark = pytest.mark.p1b)")
    if problems:
        raise pytest.UsageError(
            "tests without their grading marker (see conftest.py):\n  " + "\n  ".join(problems))
