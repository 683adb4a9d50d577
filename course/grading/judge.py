"""The judge process: the pytest run that judges graded tests and reports their outcomes.

Runs only in a judge, a process the zygote (course/grading/zygote.py) forks at the grader's
request (course/grading/judges.py), so that it shares the zygote's libraries with the
sandboxes. It first forks its warden (course/grading/warden.py), the root process that does
every privileged step of its sandboxes and forks them, then drops root for a user of its own
(hw-judge, no capability left). It runs the graded tests, public and hidden, in a tree only
that user and root can read, which the grader wrote and which holds the tests and the
HANDOUT's code: every solution region there raises NotImplementedError, so a test that
called the code under test directly, and not through tests/seam.py, would fail. Every
`submission(...)` call of a test goes to a sandbox of that test's own (SandboxTransport,
course/grading/sandbox.py), which holds the submission's code and answers with data only.
So the judge never imports a module of the submission, never runs its code and never
unpickles what it returns; the outcome it reports is pytest's, in a process that the
submission cannot reach (another user, and not dumpable).

The grader reads one JSON line per test start and end from the judge's pipe
(course/grading/pipe.py).
"""

import ctypes
import functools
import json
import os
import re
import resource
import shutil
import signal
import sys
from pathlib import Path

import pytest

from course.grading.paths import HIDDEN_DIR, forget_repository_modules
from course.grading.pipe import CPU_STOP, NODES, OUTPUT_CHARS, OVER_CPU, boot_ticks
from course.grading.users import Sandbox
from course.grading.warden import Warden

MESSAGE_CHARS = 600  # the failing assertion's own message, shown first
MAX_OUTPUT = 4 * OUTPUT_CHARS  # a test's whole output (its setup, call and teardown)
PR_SET_DUMPABLE, PR_SET_NO_NEW_PRIVS = 4, 38
JUDGE_MEMORY = 1024 * 2**20  # what a judge may map beyond its size at its start: a test's
# own values and what it builds from the replies it takes (tests/seam.py bounds each reply)
OOM_SCORE = 500  # the kernel's OOM killer takes a sandbox (1000) first, then a judge, never
# another process of the grader


class Reporter:
    """The judge's pytest plugin: one JSON line per test start and end on the grader's
    pipe."""

    def __init__(self, fd: int, forget: Path):
        self.fd, self.forget = fd, forget
        self.failures: list[str] = []
        self.calling = False  # a test's own body runs
        signal.signal(CPU_STOP, self.stop)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item):
        self.calling = True
        try:
            yield
        finally:
            self.calling = False

    def stop(self, _signal, _frame) -> None:
        """The grader's CPU_STOP: the running test fails now, and the judge goes on with
        the next (a test in its set-up or tear-down finishes it first)."""
        if self.calling:
            self.calling = False
            pytest.fail(OVER_CPU, pytrace=False)

    def pytest_collection_finish(self, session) -> None:
        """The hidden tests are in memory now: their files leave the disk, so that no
        sandbox could read them there, whatever its user may read."""
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
        self.send(event="start", node=nodeid, at=boot_ticks())

    def pytest_runtest_logreport(self, report) -> None:
        if report.skipped:
            self.failures.append("skipped (a graded test never skips)")
        elif report.failed:
            hidden = report.nodeid.startswith(HIDDEN_DIR + "/")
            self.failures.append(failure_text(report, hidden))

    def pytest_runtest_logfinish(self, nodeid, location) -> None:
        self.send(event="end", node=nodeid, outcome="failed" if self.failures else "passed",
                  output="\n".join(self.failures)[:MAX_OUTPUT])


