"""The grader's limits on the public tests that `python -m provided.submission --check` runs.

Students: given; --check loads it into pytest (-p provided.check_limits); you need not read it.

A pytest plugin that applies what the grader applies to a graded test and needs no
privilege (provided/limits.py): its resource limits (file size, open files, address space,
and MAX_PROCESSES more processes and threads than this user runs already), its syscall
policy (no network socket, no ptrace, ...: where pyseccomp and the kernel allow it) and its
time limits: a test over TEST_CPU_S seconds of CPU time (user and system: its process's,
every thread's, and its reaped child processes') fails with the grader's words, and so does
every test of a part once the part's tests have taken GROUP_TESTS times that together.
(--check also sets the grader's environment, and pytest-timeout's wall-clock backstop.) Not
applied here: what needs root (another user) and the grader's Landlock scope,
which knows the grader's folders: there your code reads only its own folder, the Python
environment and the system's files, and writes only its folder, TMPDIR and the test's
tmp_path.
"""

import os
import signal
import sys
import time

import pytest

from provided import limits
from provided.limits import resource  # None on Windows

CPU_TIMER = hasattr(signal, "setitimer")  # ITIMER_PROF: this process's CPU time, every thread's


def cpu_seconds() -> float:
    """CPU time so far, user and system: this process's (every thread's) and its reaped
    children's (this process's alone on Windows)."""
    if resource is None:
        return time.process_time()
    own, children = (resource.getrusage(who) for who in (resource.RUSAGE_SELF,
                                                         resource.RUSAGE_CHILDREN))
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def tasks_of_this_user() -> int:
    """The processes and threads this user runs now (/proc; 0 where there is none)."""
    uid, count = os.getuid(), 0
    for pid in os.listdir("/proc") if os.path.isdir("/proc") else []:
        try:
            if pid.isdigit() and os.stat(f"/proc/{pid}").st_uid == uid:
                count += len(os.listdir(f"/proc/{pid}/task"))
        except OSError:
            pass
    return count


def pytest_configure(config) -> None:
    """Apply the limits and the policy to this process, before any test module is
    imported; one line saying what cannot be applied here, if anything."""
    missing = [] if limits.limit_resources() else ["resource limits (Windows)"]
    if sys.platform.startswith("linux"):
        limits.limit(resource.RLIMIT_NPROC, tasks_of_this_user() + limits.MAX_PROCESSES)
    else:
        missing.append("process limit (not Linux)")
    if not CPU_TIMER:
        missing.append("CPU timer (a test over its CPU time limit fails at its end instead)")
    if not limits.install(unix_sockets=True):
        missing.append("syscall policy (" + ("pyseccomp or libseccomp is missing"
                                             if sys.platform.startswith("linux")
                                             else "not Linux") + ")")
    if missing:
        print(f"note: --check cannot apply the grader's {' and '.join(missing)} here: a test "
              "that fails in the grader because of it passes here", file=sys.stderr, flush=True)
    config.pluginmanager.register(TimeLimits(), "check-time-limits")


class TimeLimits:
    """Each test's CPU time limit and its part's (the group of the part's public tests):
    a test is stopped when its process's own CPU time reaches what is left (a SIGPROF
    timer), and fails at the end of its call if it, with its children, went over."""

    def __init__(self):
        self.spent: dict[str, float] = {}  # {group: CPU-seconds of its tests that ended}
        self.start, self.group = 0.0, None

    @staticmethod
    def group_of(item) -> str | None:
        from tests.parts import PARTS

        parts = [mark.name for mark in item.iter_markers() if mark.name in PARTS]
        return f"part {parts[0]} (public)" if parts else None

    def left(self) -> tuple[float, str]:
        """(CPU-seconds the current test may still take, what it says when it is over)."""
        test = (limits.TEST_CPU_S, limits.OVER_TEST_CPU.format(seconds=limits.TEST_CPU_S))
        if self.group is None:
            return test
        whole = limits.GROUP_TESTS * limits.TEST_CPU_S
        group = (whole - self.spent.get(self.group, 0.0),
                 limits.OVER_GROUP_CPU.format(group=self.group, seconds=whole))
        return min(test, group)

    def over(self, signum, frame) -> None:
        pytest.fail(self.left()[1], pytrace=False)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item) -> None:
        self.group, self.start = self.group_of(item), cpu_seconds()
        seconds, _ = self.left()
        if CPU_TIMER:
            signal.signal(signal.SIGPROF, self.over)
            signal.setitimer(signal.ITIMER_PROF, max(seconds, 0.001))

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        if call.when != "call":
            return
        report = outcome.get_result()
        seconds, why = self.left()
        if report.passed and cpu_seconds() - self.start > seconds:
            report.outcome, report.longrepr = "failed", why

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_teardown(self, item) -> None:
        if CPU_TIMER:
            signal.setitimer(signal.ITIMER_PROF, 0)
        if self.group is not None:
            self.spent[self.group] = (self.spent.get(self.group, 0.0)
                                      + cpu_seconds() - self.start)
