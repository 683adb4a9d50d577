"""The grading suite's one rule, checked at collection: every test under tests/ carries
exactly one part marker, p1a .. p3e (registered in pyproject.toml); `pytest -m p1b` runs the
tests of Problem 1, Part B. A test that breaks the rule stops the run with a UsageError that
lists it, so that no test is silently graded twice or not at all.
"""
# BEGIN INSTRUCTORS
# The same rule holds for the hidden graded tests under grading/hidden/; the kit's own tests
# under grading/kit/ carry the marker `kit` instead (the part markers: grading/rubric.py).
# END INSTRUCTORS

from pathlib import Path

import pytest

PARTS = frozenset(f"p{problem}{letter}" for problem in (1, 2, 3) for letter in "abcde")
KIT = "kit"
GRADED_FOLDERS = ("tests/",)
KIT_FOLDER = None
# BEGIN INSTRUCTORS
GRADED_FOLDERS = ("tests/", "grading/hidden/")
KIT_FOLDER = "grading/kit/"
# END INSTRUCTORS


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
        names = {mark.name for mark in item.iter_markers()}
        parts = sorted(names & PARTS)
        found = ", ".join(parts + ([KIT] if KIT in names else [])) or "no marker"
        if KIT_FOLDER and path.startswith(KIT_FOLDER):
            if KIT not in names or parts:
                problems.append(f"{item.nodeid} has {found}; a test under {KIT_FOLDER} must "
                                "carry the marker 'kit' and no part marker")
        elif path.startswith(GRADED_FOLDERS):
            if len(parts) != 1 or KIT in names:
                problems.append(f"{item.nodeid} has {found}; a graded test (under "
                                f"{' or '.join(GRADED_FOLDERS)}) must carry exactly one part "
                                "marker, p1a .. p3e (e.g. pytestmark = pytest.mark.p1b)")
    if problems:
        raise pytest.UsageError(
            "tests without their grading marker (see conftest.py):\n  " + "\n  ".join(problems))
