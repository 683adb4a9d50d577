"""The grader's side of the judges: start them, read their outcomes, restart one a test
derailed, stop them at the deadline.

Runs in the grader (course/grading/grade.py), one thread per job. A judge is a process the
zygote forks (course/grading/zygote.py, entry "judge"); what runs inside it is
course/grading/judge.py. The grader never imports a submission module: it reads one JSON
line per test start and end from the judge's pipe.
"""

import json
import os
import select
import shutil
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

from course.grading.judge import NODES, OUTPUT_CHARS
from course.grading.users import give
from course.grading.warden import remove_cgroups


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
    """Outcomes of a judge's tests: {node id: (passed, output)}, plus a reason for the rest;
    the seconds each group of tests has taken so far."""
    outcomes: dict = field(default_factory=dict)
    unreached: str = ""  # why tests without an outcome have none
    spent: dict = field(default_factory=dict)  # {group: seconds}


GROUP_TESTS = 3  # a group's tests (a part's public or hidden ones) may take this many
# tests' time limits together: an endless loop in a part's code costs that part's time


@dataclass(frozen=True)
class Seat:
    """Where a judge's tests run: its zygote, its pool of sandbox users (taken in turn, a
    test each), the user the judge itself runs as, the submission's tree (template), its
    work folder and the tests' tmp_path root there (basetemp)."""
    zygote: object
    pool: list
    judge: object
    template: Path
    work: Path
    basetemp: Path


def run_tests(tree: Path, nodes: list[str], seat: Seat, repo: str, test_seconds: float,
              deadline: float, too_late: str, on_outcome=None,
              groups: dict | None = None) -> RunResult:
    """Run nodes (pytest node ids, in order) in judges over tree. A test that derails its
    judge fails, and a fresh judge takes the tests after it. The tests of one group
    (groups: {node: name}, e.g. a part's hidden tests) may take GROUP_TESTS * test_seconds
    together: then the rest of the group fails, saying so. At the deadline the tests not
    done fail with the reason too_late. on_outcome(node, passed, output) is called as each
    outcome arrives."""
    result = RunResult()
    groups = groups or {}
    remaining = list(nodes)
    while remaining:
        if time.monotonic() >= deadline:
            result.unreached = too_late
            break
        done = _one_judge(tree, remaining, seat, repo, result, test_seconds, deadline,
                          too_late, on_outcome, groups)
        remaining = [n for n in remaining if n not in result.outcomes]
        if done:
            break
    return result


def _one_judge(tree, nodes, seat, repo, result, test_seconds, deadline, too_late,
               on_outcome, groups) -> bool:
    """One judge over nodes; True when it ended by itself with nothing to retry."""
    own = seat.work / f"judge-{time.monotonic_ns()}"  # its hidden files leave it
    shutil.copytree(tree, own)
    (own / NODES).write_text(json.dumps(nodes))
    if seat.judge.sealed:  # the judge's user reads its tree and writes its work folder
        give(own, seat.judge, {os.geteuid()})
        os.chown(seat.work, seat.judge.uid, seat.judge.gid)
    read_fd, write_fd = os.pipe()
    args = ["-q", "-p", "no:cacheprovider", "--basetemp", str(seat.basetemp), "-o",
            f"timeout={max(1, int(test_seconds))}"]
    try:
        pid = seat.zygote.fork("judge", {
            "tree": str(own), "args": args, "repo": repo,
            "sandbox": {"pool": [[user.uid, user.gid] for user in seat.pool],
                        "judge": [seat.judge.uid, seat.judge.gid] if seat.judge.sealed
                        else None,
                        "template": str(seat.template), "work": str(seat.work),
                        "basetemp": str(seat.basetemp)}}, write_fd)
    finally:
        os.close(write_fd)
    buffer, current, collect_error, started = b"", None, "", 0.0
    backstop = test_seconds + 15  # pytest-timeout ends a test first; this ends a stuck judge
    group_seconds = GROUP_TESTS * test_seconds
    limit = time.monotonic() + 4 * test_seconds  # collection included
    ended_by_itself = False
    def record(node: str, passed: bool, output: str) -> None:
        result.outcomes.setdefault(node, (passed, output))
        if on_outcome is not None:
            on_outcome(node, *result.outcomes[node])

    def finish(node: str) -> str | None:
        """Count node's time to its group; its group's name once the group is over time."""
        group = groups.get(node)
        if group is None:
            return None
        result.spent[group] = result.spent.get(group, 0.0) + time.monotonic() - started
        return group if result.spent[group] >= group_seconds else None

    def start(node: str) -> float:
        """When the test that starts now must have ended: its own limit or its group's."""
        group = groups.get(node)
        if group is None:
            return time.monotonic() + backstop
        return time.monotonic() + min(backstop, group_seconds - result.spent.get(group, 0.0))

    try:
        while True:
            wait = min(limit, deadline) - time.monotonic()
            if wait <= 0:
                if current is not None and time.monotonic() >= deadline:
                    record(current, False, too_late)
                elif current is not None and (over := finish(current)) is not None:
                    why = (f"not graded: the tests of {over} ran over their time limit of "
                           f"{group_seconds:.0f} s together")
                    for node in [current, *(n for n in nodes if groups.get(n) == over)]:
                        record(node, False, why)
                elif current is not None:
                    record(current, False, f"not graded: this test ran over its time limit of "
                           f"{test_seconds:.0f} s")
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
                    current, started = event["node"], time.monotonic()
                    limit = start(current)
                elif kind == "end" and event.get("node") == current:
                    finish(current)
                    record(current, event.get("outcome") == "passed", str(event.get("output")))
                    current = None
                    limit = time.monotonic() + backstop
    finally:
        os.close(read_fd)
        end(pid)  # its warden dies with it: the sandbox it left is killed here
        remove_cgroups(seat.work)
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
