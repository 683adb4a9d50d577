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

from course.grading.pipe import CPU_STOP, NODES, OUTPUT_CHARS, TICKS, boot_ticks
from course.grading.users import entries_of, give, world_writable_folders
from provided.limits import GROUP_TESTS, OVER_GROUP_CPU, OVER_TEST_CPU, WALL_FACTOR


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
    the CPU-seconds each group of tests has taken so far."""
    outcomes: dict = field(default_factory=dict)
    unreached: str = ""  # why tests without an outcome have none
    spent: dict = field(default_factory=dict)  # {group: CPU-seconds}
    cpu: dict = field(default_factory=dict)  # {node: CPU-seconds} of each test that ended


# GROUP_TESTS: a group's tests (a part's public or hidden ones) may take this many tests'
# time limits together, so an endless loop in a part's code costs that part's time;
# WALL_FACTOR: a test that sleeps or waits (none of its threads busy: Reading) ends after
# this many times its CPU limit of such wall-clock time, however busy the machine
POLL_SECONDS = 0.25  # how often a running test's CPU time is read
STOP_GRACE = 5  # after CPU_STOP, the seconds a judge has to fail the test (one in its
# set-up or tear-down, where the judge finishes it first, may be ended with its judge)


# ------------------------------------------------------------------------- CPU time
def _stat(pid: str) -> list[str] | None:
    """/proc/<pid>/stat's fields after the command's name (field 3 first), or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].decode().split()
    except (OSError, IndexError):
        return None


def _cpu(fields: list[str]) -> int:
    """A process's CPU time in ticks, user and system, its own and its reaped children's."""
    return sum(int(n) for n in fields[11:15])


def _busy(pid: str, fields: list[str]) -> bool:
    """Whether a thread of the process runs, waits for a CPU (R) or for the disk (D)."""
    if fields[0] in "RD":
        return True
    if int(fields[17]) < 2:
        return False
    return any((thread := _stat(f"{pid}/task/{task}")) and thread[0] in "RD"
               for task in entries_of(f"/proc/{pid}/task"))


@dataclass(frozen=True)
class Reading:
    """What a test has used so far: CPU-seconds, and whether a thread of it is busy now
    (runs or waits for a CPU or the disk: a test starved by a busy machine is busy)."""
    seconds: float
    busy: bool


@dataclass
class Meter:
    """The CPU time of the test a judge runs, as the kernel counts it: the judge's own
    (pid), and that of every process of the judge's sandbox users (uids) started since the
    test began. A process's time includes its reaped children's (/proc/<pid>/stat's cutime
    and cstime), so a pool's workers count when they exit. Read from /proc, not a cgroup:
    Gradescope's container has none to read. Whether any thread of those is busy tells a
    test that sleeps or waits from one that a busy machine starves."""
    pid: int
    uids: set
    start: float = 0.0  # the test's start, in boot ticks (a process started in its tick counts)
    judge_start: int = 0  # the judge's CPU ticks then

    def begin(self, at: float | None) -> None:
        """A test starts (at: when, in boot ticks, as the judge saw it)."""
        self.start = boot_ticks() if at is None else float(at)
        fields = _stat(str(self.pid))
        self.judge_start = _cpu(fields) if fields else 0

    def read(self) -> Reading:
        """The current test's CPU time so far, and whether it is busy now."""
        fields = _stat(str(self.pid))
        used = (_cpu(fields) - self.judge_start) if fields else 0
        busy = fields is not None and _busy(str(self.pid), fields)
        for pid in os.listdir("/proc"):
            if not pid.isdigit() or pid == str(self.pid) or not self._ours(pid):
                continue
            fields = _stat(pid)
            if fields is None or int(fields[19]) < int(self.start):
                continue
            used += _cpu(fields)
            busy = busy or _busy(pid, fields)
        return Reading(used / TICKS, busy)

    def _ours(self, pid: str) -> bool:
        """Whether the process runs as one of the sandbox users: /proc/PID is its user's,
        or root's when it is not dumpable (as a process that changed its user is), and
        then its status says its real user."""
        try:
            owner = os.stat(f"/proc/{pid}").st_uid
            if owner != 0:
                return owner in self.uids
            with open(f"/proc/{pid}/status") as status:
                line = next(line for line in status if line.startswith("Uid:"))
            return int(line.split()[1]) in self.uids
        except (OSError, StopIteration, ValueError, IndexError):
            return False


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
              groups: dict | None = None, spent: dict | None = None) -> RunResult:
    """Run nodes (pytest node ids, in order) in judges over tree. Each test may use
    test_seconds of CPU time (Meter), and WALL_FACTOR times that of wall-clock time in which
    it is not busy (it sleeps or waits). A test that derails its judge fails, and a fresh
    judge takes the tests after it. The tests of one group (groups: {node: name}, e.g. a
    part's hidden tests) may take GROUP_TESTS * test_seconds of CPU time together: then the
    rest of the group fails, saying so (spent: {group: CPU-seconds}, shared by the judges that run a
    group's tests side by side). At the deadline the tests not done fail with the reason
    too_late. on_outcome(node, passed, output) is called as each outcome arrives."""
    result = RunResult(spent={} if spent is None else spent)
    limits = Limits(test_seconds, WALL_FACTOR * test_seconds, groups or {})
    remaining = list(nodes)
    while remaining:
        if time.monotonic() >= deadline:
            break
        done = _one_judge(tree, remaining, seat, repo, result, limits, deadline, too_late,
                          on_outcome)
        remaining = [n for n in remaining if n not in result.outcomes]
        if done:
            break
    if remaining and time.monotonic() >= deadline:
        result.unreached = too_late
    return result


