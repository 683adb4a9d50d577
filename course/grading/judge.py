"""A judge: the pytest process that runs graded tests and reports their outcomes.

A judge is forked from the zygote (course/grading/sandbox.py) at the grader's request, so that it
shares the zygote's libraries with the sandboxes, and runs the graded tests, public and
hidden, in a root-only tree the grader wrote, which holds the tests and the HANDOUT's code:
every solution region there raises NotImplementedError, so a test that called the code under
test directly, and not through tests/seam.py, would fail. Every `submission(...)` call of a
test goes to a sandbox of that test's own (course/grading/sandbox.py), which holds the submission's
code and answers with data only. So the judge never imports a module of the submission,
never runs its code and never unpickles what it returns; the outcome it reports is pytest's,
in a process that the submission cannot reach (another user when sealed, and not dumpable).

The grader reads one JSON line per test start and end from the judge's pipe.
"""

import ctypes
import json
import os
import select
import shutil
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

OUTPUT_CHARS = 2500
MESSAGE_CHARS = 600  # the failing assertion's own message, shown first
MAX_OUTPUT = 4 * OUTPUT_CHARS  # a test's whole output (its setup, call and teardown)
PR_SET_DUMPABLE = 4
HIDDEN_DIR = "course/grading/hidden"
NODES = "nodes.json"  # in a judge's tree: the node ids it runs, in order
# modules of the repository the grader imported itself: a judge imports its tree's instead
REPOSITORY_ROOTS = ("problem1", "problem2", "problem3", "provided", "tests", "conftest",
                    "tiny")


class Reporter:
    """The judge's pytest plugin: one JSON line per test start and end on the grader's
    pipe."""

    def __init__(self, fd: int, forget: Path):
        self.fd, self.forget = fd, forget
        self.failures: list[str] = []

    def pytest_collection_finish(self, session) -> None:
        """The hidden tests are in memory now: their files leave the disk, so that not even
        an unsealed sandbox (the grader's own user) can read them there."""
        for path in self.forget.glob("*.py"):
            path.unlink()

    def send(self, **record) -> None:
        data = (json.dumps(record) + "\n").encode()
        while data:
            data = data[os.write(self.fd, data):]

    def pytest_collectreport(self, report) -> None:
        if report.failed:
            self.send(event="collect-error", output=report.longreprtext[-OUTPUT_CHARS:])

    def pytest_runtest_logstart(self, nodeid, location) -> None:
        self.failures = []
        self.send(event="start", node=nodeid)

    def pytest_runtest_logreport(self, report) -> None:
        if report.skipped:
            self.failures.append("skipped (a graded test never skips)")
        elif report.failed:
            self.failures.append(failure_text(report))

    def pytest_runtest_logfinish(self, nodeid, location) -> None:
        self.send(event="end", node=nodeid, outcome="failed" if self.failures else "passed",
                  output="\n".join(self.failures)[:MAX_OUTPUT])


def failure_text(report) -> str:
    """A failed test's output for the student: the error's own message first (a graded
    test's assertion says what was expected and the likely mistake), then pytest's report,
    cut to its end if long."""
    text = report.longreprtext
    if "Failed: Timeout" in text:  # pytest-timeout's own message
        first = ("this test ran over its time limit (an endless loop, or a far too slow "
                 "implementation?)")
    else:
        first = getattr(getattr(report.longrepr, "reprcrash", None), "message", "") or ""
    first = first[:MESSAGE_CHARS]
    rest = text if len(text) <= OUTPUT_CHARS else "...\n" + text[-OUTPUT_CHARS:]
    return f"{first}\n\n{rest}" if first else rest


def run_judge(tree: Path, args: list[str], fd: int, transport, repo: str) -> None:
    """The judge (forked from the zygote, course/grading/sandbox.py): run pytest on the tests in
    tree, the node ids in tree/NODES after args, each test's seam on a transport of its
    own, outcomes on fd. Never returns."""
    try:
        ctypes.CDLL(None).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)  # no ptrace, no /proc/pid/mem
        null = os.open(os.devnull, os.O_RDWR)
        for target in (0, 1):
            os.dup2(null, target)
        os.chdir(tree)
        for name in [n for n in sys.modules if n.split(".")[0] in REPOSITORY_ROOTS]:
            del sys.modules[name]
        sys.path[:] = [str(tree)] + [p for p in sys.path if p not in ("", ".", repo)]
        sys.argv = ["pytest"]
        nodes = json.loads((tree / NODES).read_text())
        from tests import seam

        seam.TRANSPORT = transport
        import pytest

        pytest.main([*args, *nodes], plugins=[Reporter(fd, tree / HIDDEN_DIR)])
    except BaseException:
        if os.environ.get("GRADE_DEBUG"):
            import traceback

            traceback.print_exc()
    finally:
        os._exit(0)


