"""Where submission code runs: sandboxed processes that receive and return only data.

The grader (course/grading/grade.py) and its judges (course/grading/judge.py) never run
submission code.
Each graded test that calls the submission gets a sandbox of its own: a process forked from
the zygote, a fresh Python interpreter that the grader starts before it reads anything
secret (hidden tests, reference solutions, bands, rubric), which imports torch, numpy and
the other libraries once and then only forks: sandboxes, and the judges themselves (which
read their tests from a tree the grader wrote, after the fork). Before it serves a
request, a sandbox

  - starts a session of its own, with limits on file size, core dumps, open files, address
    space and (sealed) processes;
  - when the grader runs as root (sealed): enters new network, IPC, mount and pid
    namespaces where the kernel allows it (no network at all, no System V IPC shared with
    anything, a private tmpfs over each world-writable folder but the one holding its tree,
    the grading repository's folders covered by empty ones, and every process it starts
    killed with it), then drops to an unprivileged user of its own (`hw-sandbox`, made
    here or by setup.sh), so that the grading files, the results and other submissions
    are out of its reach;
  - keeps one file descriptor, its channel to the judge, and sends /dev/null its output;
  - imports only its tree: the handout's code with the submission's functions spliced in,
    and the public test helpers. No test file enters it.

It then answers the judge's requests (tests/seam.py: import, get an attribute, call, ...)
until the judge closes the channel. Between requests it is stopped (SIGSTOP), so that it
cannot touch the files the judge reads; after the test, everything of its user is killed
and what it left in any world-writable folder removed.
"""

import ctypes
import fcntl
import functools
import json
import os
import pwd
import resource
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

SANDBOX_USER = "hw-sandbox"
REPO_ROOT = Path(__file__).resolve().parents[2]
DEBUG = bool(os.environ.get("GRADE_DEBUG"))  # sandboxes keep the grader's stderr
MAX_FILE_BYTES = 64 * 2**20  # a sandbox writes no file larger than this
MAX_PROCESSES = 64  # processes and threads of the sandbox user
MAX_ADDRESS_BYTES = 4 * 2**30
# imported once by the zygote, for every sandbox to share: what the code under test uses
# (torch._dynamo is what an optimizer's first step imports: 1.5 CPU-seconds, 70 MB); a
# sandbox that draws a figure imports matplotlib itself
PRELOADED = ("torch", "torch._dynamo", "torch.optim", "torch.utils.data", "numpy",
             "rdkit.Chem", "tqdm")
# ... and what the judges, also forked from the zygote, use besides
JUDGE_PRELOADED = ("pytest", "_pytest.timing", "pytest_timeout", "hypothesis",
                   "matplotlib.pyplot")
CLONE_NEWNS, CLONE_NEWIPC, CLONE_NEWPID, CLONE_NEWNET = (0x00020000, 0x08000000,
                                                       0x20000000, 0x40000000)
NAMESPACES = CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWPID | CLONE_NEWNET
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_BIND, MS_REC, MS_PRIVATE = 0x1000, 0x4000, 0x40000
SCRATCH_FOLDERS = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock", "/var/lock")
NOT_SCANNED = ("/proc", "/sys", "/dev")  # no folder a sandbox could leave a file in ...
DEVICE_SCRATCH = ("/dev/shm", "/dev/mqueue")  # ... but these
SPAWNED = "sandboxes.txt"  # in a judge's work folder: the pid of every sandbox it started


@dataclass(frozen=True)
class Sandbox:
    """Who a sandbox runs as: uid/gid of the sandbox user, or None when not root."""
    uid: int | None = None
    gid: int | None = None
    lock: int | None = None  # the open lock file that reserves the user for this grader

    @property
    def sealed(self) -> bool:
        return self.uid is not None


def sandbox_user() -> Sandbox:
    """A sandbox user of this grader's own when running as root, else an unsealed Sandbox
    (sandboxes then run as the grader's own user). Graders running side by side each lock
    a user of their own (hw-sandbox, hw-sandbox1, ...; made with useradd if missing),
    since a grader kills every process of its user after each test."""
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


