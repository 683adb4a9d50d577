"""Run a submission's tests in a sealed worker process, and read their outcomes.

The grader (grading/grade.py) is trusted; a submission is not. The grader imports torch,
numpy, pytest and the rest once, then forks one worker per run (a part's public tests, or
its hidden tests). Before any submission code runs, the worker

  - drops to an unprivileged user of its own when the grader runs as root (the user
    `hw-sandbox`, made here or by the autograder's setup.sh), so that the grading
    repository, the bands, the results file and other submissions are out of its reach;
  - starts a session of its own (the grader kills the whole group, and every process of
    the sandbox user, after the run), with limits on file size, core dumps and open files;
  - keeps one file descriptor, the pipe to the grader, and sends /dev/null its output;
  - forgets every module of the repository the grader imported and imports the run's
    tree instead: the reference code with the submission's functions of one part;
  - records a snapshot of the libraries the tests trust (pytest, pluggy, torch, numpy,
    builtins, os, math, ...).

The worker then runs pytest on the run's tests with the Reporter plugin below, which sends
one line per test start and end. The grader, not the worker, decides the outcome: a test
passes only if its end line came, said passed, carried the run's token, and the trusted
libraries were unchanged; a test whose worker died, hung or stopped talking fails with that
reason, and the grader starts a fresh worker for the tests after it. What this cannot
prevent is written in INSTRUCTORS.md ("The grader's threat model").
"""

import fcntl
import json
import os
import pwd
import resource
import secrets
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import types
import warnings
from dataclasses import dataclass, field
from pathlib import Path

SANDBOX_USER = "hw-sandbox"
DEBUG = bool(os.environ.get("GRADE_DEBUG"))  # workers keep the grader's stderr
OUTPUT_CHARS = 2500
MESSAGE_CHARS = 600  # the failing assertion's own message, shown first
MAX_OUTPUT = 4 * OUTPUT_CHARS  # a test's whole output (its setup, call and teardown)
MAX_FILE_BYTES = 256 * 2**20  # a worker writes no file larger than this
MAX_PROCESSES = 256  # processes and threads of the sandbox user
MAX_ADDRESS_BYTES = 4 * 2**30  # a worker's address space (the grader's is under 1 GiB)
# what the tests rely on; a submission that changes any of it fails the test it ran in
TRUSTED_ROOTS = ("builtins", "os", "posixpath", "math", "random", "json", "functools",
                 "torch", "numpy", "grading", "hypothesis")
# ... and pytest, recorded once it has configured itself (it sets some of its own methods)
PYTEST_ROOTS = ("pytest", "_pytest", "pluggy", "pytest_timeout")
# imported once by the grader, before any snapshot, for every worker to share: what the tests
# use, and torch's lazily imported modules that re-wrap torch's own functions (torch._dynamo
# wraps torch.manual_seed when an optimizer first imports it)
PRELOADED = ("torch", "torch._dynamo", "torch.optim", "torch.utils.data", "numpy", "pytest",
             "_pytest.timing", "pytest_timeout", "hypothesis", "matplotlib.pyplot",
             "rdkit.Chem", "tqdm")
# repository modules the grader imported itself: a worker imports the run tree's instead
REPOSITORY_ROOTS = ("problem1", "problem2", "problem3", "provided", "tests", "conftest",
                    "tiny", "tools")


@dataclass(frozen=True)
class Sandbox:
    """Who a worker runs as: uid/gid of the sandbox user, or None when not root."""
    uid: int | None = None
    gid: int | None = None
    lock: int | None = None  # the open lock file that reserves the user for this grader

    @property
    def sealed(self) -> bool:
        return self.uid is not None


def preload() -> None:
    """Import PRELOADED (the workers, forked from the grader, start with them)."""
    import importlib

    os.environ.setdefault("MPLBACKEND", "Agg")
    for name in PRELOADED:
        importlib.import_module(name)


