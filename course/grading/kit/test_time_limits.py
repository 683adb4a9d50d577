"""A test's time as the grader counts it (course/grading/judges.py, Meter): the CPU time of
the judge and of the sandbox's processes since the test began, their reaped workers
included, and nothing else the machine runs; a sleeping sandbox costs none of it.

Each case forks a stand-in sandbox running as a sandbox user (root only, as the grader).
The judge is a sleeping process, so its own time is about zero.
"""

import os
import subprocess
import sys
import time

import pytest

from course.grading.accounts import sandbox_pool
from course.grading.judges import Meter

pytestmark = [pytest.mark.kit, pytest.mark.timeout(120)]
ROOT = pytest.mark.skipif(os.geteuid() != 0, reason="sandbox users and the grader need root")

BURN = 0.6  # CPU-seconds a stand-in's worker burns


def burn(seconds: float) -> None:
    """Spin until this process has used seconds of CPU time."""
    until = time.process_time() + seconds
    while time.process_time() < until:
        pass


def as_user(uid: int, action) -> int:
    """A forked process that calls action() as uid, then exits (forked, not executed: a
    sandbox user may not reach this machine's interpreter, as in the grader). Its pid."""
    pid = os.fork()
    if pid == 0:
        try:
            os.setgroups([])
            os.setuid(uid)
            action()
        finally:
            os._exit(0)
    return pid


def stand_in(uid: int, worker: bool) -> int:
    """A forked stand-in sandbox as uid, in a session of its own: it burns BURN CPU-seconds
    itself or in a worker it reaps (worker), then sleeps. Its pid, once it has burned."""
    ready_read, ready_write = os.pipe()

    def sandbox() -> None:
        os.setsid()
        if worker:
            child = os.fork()
            if child == 0:
                burn(BURN)
                os._exit(0)
            os.waitpid(child, 0)
        else:
            burn(BURN)
        os.write(ready_write, b"x")
        time.sleep(60)

    pid = as_user(uid, sandbox)
    os.close(ready_write)
    os.read(ready_read, 1)  # it has burned
    os.close(ready_read)
    return pid


@pytest.fixture
def judge():
    """A sleeping stand-in for the judge: its own time stays about zero."""
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    time.sleep(0.2)  # the interpreter's start is over
    yield process.pid
    process.kill()
    process.wait()


@pytest.fixture(scope="module")
def users() -> list[int]:
    """Two sandbox users' uids (root only)."""
    if os.geteuid() != 0:
        pytest.skip("sandbox users need root")
    return [user.uid for user in sandbox_pool(2)]


def _end(pid: int) -> None:
    os.kill(pid, 9)
    os.waitpid(pid, 0)


@pytest.mark.parametrize("worker", [False, True], ids=["its own time", "a reaped worker's"])
def test_the_meter_counts_the_sandboxs_cpu_time(judge, users, worker):
    meter = Meter(judge, {users[0]})
    meter.begin(None)
    pid = stand_in(users[0], worker)
    try:
        used = meter.read().seconds
        assert BURN * 0.8 <= used <= BURN * 1.5 + 0.2, (
            f"the meter counted {used:.2f} CPU-seconds of a sandbox that used {BURN}"
            + (" in a worker it reaped (cutime)" if worker else ""))
        time.sleep(0.5)
        assert meter.read().seconds - used < 0.05, "a sleeping sandbox still costs CPU time"
    finally:
        _end(pid)


def test_the_meter_ignores_what_else_runs(judge, users):
    """A busy process outside the sandbox, and a sandbox process started before the test
    began, cost the test nothing."""
    before = stand_in(users[0], worker=False)
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        meter = Meter(judge, {users[0]})
        time.sleep(0.05)
        meter.begin(None)
        time.sleep(0.8)
        used = meter.read().seconds
        assert used < 0.1, (f"the meter counted {used:.2f} CPU-seconds of processes that "
                            "are not the test's")
    finally:
        busy.kill()
        busy.wait()
        _end(before)


SPIN = "import os, sys\nos.sched_setaffinity(0, {min(os.sched_getaffinity(0))})\nwhile True: pass"
SPINNERS = {
    "a process that spins": (SPIN, 0),
    "a thread that spins while the main thread waits for it": (
        "import threading\nt = threading.Thread(target=lambda: [0 for _ in iter(int, 1)])\n"
        "t.start(); t.join()", 0),
    "a process starved by four others outside it on its CPU": (SPIN, 4),
}