def make_tree(out: Path, files: dict[str, bytes], owner: Sandbox | None = None) -> None:
    """Write files (relative path -> bytes) under out; owned by the sandbox user (the only
    user besides root that can enter it) when owner is sealed."""
    for name, data in files.items():
        path = out / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    (out / "tmp").mkdir(exist_ok=True)
    out.chmod(0o700)
    if owner is not None and owner.sealed:
        give(out, owner)


def give(folder: Path, owner: Sandbox) -> None:
    """Make folder and everything under it the sandbox user's: the links themselves, never
    what they point to (os.walk follows none), and only what it does not own yet."""
    for root, dirs, files in os.walk(folder):
        for name in [root, *(os.path.join(root, n) for n in dirs + files)]:
            try:
                if os.lstat(name).st_uid != owner.uid:
                    os.chown(name, owner.uid, owner.gid, follow_symlinks=False)
            except OSError:
                pass


def remove_tree(path: Path) -> None:
    """Remove a tree whatever the submission did to it (links, modes)."""
    if path.is_symlink() or path.is_file():
        path.unlink()
        return
    if not path.exists():
        return
    for folder in [path, *(p for p in path.rglob("*") if p.is_dir() and not p.is_symlink())]:
        try:
            folder.chmod(0o700)
        except OSError:
            pass
    shutil.rmtree(path, ignore_errors=True)


# ---------------------------------------------------------------------------- the zygote
def _limit(kind: int, value: int) -> None:
    soft, hard = resource.getrlimit(kind)
    value = value if hard == resource.RLIM_INFINITY else min(value, hard)
    resource.setrlimit(kind, (value, value))


def _unshare(flags: int) -> bool:
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.unshare(flags) == 0


def _mount(source: str, target: str, kind: str | None, flags: int, data: str = "") -> bool:
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.mount(source.encode(), target.encode(), kind.encode() if kind else None,
                      flags, data.encode() or None) == 0


@functools.cache
def world_writable_folders() -> tuple[str, ...]:
    """Every folder of this machine that any user may write in (/tmp, /var/tmp, /dev/shm,
    /run/lock and any other, nested ones included), found once per grader: where a
    sandbox could leave a file behind. /proc, /sys and /dev other than /dev/shm and
    /dev/mqueue are not scanned; links are not followed."""
    found, stack = set(), ["/"]
    while stack:
        folder = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            path = entry.path
            if path in NOT_SCANNED:
                stack += [d for d in DEVICE_SCRATCH if os.path.isdir(d)] * (path == "/dev")
                continue
            try:
                if not entry.is_dir(follow_symlinks=False):
                    continue
                if entry.stat(follow_symlinks=False).st_mode & stat.S_IWOTH:
                    found.add(path)
            except OSError:
                continue
            stack.append(path)
    return tuple(sorted(found | {f for f in SCRATCH_FOLDERS if os.path.isdir(f)
                                 and not os.path.islink(f)}))


def private_scratch(tree: str, shared: list[str]) -> None:
    """In the sandbox's own mount namespace: a fresh, empty tmpfs over every world-writable
    folder that holds neither the sandbox's tree nor a folder the judge shares with it (what
    the sandbox writes there vanishes with it); over every top-level folder of the grading
    repository that neither the tree nor Python needs, an empty read-only tmpfs, and over
    every top-level file, /dev/null."""
    _mount("none", "/", None, MS_REC | MS_PRIVATE)
    needed = [tree, *shared, sys.prefix, sys.base_prefix]
    inside = lambda folder: any(Path(n).is_relative_to(folder) for n in needed)  # noqa: E731
    for folder in world_writable_folders():
        if not inside(folder):
            _mount("tmpfs", folder, "tmpfs", MS_NOSUID | MS_NODEV, "size=64m,mode=1777")
    for entry in REPO_ROOT.iterdir():
        if entry.is_symlink() or inside(str(entry)):
            continue
        if entry.is_dir():
            _mount("tmpfs", str(entry), "tmpfs", MS_NOSUID | MS_NODEV | MS_RDONLY,
                   "size=4k,mode=000")
        elif entry.is_file():
            _mount("/dev/null", str(entry), None, MS_BIND)