def sandbox_user() -> Sandbox:
    """A sandbox user of this grader's own when running as root, else an unsealed Sandbox
    (the worker then runs as the grader's own user). Graders running side by side each
    lock a user of their own (hw-sandbox, hw-sandbox1, ...; made with useradd if missing),
    since a grader kills every process of its user after each run."""
    if os.geteuid() != 0:
        return Sandbox()
    locks = Path("/run/lock") if Path("/run/lock").is_dir() else Path("/var/lock")
    for slot in range(32):
        name = SANDBOX_USER + (str(slot) if slot else "")
        lock = os.open(locks / f"{name}.lock", os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(lock)
            continue
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            subprocess.run(["useradd", "--system", "--no-create-home", "--shell",
                            "/usr/sbin/nologin", name], check=True, capture_output=True)
            entry = pwd.getpwnam(name)
        open_python_to_others()
        return Sandbox(entry.pw_uid, entry.pw_gid, lock)  # the lock lives as long as we do
    raise RuntimeError("32 graders are already running as root on this machine")


def open_python_to_others() -> None:
    """Let other users traverse (x, not list) the folders above this Python's files, as
    the sandbox user must import them: e.g. a pyenv Python under root's 0700 home."""
    for prefix in {sys.base_prefix, sys.prefix}:
        for folder in reversed(Path(prefix).resolve().parents):
            mode = folder.stat().st_mode
            if not mode & 0o001:
                print(f"note: letting other users traverse {folder} (chmod o+x), so that "
                      f"the sandbox user {SANDBOX_USER} can run Python from {prefix}",
                      file=sys.stderr)
                folder.chmod((mode & 0o7777) | 0o001)


def make_tree(out: Path, files: dict[str, bytes], sandbox: Sandbox) -> None:
    """Write files (relative path -> bytes) under out, owned by the sandbox user, which is
    the only user that can enter it (the grader, as root, always can)."""
    for name, data in files.items():
        path = out / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    (out / "tmp").mkdir(exist_ok=True)
    out.chmod(0o700)
    if sandbox.sealed:
        for path in [out, *out.rglob("*")]:
            os.chown(path, sandbox.uid, sandbox.gid, follow_symlinks=False)


def remove_tree(path: Path) -> None:
    """Remove a run tree whatever the submission did to it (links, modes)."""
    if path.is_symlink() or path.is_file():
        path.unlink()
        return
    for folder in [path, *(p for p in path.rglob("*") if p.is_dir() and not p.is_symlink())]:
        folder.chmod(0o700)
    shutil.rmtree(path, ignore_errors=True)


# ---------------------------------------------------------------------- the trusted state
class Snapshot:
    """The attributes of the trusted modules and of their classes, by identity."""

    def __init__(self, roots=TRUSTED_ROOTS):
        self.entries = {}
        with warnings.catch_warnings():  # torch warns on some deprecated attributes
            warnings.simplefilter("ignore")
            self.add_roots(roots)

    def add_roots(self, roots) -> None:
        """Every loaded module whose top-level package is one of roots."""
        self.add_modules(name for name in list(sys.modules) if name.split(".")[0] in roots)

    def _add(self, name: str, namespace) -> None:
        self.entries[name] = (namespace, _watched(namespace))
        for key, value in self.entries[name][1].items():
            if isinstance(value, type) and vars(value).get("__module__") == name:
                self.entries[f"{name}.{key}"] = (value, _watched(value))

    def add_modules(self, names) -> None:
        for name in names:
            module = sys.modules.get(name)
            if module is not None:
                self._add(name, module)

    def changed(self) -> str | None:
        """The first trusted attribute replaced or removed since the snapshot, or None."""
        for name, (namespace, values) in self.entries.items():
            now = vars(namespace)
            for key, value in values.items():
                if key not in now or (now[key] is not value
                                      and not _profiled_step(namespace, key, value, now[key])):
                    return f"{name}.{key}"
        return None


def _profiled_step(namespace, key: str, old, new) -> bool:
    """Whether new is torch's own profiling wrapper of an optimizer's step, which the
    first optimizer of a class puts in place of old."""
    import torch

    return (key == "step" and isinstance(namespace, type)
            and issubclass(namespace, torch.optim.Optimizer)
            and getattr(new, "hooked", False) and getattr(new, "__wrapped__", None) is old)


WATCHED_TYPES = (types.ModuleType, classmethod, staticmethod, property)


def _watched(namespace) -> dict:
    """The callables, classes and modules a namespace holds (data attributes are left out:
    libraries change their own flags and caches as they run)."""
    return {key: value for key, value in vars(namespace).items()
            if callable(value) or isinstance(value, WATCHED_TYPES)}


class Reporter:
    """The worker's pytest plugin: one JSON line per event on the grader's pipe."""

    def __init__(self, fd: int, token: str, snapshot: Snapshot):
        self.fd, self.token, self.snapshot = fd, token, snapshot
        self.failures: list[str] = []
        self.plugins: frozenset = frozenset()
        self.tampered: str | None = None

    def send(self, **record) -> None:
        data = (json.dumps({**record, "token": self.token}) + "\n").encode()
        while data:
            data = data[os.write(self.fd, data):]

    def pytest_sessionstart(self, session) -> None:
        self.snapshot.add_roots(PYTEST_ROOTS)

    def pytest_collectreport(self, report) -> None:
        if report.failed:
            self.send(event="collect-error", output=report.longreprtext[-OUTPUT_CHARS:])

    def pytest_collection_finish(self, session) -> None:
        test_modules = {item.module.__name__ for item in session.items
                        if getattr(item, "module", None) is not None}
        self.snapshot.add_modules(test_modules)
        self.plugins = frozenset(map(id, session.config.pluginmanager.get_plugins()))
        self.config = session.config
        self.tampered = self._tampering()
        self.send(event="collected")

    def pytest_runtest_logstart(self, nodeid, location) -> None:
        self.failures = []
        self.send(event="start", node=nodeid)

    def pytest_runtest_logreport(self, report) -> None:
        if report.skipped:
            self.failures.append("skipped (a graded test never skips)")
        elif report.failed:
            self.failures.append(failure_text(report))

    def pytest_runtest_logfinish(self, nodeid, location) -> None:
        self.tampered = self.tampered or self._tampering()
        if self.tampered:
            self.send(event="end", node=nodeid, outcome="failed",
                      output=f"the submission changed {self.tampered}, which the tests rely "
                             "on; no test can be trusted after that")
        else:
            self.send(event="end", node=nodeid,
                      outcome="failed" if self.failures else "passed",
                      output="\n".join(self.failures)[:MAX_OUTPUT])

    def _tampering(self) -> str | None:
        if sys.gettrace() is not None or sys.getprofile() is not None:
            return "the interpreter's trace or profile function"
        plugins = frozenset(map(id, self.config.pluginmanager.get_plugins()))
        if self.plugins and plugins != self.plugins:
            return "pytest's plugins"
        return self.snapshot.changed()


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


def _limit(kind: int, value: int) -> None:
    soft, hard = resource.getrlimit(kind)
    value = value if hard == resource.RLIM_INFINITY else min(value, hard)
    resource.setrlimit(kind, (value, value))


def _worker(tree: Path, args: list[str], fd: int, token: str, sandbox: Sandbox,
            snapshot: Snapshot, env: dict, repo: str) -> None:
    """The forked worker: seal itself, then run pytest. Never returns."""
    try:
        os.setsid()
        os.dup2(fd, 3)
        null = os.open(os.devnull, os.O_RDWR)
        for target in (0, 1) if DEBUG else (0, 1, 2):
            os.dup2(null, target)
        os.closerange(4, 65536)  # the grader's other pipes and its lock file included
        _limit(resource.RLIMIT_FSIZE, MAX_FILE_BYTES)
        _limit(resource.RLIMIT_CORE, 0)
        _limit(resource.RLIMIT_NOFILE, 256)
        _limit(resource.RLIMIT_AS, MAX_ADDRESS_BYTES)
        try:  # out of memory, the kernel kills the worker, never the grader
            Path("/proc/self/oom_score_adj").write_text("1000")
        except OSError:
            pass
        if sandbox.sealed:
            _limit(resource.RLIMIT_NPROC, MAX_PROCESSES)  # counted per user: a fork bomb stops
            os.setgroups([])
            os.setgid(sandbox.gid)
            os.setuid(sandbox.uid)
        os.chdir(tree)
        os.environ.clear()
        os.environ.update(env)
        tempfile.tempdir = None  # the grader's choice is cached: take TMPDIR (in the tree)
        for name in [n for n in sys.modules if n.split(".")[0] in REPOSITORY_ROOTS]:
            del sys.modules[name]
        sys.path[:] = [str(tree)] + [p for p in sys.path if p not in ("", ".", repo)]
        sys.argv = ["pytest"]
        import pytest

        pytest.main(args, plugins=[Reporter(3, token, snapshot)])
    except BaseException:
        if DEBUG:
            import traceback

            traceback.print_exc()
    finally:
        os._exit(0)


# --------------------------------------------------------------------------- the grader side
@dataclass
class RunResult:
    """Outcomes of one run: {node id: (passed, output)}, plus a reason for the rest."""
    outcomes: dict = field(default_factory=dict)
    unreached: str = ""  # why tests without an outcome have none


def kill_all(pid: int, sandbox: Sandbox) -> None:
    """Kill a worker's process group and, when sealed, every process of the sandbox user."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    if sandbox.sealed:
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    if entry.stat().st_uid == sandbox.uid:
                        os.kill(int(entry.name), signal.SIGKILL)
                except (OSError, ProcessLookupError):
                    pass
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass
    if sandbox.sealed:
        remove_user_files(sandbox.uid)


def remove_user_files(uid: int) -> None:
    """Delete what the sandbox user left in the machine's shared scratch folders, so that
    nothing of one run reaches a later one."""
    for folder in ("/tmp", "/var/tmp", "/dev/shm"):
        try:
            entries = list(Path(folder).iterdir())
        except OSError:
            continue
        for path in entries:
            try:
                if path.lstat().st_uid == uid:
                    remove_tree(path)
            except OSError:
                pass


def run_tests(tree: Path, nodes: list[str], sandbox: Sandbox, env: dict, repo: str,
              test_seconds: float, deadline: float, too_late: str) -> RunResult:
    """Run nodes (pytest node ids, in order) in sealed workers inside tree, with the
    repository at repo out of their imports. A test that kills, hangs or derails its worker
    fails; a fresh worker takes the tests after it. At the deadline, the tests not done
    fail with the reason too_late."""
    result = RunResult()
    snapshot = Snapshot()
    remaining = list(nodes)
    while remaining:
        if time.monotonic() >= deadline:
            result.unreached = too_late
            break
        done = _one_worker(tree, remaining, sandbox, env, repo, snapshot, result,
                           test_seconds, deadline, too_late)
        remaining = [n for n in remaining if n not in result.outcomes]
        if done:
            break
    return result


def _one_worker(tree, nodes, sandbox, env, repo, snapshot, result, test_seconds, deadline,
                too_late) -> bool:
    """One worker over nodes; True when the worker ended by itself with nothing to retry."""
    token = secrets.token_hex(16)
    read_fd, write_fd = os.pipe()
    args = ["-q", "-p", "no:cacheprovider", "--basetemp", str(tree / "tmp" / "pytest"), "-o",
            f"timeout={max(1, int(test_seconds) - 2)}", *nodes]
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        _worker(tree, args, write_fd, token, sandbox, snapshot, env, repo)
    os.close(write_fd)
    buffer, current, collect_error = b"", None, ""
    limit = time.monotonic() + 4 * test_seconds  # collection (imports) included
    ended_by_itself = False
    try:
        while True:
            wait = min(limit, deadline) - time.monotonic()
            if wait <= 0:
                if current is not None:
                    result.outcomes[current] = (False, (
                        f"not graded: this test ran over its time limit of {test_seconds:.0f} s"
                        " (an endless loop?)" if time.monotonic() < deadline else too_late))
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
                record = _record(line, token)
                if record is None:
                    continue
                event = record.get("event")
                if event == "collect-error":
                    collect_error += str(record.get("output", "")) + "\n"
                elif event == "start" and record.get("node") in nodes:
                    current = record["node"]
                    limit = time.monotonic() + test_seconds
                elif event == "end" and record.get("node") == current:
                    result.outcomes.setdefault(current, (record.get("outcome") == "passed",
                                                         str(record.get("output", ""))))
                    current = None
                    limit = time.monotonic() + test_seconds
    finally:
        os.close(read_fd)
        kill_all(pid, sandbox)
    if current is not None:
        result.outcomes[current] = (False, "the test process ended during this test (an "
                                           "os._exit, a crash, or out of memory?)")
        return False
    if collect_error:
        result.unreached = ("the tests could not import your code:\n"
                            + collect_error[-OUTPUT_CHARS:])
    elif not result.unreached:
        result.unreached = "the test process stopped before this test ran"
    return ended_by_itself


def _record(line: bytes, token: str) -> dict | None:
    """A worker's line as a dict, or None unless it is well formed and carries the token."""
    try:
        record = json.loads(line)
    except ValueError:
        return None
    if not isinstance(record, dict) or record.get("token") != token:
        return None
    return record
