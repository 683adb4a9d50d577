"""The grading suite's one rule, checked at collection: every test under tests/ carries
exactly one part marker, p1a .. p3e (registered here from tests/parts.py); `pytest -m p1b`
runs the tests of Problem 1, Part B. A test that breaks the rule stops the run with a
UsageError that lists it, so that no test is silently graded twice or not at all.
"""

from pathlib import Path

import pytest

from tests.parts import PARTS

GRADED_FOLDER = "tests/"

@pytest.fixture(autouse=True)
def submission_seam(request):
    """Every test reaches the code it grades through tests/seam.py, in a session of its own
    (set up before, and closed after, every other fixture of the test), on the transport the
    grader's judge plugs in ("seam-transport"), or else in this process (seam.Loopback)."""
    from tests import seam

    judge = request.config.pluginmanager.get_plugin("seam-transport")
    with seam.session(judge.factory if judge is not None else seam.Loopback):
        yield


def pytest_configure(config):
    """The part markers, from tests/parts.py. One torch thread per test process: the tests
    run tiny models, which a second thread does not speed up, while on a busy machine (or
    with the grader's parts run side by side) threads that wait for a core make a test many
    times slower, up to its timeout."""
    for part, (problem, letter, title) in PARTS.items():
        config.addinivalue_line("markers", f"{part}: Problem {problem[-1]} Part {letter}, "
                                           f"{title.lower()}")
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
        parts = sorted({mark.name for mark in item.iter_markers()} & set(PARTS))
        if path.startswith(GRADED_FOLDER) and len(parts) != 1:
            problems.append(f"{item.nodeid} has {', '.join(parts) or 'no marker'}; a graded "
                            f"test (under {GRADED_FOLDER}) must carry exactly one part marker, "
                            "p1a .. p3e (e.g. pytestmark = pytest.mark.p1b)")
    if problems:
        raise pytest.UsageError(
            "tests without their grading marker (see conftest.py):\n  " + "\n  ".join(problems))
    if config.pluginmanager.get_plugin("seam-transport") is None:  # the grader sets its own
        items.sort(key=homework_order)


def homework_order(item) -> int:
    """Where a test runs: in the homework's order of parts (Problem 1 Part A first, as
    tests/parts.py lists them), in collection order within a part, so that `pytest -x`
    stops first in the part at fault (the files sort by name, test_problem2_evaluate.py
    before test_problem2_positional.py). A test without a part marker runs last."""
    order = list(PARTS)
    marks = [mark.name for mark in item.iter_markers() if mark.name in PARTS]
    return order.index(marks[0]) if marks else len(order)