# seccomp: a filter that refuses the sockets that reach a network (and io_uring, which could
# open one behind the filter's back), installed in every sandbox, sealed or not
SECCOMP_ARCH = {"x86_64": (0xC000003E, 41), "aarch64": (0xC00000B7, 198)}  # arch, socket()
NETWORK_FAMILIES = (2, 10, 16, 17)  # AF_INET, AF_INET6, AF_NETLINK, AF_PACKET
IO_URING_SETUP = 425
PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
PR_SET_CHILD_SUBREAPER = 36
RET_ALLOW, RET_EPERM = 0x7FFF0000, 0x00050001


class _Instruction(ctypes.Structure):
    _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte),
                ("k", ctypes.c_uint)]


class _Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_Instruction))]


def network_filter() -> list[tuple] | None:
    """The BPF program (code, jt, jf, k) of the filter for this machine, None if unknown."""
    machine = os.uname().machine
    if machine not in SECCOMP_ARCH:
        return None
    arch, socket_nr = SECCOMP_ARCH[machine]
    load, jeq, jge, ret = 0x20, 0x15, 0x35, 0x06
    program = [(load, 0, 0, 4),  # seccomp_data.arch
               (jeq, 1, 0, arch), (ret, 0, 0, RET_EPERM),  # another ABI: refuse everything
               (load, 0, 0, 0),  # seccomp_data.nr
               (jge, 0, 1, 0x40000000), (ret, 0, 0, RET_EPERM),  # x32 numbers
               (jeq, 0, 1, IO_URING_SETUP), (ret, 0, 0, RET_EPERM),
               (jeq, 1, 0, socket_nr), (ret, 0, 0, RET_ALLOW),
               (load, 0, 0, 16)]  # seccomp_data.args[0], the socket's family
    for family in NETWORK_FAMILIES:
        program += [(jeq, 0, 1, family), (ret, 0, 0, RET_EPERM)]
    return program + [(ret, 0, 0, RET_ALLOW)]


def deny_network() -> bool:
    """Install the network filter in this process (and every process it starts); whether
    it took. Needs no privilege: no_new_privs comes first, as the kernel asks."""
    program = network_filter()
    if program is None:
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    instructions = (_Instruction * len(program))(*[_Instruction(*i) for i in program])
    fprog = _Program(len(program), instructions)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        return False
    return libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) == 0


def _works_in_a_child(attempt) -> bool:
    pid = os.fork()
    if pid == 0:
        os._exit(0 if attempt() else 1)
    _, status = os.waitpid(pid, 0)
    return os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


def _refused() -> bool:
    """Whether, after deny_network(), an internet socket is refused (the filter works)."""
    if not deny_network():
        return False
    try:
        socket.socket(socket.AF_INET, socket.SOCK_STREAM).close()
    except OSError:
        return True
    return False


def isolation_available() -> tuple[bool, str]:
    """(whether sandboxes enter new namespaces, the isolation in words): each way tried in
    a throwaway child."""
    namespaces = os.geteuid() == 0 and _works_in_a_child(
        lambda: _unshare(NAMESPACES) and _mount("none", "/", None, MS_REC | MS_PRIVATE))
    seccomp = _works_in_a_child(_refused)
    words = []
    if namespaces:
        words.append("network, IPC, mount and pid namespaces (no network, private System V "
                     "IPC, a private tmpfs over every world-writable folder, the grading "
                     "repository covered, every process killed with the sandbox)")
    if seccomp:
        words.append("a seccomp filter refusing internet, netlink and packet sockets")
    if not words:
        words.append("no network isolation: neither namespaces nor seccomp are allowed here")
    if os.geteuid() != 0:
        words.append("not running as root: sandboxes run as the grader's own user, unsealed")
    return namespaces, "; ".join(words)