@dataclass(frozen=True)
class Limits:
    """A test's CPU limit (cpu, CPU-seconds), the wall-clock time it may spend not busy
    (idle, seconds), and the groups its CPU time counts to ({node: group})."""
    cpu: float
    idle: float
    groups: dict

    @property
    def group_cpu(self) -> float:
        return GROUP_TESTS * self.cpu


def _one_judge(tree, nodes, seat, repo, result, limits, deadline, too_late,
               on_outcome) -> bool:
    """One judge over nodes; True when it ended by itself with nothing to retry."""
    own = seat.work / f"judge-{time.monotonic_ns()}"  # its hidden files leave it
    pid, read_fd = _start_judge(tree, own, nodes, seat, repo)
    meter = Meter(pid, {user.uid for user in seat.pool})
    watch = Watch(Current(result, limits, on_outcome), meter, nodes, 4 * limits.cpu)
    try:
        ended = _follow(pid, read_fd, watch, deadline, too_late)
    finally:
        os.close(read_fd)
        end(pid)  # its warden dies with it, and its sandbox with the warden
        shutil.rmtree(own, ignore_errors=True)
    if ended is not None:
        return ended
    if watch.test.node is not None:
        watch.test.finish(False, "the judge stopped during this test (out of memory? a value "
                          "the code under test returned may be far larger than the test "
                          "needs)", nodes)
        return False
    if watch.collect_error:
        result.unreached = ("the tests could not be collected:\n"
                            + watch.collect_error[-OUTPUT_CHARS:])
    elif not result.unreached:
        result.unreached = "the judge stopped before this test ran"
    return True


def _start_judge(tree: Path, own: Path, nodes: list[str], seat: Seat,
                 repo: str) -> tuple[int, int]:
    """Copy tree to own with the nodes to run, give it to the judge's user and have the
    zygote fork the judge; (its pid, the read end of its pipe)."""
    shutil.copytree(tree, own)
    (own / NODES).write_text(json.dumps(nodes))
    give(own, seat.judge, {os.geteuid()})  # the judge's user reads its tree, writes its work
    os.chown(seat.work, seat.judge.uid, seat.judge.gid)
    read_fd, write_fd = os.pipe()
    args = ["-q", "-p", "no:cacheprovider", "--basetemp", str(seat.basetemp), "-o",
            "timeout=0"]  # the grader's clocks end a test (Current), pytest-timeout's none
    try:
        pid = seat.zygote.fork("judge", {
            "tree": str(own), "args": args, "repo": repo,
            "sandbox": {"pool": [[user.uid, user.gid] for user in seat.pool],
                        "judge": [seat.judge.uid, seat.judge.gid],
                        "template": str(seat.template), "work": str(seat.work),
                        "basetemp": str(seat.basetemp),
                        "scratch": world_writable_folders()}}, write_fd)
    except BaseException:
        os.close(read_fd)
        raise
    finally:
        os.close(write_fd)
    return pid, read_fd