# ------------------------------------------------------------------------- the grader side
def end(pid: int) -> None:
    """Kill a judge (the zygote's child, reaped by the kernel) and wait until it is gone."""
    for _ in range(500):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            return
        time.sleep(0.01)


@dataclass
class RunResult:
    """Outcomes of a judge's tests: {node id: (passed, output)}, plus a reason for the rest."""
    outcomes: dict = field(default_factory=dict)
    unreached: str = ""  # why tests without an outcome have none


@dataclass(frozen=True)
class Seat:
    """Where a judge's tests run: its zygote, its sandbox user, the submission's tree
    (template), its work folder and the tests' tmp_path root there (basetemp)."""
    zygote: object
    sandbox: object
    template: Path
    work: Path
    basetemp: Path


def run_tests(tree: Path, nodes: list[str], seat: Seat, repo: str, test_seconds: float,
              deadline: float, too_late: str, on_outcome=None) -> RunResult:
    """Run nodes (pytest node ids, in order) in judges over tree. A test that derails its
    judge fails, and a fresh judge takes the tests after it. At the deadline the tests not
    done fail with the reason too_late. on_outcome(node, passed, output) is called as each
    outcome arrives."""
    result = RunResult()
    remaining = list(nodes)
    while remaining:
        if time.monotonic() >= deadline:
            result.unreached = too_late
            break
        done = _one_judge(tree, remaining, seat, repo, result, test_seconds, deadline,
                          too_late, on_outcome)
        remaining = [n for n in remaining if n not in result.outcomes]
        if done:
            break
    return result


def _one_judge(tree, nodes, seat, repo, result, test_seconds, deadline, too_late,
               on_outcome) -> bool:
    """One judge over nodes; True when it ended by itself with nothing to retry."""
    own = seat.work / f"judge-{time.monotonic_ns()}"  # its hidden files leave it
    shutil.copytree(tree, own)
    (own / NODES).write_text(json.dumps(nodes))
    read_fd, write_fd = os.pipe()
    args = ["-q", "-p", "no:cacheprovider", "--basetemp", str(seat.basetemp), "-o",
            f"timeout={max(1, int(test_seconds))}"]
    try:
        pid = seat.zygote.spawn_judge(write_fd, own, args, repo, seat.sandbox, seat.template,
                                      seat.work, seat.basetemp)
    finally:
        os.close(write_fd)
    buffer, current, collect_error = b"", None, ""
    backstop = test_seconds + 15  # pytest-timeout ends a test first; this ends a stuck judge
    limit = time.monotonic() + 4 * test_seconds  # collection included
    ended_by_itself = False
    def record(node: str, passed: bool, output: str) -> None:
        result.outcomes.setdefault(node, (passed, output))
        if on_outcome is not None:
            on_outcome(node, *result.outcomes[node])

    try:
        while True:
            wait = min(limit, deadline) - time.monotonic()
            if wait <= 0:
                if current is not None:
                    record(current, False, f"not graded: this test ran over its time limit of "
                           f"{test_seconds:.0f} s" if time.monotonic() < deadline else too_late)
                elif not result.unreached:
                    result.unreached = ("not graded: the tests did not start within "
                                        f"{4 * test_seconds:.0f} s" if time.monotonic() < deadline
                                        else too_late)
                return time.monotonic() >= deadline or current is None
            ready, _, _ = select.select([read_fd], [], [], wait)
            if not ready:
                continue
            chunk = os.read(read_fd, 65536)
            if not chunk:
                ended_by_itself = True
                break
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                kind = event.get("event")
                if kind == "collect-error":
                    collect_error += str(event.get("output", "")) + "\n"
                elif kind == "start" and event.get("node") in nodes:
                    current = event["node"]
                    limit = time.monotonic() + backstop
                elif kind == "end" and event.get("node") == current:
                    record(current, event.get("outcome") == "passed", str(event.get("output")))
                    current = None
                    limit = time.monotonic() + backstop
    finally:
        os.close(read_fd)
        end(pid)
        shutil.rmtree(own, ignore_errors=True)
    if current is not None:
        record(current, False, "the judge stopped during this test (please tell the course "
                               "staff)")
        return False
    if collect_error:
        result.unreached = "the tests could not be collected:\n" + collect_error[-OUTPUT_CHARS:]
    elif not result.unreached:
        result.unreached = "the judge stopped before this test ran"
    return ended_by_itself