def _become_init() -> None:
    """After unsharing the pid namespace: fork its first process (pid 1), which goes on as
    the sandbox with a /proc of its own namespace, while this one, outside, only waits for
    it. When pid 1 ends, or is killed, the kernel kills every process of the namespace at
    once, whatever they do."""
    pid = os.fork()
    if pid:
        os.closerange(0, 65536)  # the channel among them: the judge sees the sandbox end
        try:
            os.waitpid(pid, 0)
        finally:
            os._exit(0)
    _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)


def _sandbox(request: dict, channel: socket.socket, server) -> None:
    """The forked sandbox: seal itself, then answer the judge's requests. Never returns."""
    try:
        os.setsid()
        os.dup2(channel.fileno(), 3)
        null = os.open(os.devnull, os.O_RDWR)
        for target in (0, 1) if DEBUG else (0, 1, 2):
            os.dup2(null, target)
        os.closerange(4, 65536)
        _limit(resource.RLIMIT_FSIZE, MAX_FILE_BYTES)
        _limit(resource.RLIMIT_CORE, 0)
        _limit(resource.RLIMIT_NOFILE, 256)
        _limit(resource.RLIMIT_AS, MAX_ADDRESS_BYTES)
        try:  # out of memory, the kernel kills the sandbox first
            Path("/proc/self/oom_score_adj").write_text("1000")
        except OSError:
            pass
        uid, gid = request.get("uid"), request.get("gid")
        if uid is not None:
            if request.get("namespaces") and _unshare(NAMESPACES):
                private_scratch(request["tree"], request.get("shared", []))
                _become_init()
            _limit(resource.RLIMIT_NPROC, MAX_PROCESSES)  # per user: a fork bomb stops
            os.setgroups([])
            os.setgid(gid)
            os.setuid(uid)
        deny_network()
        tree = request["tree"]
        os.chdir(tree)
        os.environ.clear()
        os.environ.update(request["env"])
        import tempfile

        tempfile.tempdir = None
        sys.path[:] = [tree] + [p for p in sys.path if p not in ("", ".", str(REPO_ROOT))]
        sys.argv = ["sandbox"]
        server.serve(socket.socket(fileno=3))
    except BaseException:
        if DEBUG:
            import traceback

            traceback.print_exc()
    finally:
        os._exit(0)


def _judge_child(request: dict, fd: int, path: str) -> None:
    """A judge forked from the zygote (it shares the zygote's libraries with the
    sandboxes): course/grading/judge.py's pytest run, its outcomes on fd. Never returns."""
    from course.grading import judge

    os.setsid()
    spec = request["sandbox"]
    sandbox = Sandbox(spec["uid"], spec["gid"])
    zygote = Zygote.at(path)

    def transport():
        return SandboxTransport(zygote, sandbox, Path(spec["template"]), Path(spec["work"]),
                                Path(spec["basetemp"]))
    judge.run_judge(Path(request["tree"]), request["args"], fd, transport, request["repo"])


def zygote_main(path: str) -> None:
    """The zygote: import the libraries, then fork one sandbox or judge per request on the
    Unix socket at path. Started by Zygote() as a fresh interpreter."""
    import importlib
    import importlib.util

    os.environ.setdefault("MPLBACKEND", "Agg")
    for name in PRELOADED + JUDGE_PRELOADED:
        importlib.import_module(name)
    import torch

    torch.set_num_threads(1)
    # the seam's server, under a name of its own: a sandbox's `tests` package is its tree's
    spec = importlib.util.spec_from_file_location("_seam_server",
                                                  REPO_ROOT / "tests" / "seam.py")
    server = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(server)
    namespaces, isolation = isolation_available()
    world_writable_folders()  # once, inherited by every sandbox and judge
    import gc

    gc.collect()
    gc.freeze()  # the collector leaves the libraries' objects alone: fewer copied pages
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel
    # ... and so are orphans: a sandbox whose waiter outside its pid namespace was killed
    # first, or a process a sandbox left, is reparented here, not to the machine's init
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    print(json.dumps({"ready": True, "isolation": isolation}), flush=True)
    while True:
        connection, _ = listener.accept()
        with connection:
            try:
                data, fds, _, _ = socket.recv_fds(connection, 65536, 1)
                request = json.loads(data)
                request["namespaces"] = namespaces
            except (OSError, ValueError):
                continue
            if not fds:
                continue
            pid = os.fork()
            if pid == 0:
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                listener.close()
                connection.close()
                if request.get("kind") == "judge":
                    _judge_child(request, fds[0], path)
                _sandbox(request, socket.socket(fileno=fds[0]), server)
            os.close(fds[0])
            try:
                connection.sendall(json.dumps({"pid": pid}).encode())
            except OSError:
                pass