def failure_text(report, hidden: bool = False) -> str:
    """A failed test's output for the student: the error's own message first (a graded
    test's assertion says what was expected and the likely mistake), then pytest's report,
    cut to its end if long. A hidden test's output is its message alone, with no path of
    the grader's: pytest's report would show the hidden test's code and lines."""
    text = report.longreprtext
    first = getattr(getattr(report.longrepr, "reprcrash", None), "message", "") or ""
    if first.startswith("MemoryError") and "in the code under test:" not in text:
        first = (f"MemoryError in the test, over the judge's memory budget ({JUDGE_MEMORY >> 20}"
                 " MiB for a test): what the code under test returned, or what the test built "
                 "from it, was far larger than the test needs")
    first = first[:MESSAGE_CHARS]
    if hidden:
        return GRADER_PATH.sub("", first) or "this hidden test failed"
    rest = text if len(text) <= OUTPUT_CHARS else "...\n" + text[-OUTPUT_CHARS:]
    return f"{first}\n\n{rest}" if first else rest


# the grader's folders in a path (a judge's tree, a sandbox's tree): a hidden test's output
# names a file by its place in the submission only
GRADER_PATH = re.compile(r"/\S*?/(?:judge|sandbox)-[\w-]+/")


class SeamTransport:
    """The judge's plugin that hands each test's seam its transport: conftest.py's
    submission_seam fixture asks pytest's plugin manager for it by NAME (a local pytest run
    has none, and uses the seam's Loopback) and calls factory() at the test's first call.

    It also says what of pytest's basetemp a test's sandbox may use (shared): the folders
    made by the tests of its own file (a module's fixture shares one among them), but the
    other tests' own tmp_path folders, each removed as its test ends. When the tests of
    another file begin, every folder of the basetemp is removed first: nothing a test or its
    sandbox left there reaches a test of another file. The basetemp itself stays the
    judge's and unlistable (mode 0711), so no sandbox learns a hidden test's name."""

    NAME = "seam-transport"

    def __init__(self, make_transport, basetemp: Path, pool: list[Sandbox]):
        self.make_transport, self.basetemp, self.pool = make_transport, basetemp, pool
        self.tests, self.others, self.module = 0, set(), None
        self.__name__ = self.NAME  # the name pytest registers the plugin under

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item) -> None:
        """Before the test's fixtures: a test of another file than the last finds the
        basetemp empty."""
        self.tests += 1
        module = item.nodeid.split("::")[0]
        if module != self.module and self.basetemp.is_dir():
            for path in self.basetemp.iterdir():
                if path.is_dir() and not path.is_symlink():
                    shutil.rmtree(path, onerror=_open_and_retry)
                else:
                    path.unlink(missing_ok=True)
        self.module = module

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_teardown(self, item):
        """After the test (its sandbox closed): its tmp_path is no other test's to use, and
        what its sandbox wrote there leaves the disk."""
        yield
        own = item.funcargs.get("tmp_path") if hasattr(item, "funcargs") else None
        if own is not None:
            self.others.add(Path(own).name)
            shutil.rmtree(own, onerror=_open_and_retry)

    def shared(self) -> list[Path]:
        """The basetemp's folders the current test's sandbox may use."""
        if not self.basetemp.is_dir():
            return []
        self.basetemp.chmod(0o711)
        return [path for path in self.basetemp.iterdir()
                if path.is_dir() and not path.is_symlink() and path.name not in self.others]

    def factory(self):
        """The current test's transport: a sandbox as the pool's next user."""
        slot = self.tests % len(self.pool)
        return self.make_transport(slot, self.shared)


def _open_and_retry(function, path, _info) -> None:
    """rmtree's error handler: a folder the sandbox closed (mode 000) is opened to its owner,
    now the judge's user, and the removal tried again."""
    try:
        os.chmod(os.path.dirname(path), 0o700)
        if os.path.isdir(path) and not os.path.islink(path):
            os.chmod(path, 0o700)
        function(path)
    except OSError:
        pass