@pytest.mark.parametrize("code, others", list(SPINNERS.values()), ids=list(SPINNERS))
def test_a_running_or_starved_sandbox_is_busy_and_a_sleeping_one_is_not(judge, users, code,
                                                                         others):
    """What tells a test that sleeps (ended after its idle time) from one a busy machine
    starves (never ended for it): a thread of it running or waiting for a CPU. A sandbox
    user's sleeping process, then another's spinning one (the others spin as root)."""
    sandboxes = [as_user(users[0], lambda: time.sleep(60)),
                 as_user(users[1], lambda: exec(code, {}))]
    others = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(others)]
    try:
        time.sleep(1.0)
        assert not Meter(judge, {users[0]}).read().busy, "a sandbox that sleeps reads as busy"
        assert all(Meter(judge, set(users)).read().busy for _ in range(5)), (
            "a spinning sandbox reads as idle")
    finally:
        for pid in sandboxes:
            _end(pid)
        for each in others:
            each.kill()
            each.wait()


def test_the_readme_and_the_guide_state_the_limits():
    """The student README's and INSTRUCTORS.md's numbers are the grader's."""
    from course.grading.grade import RESULTS_SHARE, TEST_CPU_S
    from course.grading.judges import GROUP_TESTS, POLL_SECONDS, WALL_FACTOR
    from provided.common import REPO_ROOT

    readme = " ".join((REPO_ROOT / "README.md").read_text().split())
    guide = " ".join((REPO_ROOT / "course" / "INSTRUCTORS.md").read_text().split())
    words = {number: word for number, word in zip(range(2, 6), ("two", "three", "four",
                                                                "five"))}
    for stated in (f"time limit on the course's grader: {TEST_CPU_S} CPU-seconds",
                   f"ends after {words[WALL_FACTOR]} times that ({WALL_FACTOR * TEST_CPU_S} s) "
                   "of such time",
                   f"{words[GROUP_TESTS]} times the limit ({GROUP_TESTS * TEST_CPU_S} "
                   "CPU-seconds)"):
        assert stated in readme, f"README.md should say: {stated}"
    for stated in (f"(default {TEST_CPU_S} CPU-seconds:", f"every {POLL_SECONDS} s",
                   f"ends after {words[WALL_FACTOR]} times that ({WALL_FACTOR * TEST_CPU_S} s) "
                   "of wall-clock time in which no thread of it runs",
                   f"{words[GROUP_TESTS]} times the limit",
                   f"a {'third' if RESULTS_SHARE == 1 / 3 else RESULTS_SHARE} of the grading's "
                   "time left"):
        assert stated in guide, f"INSTRUCTORS.md should say: {stated}"


SLEEPER_DRIVER = """
import json, sys, time
from pathlib import Path
from course.grading import grade
grader = grade.setup(["p1a"], jobs=1, code_only=True)
grader.test_seconds = 0.4  # a sleeping test ends after WALL_FACTOR times that: 2 s
with grade.hidden_from_sandbox():
    started = time.monotonic()
    budget = grade.Budget(started + float(sys.argv[3]), grader.test_seconds)
    grade.grade(Path(sys.argv[1]), grader, ["p1a"], Path(sys.argv[2]), budget)
    print(json.dumps(time.monotonic() - started))
grader.close()
"""


@ROOT
def test_a_sleeper_in_every_test_still_gets_its_results_by_the_deadline(tmp_path):
    """A submission whose every test sleeps: each ends after WALL_FACTOR times its limit of
    time in which nothing of it runs, the grading at its deadline (counted here from after
    the grader's set-up) with a complete results.json, and every test not reached says why
    in the documented words."""
    import json

    from course.grading.attacks import plant
    from course.grading.grade import TOO_LATE
    from course.grading.handout import make_handout
    from provided.common import REPO_ROOT

    make_handout(tmp_path / "handout")
    plant(tmp_path / "handout", tmp_path / "sleeper", "init", "import time\ntime.sleep(600)\n")
    out, deadline = tmp_path / "results.json", 20
    done = subprocess.run([sys.executable, "-c", SLEEPER_DRIVER, str(tmp_path / "sleeper"),
                           str(out), str(deadline)],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    took = json.loads(done.stdout.splitlines()[-1])
    assert took < deadline + 10, f"the grading took {took:.0f} s with a {deadline} s deadline"
    outputs = [t["output"] for t in json.loads(out.read_text())["tests"]
               if t.get("tags") == ["p1a"]]
    kinds = {("slept" if "waited or slept for 2 s" in o else
              "too late" if o.startswith(TOO_LATE) else o[:100]) for o in outputs}
    assert kinds == {"slept", "too late"}, (
        f"each test should end after 2 s asleep, the rest say '{TOO_LATE}': {kinds}")