class Zygote:
    """A handle on the zygote process: the grader's (which started it), or a judge's."""

    process = None

    @classmethod
    def at(cls, path: str) -> "Zygote":
        """The zygote listening at path, started by someone else."""
        zygote = cls.__new__(cls)
        zygote.path = path
        return zygote

    def __init__(self, folder: Path):
        self.path = str(folder / "zygote.sock")
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "OMP_NUM_THREADS": "1",
               "MPLBACKEND": "Agg", "PYTHONDONTWRITEBYTECODE": "1", "LANG": "C.UTF-8"}
        self.process = subprocess.Popen(
            [sys.executable, "-c", "import sys; from course.grading.sandbox import zygote_main; "
             "zygote_main(sys.argv[1])", self.path], cwd=REPO_ROOT, env=env,
            stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
        line = self.process.stdout.readline()
        try:
            self.isolation = json.loads(line)["isolation"]
        except (ValueError, KeyError) as err:
            raise RuntimeError("the sandbox zygote did not start") from err

    def spawn(self, channel: socket.socket, request: dict) -> int:
        """Fork a sandbox that serves channel; its pid."""
        return self._fork(request, channel.fileno())

    def spawn_judge(self, fd: int, tree: Path, args: list[str], repo: str,
                    sandbox: Sandbox, template: Path, work: Path, basetemp: Path) -> int:
        """Fork a judge that runs pytest with args in tree, its outcomes on fd; its pid."""
        return self._fork({"kind": "judge", "tree": str(tree), "args": args, "repo": repo,
                           "sandbox": {"uid": sandbox.uid, "gid": sandbox.gid,
                                       "template": str(template), "work": str(work),
                                       "basetemp": str(basetemp)}}, fd)

    def _fork(self, request: dict, fd: int) -> int:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
            connection.connect(self.path)
            socket.send_fds(connection, [json.dumps(request).encode()], [fd])
            reply = connection.recv(4096)
        return int(json.loads(reply)["pid"])

    def close(self) -> None:
        self.process.kill()
        self.process.wait()


# ----------------------------------------------------------------- one test's sandbox
def sandbox_env(tree: Path) -> dict:
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tree),
            "TMPDIR": str(tree / "tmp"), "MPLBACKEND": "Agg", "MPLCONFIGDIR": str(tree / "tmp"),
            "OMP_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1", "LANG": "C.UTF-8"}