def run_judge(tree: Path, args: list[str], fd: int, transport, pool: list[Sandbox],
              repo: str) -> None:
    """The judge (forked from the zygote, course/grading/zygote.py): run pytest on the tests in
    tree, the node ids in tree/NODES after args, each test's seam on a transport of its
    own, outcomes on fd. Never returns."""
    try:
        ctypes.CDLL(None).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)  # no ptrace, no /proc/pid/mem
        null = os.open(os.devnull, os.O_RDWR)
        for target in (0, 1):
            os.dup2(null, target)
        os.chdir(tree)
        forget_repository_modules()  # the grader's own: the tree's instead
        sys.path[:] = [str(tree)] + [p for p in sys.path if p not in ("", ".", repo)]
        sys.argv = ["pytest"]
        nodes = json.loads((tree / NODES).read_text())
        basetemp = Path(args[args.index("--basetemp") + 1])
        pytest.main([*args, *nodes], plugins=[Reporter(fd, tree / HIDDEN_DIR),
                                              SeamTransport(transport, basetemp, pool)])
    except BaseException:
        if os.environ.get("GRADE_DEBUG"):
            import traceback

            traceback.print_exc()
    finally:
        os._exit(0)


class SandboxTransport:
    """A test's seam transport in the judge: a sandbox of its own over a copy of the
    submission's tree, started by the judge's warden at the first request, killed at the end.
    Every privileged step (the tree given to the sandbox user, the stop between calls, the
    cleanup) is the warden's (course/grading/warden.py), and so is the sandbox's channel:
    each seam call is one request to the warden, which passes the message on and returns
    the reply's bytes. The judge holds no privilege."""

    def __init__(self, warden: Warden, slot: int, shared):
        self.warden, self.shared = warden, shared  # shared(): the folders it may use
        reply, _ = warden.call("tree", slot=slot)
        if "tree" not in reply:
            raise RuntimeError(f"the warden made no sandbox: {reply.get('error')}")
        self.tree = reply["tree"]

    def exchange(self, message: bytes) -> bytes:
        from tests import seam

        folders = [str(folder) for folder in self.shared()]
        reply, payload = self.warden.call("call", payload=message, tree=self.tree,
                                          folders=folders)
        if payload is None:
            raise seam.SeamError(reply.get("ended") or reply.get("error") or
                                 "the process running the code under test ended during this "
                                 "call (an os._exit, a crash, or out of memory?)")
        return payload

    def close(self) -> None:
        self.warden.call("close", tree=self.tree)


def budget_memory() -> None:
    """The judge's own memory budget: JUDGE_MEMORY of address space beyond what it maps
    now (a reply that would grow past it raises MemoryError in its test alone), and an OOM
    score that gives it to the kernel's OOM killer before any grader process but a
    sandbox."""
    status = Path("/proc/self/status").read_text()
    size = int(next(line.split()[1] for line in status.splitlines()
                    if line.startswith("VmSize:"))) * 1024
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = size + JUDGE_MEMORY
    resource.setrlimit(resource.RLIMIT_AS, (limit if hard == resource.RLIM_INFINITY
                                            else min(limit, hard),) * 2)
    try:
        Path("/proc/self/oom_score_adj").write_text(str(OOM_SCORE))
    except OSError:
        pass


def drop_root(judge: Sandbox) -> None:
    """Become the judge's own user, for good: no way back to root, no new privilege from
    an executable (PR_SET_NO_NEW_PRIVS)."""
    os.setgroups([])
    os.setgid(judge.gid)
    os.setuid(judge.uid)
    ctypes.CDLL(None).prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)


def main(request: dict, fd: int) -> None:
    """The judge, forked from the zygote: the graded tests' pytest run in request's tree,
    each test's seam on a sandbox of its own, the outcomes on fd. Never returns."""
    os.setsid()
    spec = request["sandbox"]
    pool = [Sandbox(uid, gid) for uid, gid in spec["pool"]]
    judge = Sandbox(*spec["judge"])
    warden = Warden(spec)
    budget_memory()
    drop_root(judge)
    transport = functools.partial(SandboxTransport, warden)
    run_judge(Path(request["tree"]), request["args"], fd, transport, pool, request["repo"])
