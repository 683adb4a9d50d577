"""The grading suite's one rule, checked at collection: every test under tests/ carries
exactly one part marker, p1a .. p3e (registered here from tests/parts.py); `pytest -m p1b`
runs the tests of Problem 1, Part B. A test that breaks the rule stops the run with a
UsageError that lists it, so that no test is silently graded twice or not at all.

In a local run the tests go in the homework's order, a function's own tests before the tests
that rely on it (tests/parts.py's RELIES_ON), and a failure that may follow from a function
whose own tests failed says so first (pytest_runtest_makereport): messages only, never an
outcome, and off in the grader, which keeps every test's own message.
"""

from pathlib import Path

import pytest

from tests.parts import PARTS, RELIES_ON

GRADED_FOLDER = "tests/"
FAILED_TESTS = pytest.StashKey[dict]()  # {test file: {failed test's name: its part}}

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
        levels = reliance_levels(items, root)
        items.sort(key=lambda item: (homework_order(item), levels[item]))


def homework_order(item) -> int:
    """Where a test runs: in the homework's order of parts (Problem 1 Part A first, as
    tests/parts.py lists them), in collection order within a part, so that `pytest -x`
    stops first in the part at fault (the files sort by name, test_problem2_evaluate.py
    before test_problem2_positional.py). A test without a part marker runs last. Within a
    part, a test that relies on another function (tests/parts.py's RELIES_ON) runs after
    that function's own tests (reliance_levels)."""
    order = list(PARTS)
    marks = [mark.name for mark in item.iter_markers() if mark.name in PARTS]
    return order.index(marks[0]) if marks else len(order)


def reliances(path: str | None, name: str) -> list[tuple[str, tuple]]:
    """(function, its own tests' name prefixes) of what test `name` of file `path` relies on
    (tests/parts.py's RELIES_ON)."""
    return [(function, own) for relying, function, own in RELIES_ON.get(path, [])
            if name.startswith(relying)]


def reliance_levels(items, root: Path) -> dict:
    """{item: 0 for a test that relies on no other function, else 1 + the highest level of
    the own tests of what it relies on}: the order within a part that runs a function's
    own tests first."""
    paths = {item: _relative(item, root) for item in items}
    levels = dict.fromkeys(items, 0)
    rows = sum(len(rows) for rows in RELIES_ON.values())
    for _ in range(rows + 1):  # a longest chain has at most one level per row
        changed = False
        for item in items:
            relied = [other for _, own in reliances(paths[item], item.name) for other in items
                      if other is not item and paths[other] == paths[item]
                      and other.name.startswith(own)]
            level = 1 + max(levels[other] for other in relied) if relied else 0
            if level != levels[item] and level <= rows + 1:
                levels[item], changed = level, True
        if not changed:
            break
    return levels


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """Downstream tests know their upstream: when a test fails after the own tests of a
    function it relies on failed (tests/parts.py's RELIES_ON; they run first), its message
    starts with one line that names that function and its failing tests, to be fixed first.
    Only a message changes, never an outcome. Off in the grader (its "seam-transport"
    plugin): there a part's tests are spread over judges side by side, so a test's upstream
    often ran in another process, and the hint would depend on the number of judges; the
    grader reports each test's own message (whose hints, e.g. Part B's FIX_SDPA_FIRST, probe
    the upstream function themselves)."""
    report = yield
    config = item.config
    if not report.failed or config.pluginmanager.get_plugin("seam-transport") is not None:
        return report
    path = _relative(item, config.rootpath.resolve())
    failed = config.stash.setdefault(FAILED_TESTS, {})
    hint = upstream_hint(path, item.name, failed.get(path, {}))
    marks = [mark.name for mark in item.iter_markers() if mark.name in PARTS]
    failed.setdefault(path, {})[item.name] = marks[0] if marks else None
    if hint:
        add_hint(report, hint)
    return report


def upstream_hint(path: str | None, name: str, failed: dict) -> str:
    """One line per function that test `name` relies on whose own tests failed (failed:
    {test name: part} of its file so far), or ''."""
    lines = []
    for function, own in reliances(path, name):
        names = [test for test in failed if test != name and test.startswith(own)]
        if not names:
            continue
        part = failed[names[0]]
        where = f"Part {PARTS[part][1]}'s " if part in PARTS else ""
        shown = ", ".join(names[:2]) + (f" and {len(names) - 2} more" if len(names) > 2 else "")
        lines.append(f"{where}{function} fails its own tests ({shown}): fix it first; this "
                     "failure may follow from it.")
    return "\n".join(lines)


def add_hint(report, hint: str) -> None:
    """hint first in the report's one-line message (pytest's short summary) and, under a
    heading of its own, after the traceback."""
    longrepr = report.longrepr
    crash = getattr(longrepr, "reprcrash", None)
    if crash is not None:
        crash.message = f"{hint}\n{crash.message}"
    if hasattr(longrepr, "addsection"):
        longrepr.addsection("fix upstream first", hint)
    elif isinstance(longrepr, str):
        report.longrepr = f"{hint}\n{longrepr}"