class SandboxTransport:
    """A test's seam transport in the grader: a sandbox of its own, forked from the zygote
    at the first request, over a copy of the submission's tree, and killed at the end."""

    def __init__(self, zygote: Zygote, sandbox: Sandbox, template: Path, work: Path,
                 shared: Path):
        self.sandbox, self.shared = sandbox, shared
        self.tree = work / f"sandbox-{os.getpid()}-{time.monotonic_ns()}"
        shutil.copytree(template, self.tree, symlinks=True)
        if sandbox.sealed:
            give(self.tree, sandbox)
        self.channel, theirs = socket.socketpair()
        request = {"tree": str(self.tree), "shared": [str(shared)],
                   "env": sandbox_env(self.tree), "uid": sandbox.uid, "gid": sandbox.gid}
        try:
            self.pid = zygote.spawn(theirs, request)
        finally:
            theirs.close()
        with open(work / SPAWNED, "a") as spawned:  # for the grader, should this judge die
            spawned.write(f"{self.pid}\n")

    def exchange(self, message: bytes) -> bytes:
        from tests import seam

        if self.sandbox.sealed:  # what the judge wrote in tmp_path, for the code to use
            give(self.shared, self.sandbox)
        self._signal(signal.SIGCONT)
        try:
            seam.send(self.channel, message)
            reply = seam.receive(self.channel)
        except OSError:
            reply = None
        finally:
            self._signal(signal.SIGSTOP)
            scrub(self.shared)
        if reply is None:
            raise seam.SeamError("the process running the code under test ended during this "
                                 "call (an os._exit, a crash, or out of memory?)")
        return reply

    def _signal(self, number: int) -> None:
        """Signal the sandbox's session, and (sealed) every process of its user."""
        try:
            os.killpg(self.pid, number)
        except (ProcessLookupError, PermissionError):
            pass
        if self.sandbox.sealed:
            signal_user(self.sandbox.uid, number)

    def close(self) -> None:
        self.channel.close()
        self._signal(signal.SIGKILL)
        if self.sandbox.sealed:
            remove_user_files(self.sandbox.uid)
        remove_tree(self.tree)


def kill_spawned(work: Path, sandbox: Sandbox) -> None:
    """Kill every sandbox a judge started in work (its session), and every process of the
    sandbox user: what a judge that died could not close."""
    try:
        pids = [int(line) for line in (work / SPAWNED).read_text().split()]
    except (OSError, ValueError):
        pids = []
    for pid in pids:
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    if sandbox.sealed:
        signal_user(sandbox.uid, signal.SIGKILL)
        remove_user_files(sandbox.uid)


def signal_user(uid: int, number: int) -> None:
    """Send every process of uid the signal. A SIGKILL is sent again, after a SIGSTOP,
    until none is left (a process that keeps forking gets a new pid at every step)."""
    for _ in range(100 if number == signal.SIGKILL else 1):
        found = 0
        for entry in os.scandir("/proc"):
            if entry.name.isdigit():
                try:
                    if entry.stat().st_uid == uid:
                        if number == signal.SIGKILL:  # stopped first, it forks no more
                            os.kill(int(entry.name), signal.SIGSTOP)
                        os.kill(int(entry.name), number)
                        found += 1
                except (OSError, ProcessLookupError):
                    pass
        if not found:
            break


def scrub(folder: Path) -> None:
    """Remove under folder everything but plain files and folders: links (a link could
    point the judge at a file the sandbox cannot read), FIFOs (which block a reader),
    sockets, devices, and files with a second hard link."""
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            path = os.path.join(root, name)
            try:
                info = os.lstat(path)
            except OSError:
                continue
            plain = stat.S_ISDIR(info.st_mode) or (stat.S_ISREG(info.st_mode)
                                                   and info.st_nlink == 1)
            if not plain:
                try:
                    os.unlink(path)
                except OSError:
                    pass


def remove_user_files(uid: int) -> None:
    """Delete what the sandbox user left in any world-writable folder of the machine, and
    its System V IPC objects, so that nothing of one test reaches a later one."""
    for folder in world_writable_folders():
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
    remove_user_ipc(uid)


def remove_user_ipc(uid: int) -> None:
    """Remove the System V shared memory, semaphores and message queues uid owns."""
    libc = ctypes.CDLL(None, use_errno=True)
    ipc_rmid = 0
    for kind, remove in (("shm", libc.shmctl), ("sem", libc.semctl), ("msg", libc.msgctl)):
        try:
            lines = Path(f"/proc/sysvipc/{kind}").read_text().splitlines()
        except OSError:
            continue
        header = lines[0].split() if lines else []
        if "id" not in header or "uid" not in header:
            continue
        for line in lines[1:]:
            fields = line.split()
            if int(fields[header.index("uid")]) == uid:
                ident = int(fields[header.index("id")])
                if kind == "sem":
                    remove(ident, 0, ipc_rmid)
                else:
                    remove(ident, ipc_rmid, None)