@dataclass
class Watch:
    """What the grader follows of a running judge: its current test, that test's meter,
    the nodes it runs, what it said of a collection error, and until when it may go on
    without a test running (limit: a fresh judge has startup seconds to start one)."""
    test: "Current"
    meter: Meter
    nodes: list
    startup: float
    limit: float = 0.0
    collect_error: str = ""

    def __post_init__(self):
        self.limit = time.monotonic() + self.startup

    def check(self, pid: int) -> None:
        """Stop the running test (CPU_STOP) if it is over a limit; the judge then has
        STOP_GRACE seconds to fail it."""
        if self.test.node is not None and self.test.stopping is None and \
                (why := self.test.over(self.meter.read())):
            self.test.stopping = why  # the judge fails the test and goes on to the next
            _signal(pid, CPU_STOP)
            self.limit = time.monotonic() + STOP_GRACE

    def event(self, event: dict) -> bool:
        """One line of the judge's; True when the judge must be replaced (its group is
        over its time)."""
        kind = event.get("event")
        if kind == "collect-error":
            self.collect_error += str(event.get("output", "")) + "\n"
        elif kind == "start" and event.get("node") in self.nodes:
            self.meter.begin(event.get("at"))
            self.test.begin(event["node"])
            self.limit = float("inf")  # the test's own clocks: Current.over
        elif kind == "end" and event.get("node") == self.test.node:
            self.test.over(self.meter.read())
            if self.test.finish(event.get("outcome") == "passed", str(event.get("output")),
                                self.nodes):
                return True  # a fresh judge runs what is left, but that group
            self.limit = time.monotonic() + self.startup  # until the next test starts
        return False


def _follow(pid: int, read_fd: int, watch: Watch, deadline: float,
            too_late: str) -> bool | None:
    """Read the judge's lines until it ends (None: see _one_judge), its group is over its
    time (False), or a limit or the deadline passes (what _one_judge returns then)."""
    result, buffer = watch.test.result, b""
    while True:
        watch.check(pid)
        wait = min(watch.limit, deadline) - time.monotonic()
        if wait <= 0:
            past = time.monotonic() >= deadline
            if past:
                result.unreached = too_late
            if watch.test.node is not None:
                watch.test.stopping = too_late if past else watch.test.stopping
                watch.test.finish(False, "", watch.nodes)
                return past
            if not past and not result.unreached:
                result.unreached = ("not graded: the tests did not start within "
                                    f"{watch.startup:.0f} s")
            return True
        ready, _, _ = select.select([read_fd], [], [], min(wait, POLL_SECONDS))
        if not ready:
            continue
        chunk = os.read(read_fd, 65536)
        if not chunk:
            return None
        *lines, buffer = (buffer + chunk).split(b"\n")
        for line in lines:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if watch.event(event):
                return False


@dataclass
class Current:
    """The test a judge runs now (node), its CPU time so far, and the books of its group."""
    result: RunResult
    limits: Limits
    on_outcome: object
    node: str | None = None
    used: float = 0.0  # CPU seconds, the most read so far
    idle: float = 0.0  # seconds in which no thread of it was busy
    read_at: float = 0.0  # when it was last read
    stopping: str | None = None  # why the grader stopped it

    def begin(self, node: str) -> None:
        self.node, self.used, self.idle, self.read_at = node, 0.0, 0.0, time.monotonic()

    def record(self, node: str, passed: bool, output: str) -> None:
        self.result.outcomes.setdefault(node, (passed, output))
        if self.on_outcome is not None:
            self.on_outcome(node, *self.result.outcomes[node])

    def over(self, reading: Reading) -> str | None:
        """Why the test must end now (over its CPU limit or its group's, or not busy for
        too long), else None."""
        now = time.monotonic()
        self.used = max(self.used, reading.seconds)
        self.idle += 0.0 if reading.busy else now - self.read_at
        self.read_at = now
        group = self.limits.groups.get(self.node)
        if group is not None and \
                self.result.spent.get(group, 0.0) + self.used > self.limits.group_cpu:
            return OVER_GROUP_CPU.format(group=group, seconds=self.limits.group_cpu)
        if self.used > self.limits.cpu:
            return OVER_TEST_CPU.format(seconds=self.limits.cpu)
        if self.idle > self.limits.idle:
            return (f"not graded: this test waited or slept for {self.limits.idle:.0f} s "
                    "(none of its processes running: a lock never released, a queue never "
                    "fed, a worker that never ends?)")
        return None

    def finish(self, passed: bool, output: str, nodes: list[str]) -> bool:
        """The test is over: its CPU time counts to its group, and it fails with the reason
        it was stopped (stopping), if it was; when its group is over its time, the rest of
        the group (of nodes) fails, saying so. Whether the group is over."""
        node, group = self.node, self.limits.groups.get(self.node)
        self.result.cpu[node] = self.used
        over = False
        if group is not None:
            self.result.spent[group] = self.result.spent.get(group, 0.0) + self.used
            over = self.result.spent[group] > self.limits.group_cpu
        self.record(node, passed and self.stopping is None, self.stopping or output)
        for other in nodes if over else []:
            if self.limits.groups.get(other) == group:
                self.record(other, False, OVER_GROUP_CPU.format(
                    group=group, seconds=self.limits.group_cpu))
        self.node, self.stopping = None, None
        return over


def _signal(pid: int, number: int) -> None:
    try:
        os.kill(pid, number)
    except ProcessLookupError:
        pass
