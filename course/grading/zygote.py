"""The zygote: a fork server that shares its imported libraries with every judge, and through
them with every sandbox.

Runs as its own process, a fresh Python interpreter that the grader (course/grading/grade.py)
starts before it reads anything secret, so that nothing forked from it holds a hidden test,
a reference solution, a band or the rubric in its memory. It imports torch, numpy and the
other libraries once, then imports each entry of ENTRIES by name and finds once what the
kernel allows a sandbox here (course/grading/sandbox.py's prepare), and from then on only
forks: one child per request on its Unix socket, which runs the named entry's
`main(request, fd)`. A judge forks its warden, and the warden each test's sandbox
(course/grading/warden.py), so every sandbox shares these pages too. The socket is root's
alone, and it forks nothing for a process under a syscall policy (allowed): only the
grader, and the recomputation it starts, ask it for anything.

`Zygote` is the grader's handle on it: it starts the zygote and asks it for children
(Zygote.at: the same, for a process of the grader's that did not start it).
"""

import ctypes
import importlib
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile

from course.grading.paths import REPO_ROOT

# what a child of the zygote may be: its module, which has main(request, fd)
ENTRIES = {"judge": "course.grading.judge", "weights": "course.grading.weights"}
# imported once by the zygote, for every sandbox to share: what the code under test uses
# (torch._dynamo is what an optimizer's first step imports: 1.5 CPU-seconds, 70 MB); a
# sandbox that draws a figure imports matplotlib itself
PRELOADED = ("torch", "torch._dynamo", "torch.optim", "torch.utils.data", "numpy",
             "rdkit.Chem", "tqdm")
# ... and what the judges, also forked from the zygote, use besides
JUDGE_PRELOADED = ("pytest", "_pytest.timing", "pytest_timeout", "hypothesis",
                   "matplotlib.pyplot")
PR_SET_PDEATHSIG, PR_SET_CHILD_SUBREAPER = 1, 36


def zygote_main(path: str) -> None:
    """The zygote: import the libraries and the entries, then fork one child per request on
    the Unix socket at path. Started by Zygote() as a fresh interpreter; it dies with the
    grader that started it, however that one ends."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    os.environ.setdefault("MPLBACKEND", "Agg")
    for name in PRELOADED + JUDGE_PRELOADED:
        importlib.import_module(name)
    import torch

    torch.set_num_threads(1)
    entries = {kind: importlib.import_module(module) for kind, module in ENTRIES.items()}
    isolation = importlib.import_module("course.grading.sandbox").prepare()
    import gc

    gc.collect()
    gc.freeze()  # the collector leaves the libraries' objects alone: fewer copied pages
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel
    # ... and so are orphans: a process a sandbox left, once the sandbox is gone, is
    # reparented here, not to the machine's init
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    os.chmod(path, 0o600)
    listener.listen(64)
    print(json.dumps({"ready": True, "isolation": isolation}), flush=True)
    while True:
        connection, _ = listener.accept()
        with connection:
            try:
                data, fds, _, _ = socket.recv_fds(connection, 65536, 1)
                request = json.loads(data)
                if not allowed(connection):
                    continue
                entry = entries[request.pop("entry")]
            except (OSError, ValueError, KeyError, TypeError, AttributeError):
                continue
            if not fds:
                continue
            pid = os.fork()
            if pid == 0:
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                listener.close()
                connection.close()
                try:
                    entry.main(request, fds[0])
                finally:
                    os._exit(0)
            os.close(fds[0])
            try:
                connection.sendall(json.dumps({"pid": pid}).encode())
            except OSError:
                pass


def allowed(connection: socket.socket) -> bool:
    """Whether the peer may ask for a child: root (the grader), and nothing under a syscall
    policy the zygote lacks (a sandbox, a weights reader, or anything they started: a filter
    is inherited and never removed)."""
    pid, uid, _ = struct.unpack("3i", connection.getsockopt(
        socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
    return uid == 0 and _filters(pid) == _filters(os.getpid())


def _filters(pid: int) -> str | None:
    """The seccomp filters process pid runs under, as /proc counts them (its mode, and their
    number where the kernel says, Linux 5.9 and newer); None where it cannot be read (the
    process is gone). A peer's pid is the one it had when it connected, which it may since
    have left to another process: the check by user does not rest on it."""
    try:
        with open(f"/proc/{pid}/status") as status:
            return " ".join(line.split(":", 1)[1].strip() for line in status
                            if line.startswith(("Seccomp:", "Seccomp_filters:")))
    except (OSError, IndexError):
        return None


class Zygote:
    """A handle on the zygote process: the grader's (which started it), or another process
    of the grader's (at)."""

    process = None

    @classmethod
    def at(cls, path: str) -> "Zygote":
        """The zygote listening at path, started by someone else."""
        zygote = cls.__new__(cls)
        zygote.path = path
        return zygote

    def __init__(self):
        self.folder = tempfile.mkdtemp(prefix="grade_zygote_")  # root's alone (0700)
        self.path = os.path.join(self.folder, "zygote.sock")
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "OMP_NUM_THREADS": "1",
               "MPLBACKEND": "Agg", "PYTHONDONTWRITEBYTECODE": "1", "LANG": "C.UTF-8"}
        self.process = subprocess.Popen(
            [sys.executable, "-c", "import sys; from course.grading.zygote import zygote_main; "
             "zygote_main(sys.argv[1])", self.path], cwd=REPO_ROOT, env=env,
            stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
        line = self.process.stdout.readline()
        try:
            self.isolation = json.loads(line)["isolation"]
        except (ValueError, KeyError) as err:
            raise RuntimeError("the sandbox zygote did not start") from err

    def fork(self, entry: str, request: dict, fd: int) -> int:
        """Fork a child that runs ENTRIES[entry]'s main(request, fd); its pid. The
        child owns a copy of fd (this process keeps its own)."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
            connection.connect(self.path)
            socket.send_fds(connection, [json.dumps({**request, "entry": entry}).encode()],
                            [fd])
            reply = connection.recv(4096)
        return int(json.loads(reply)["pid"])

    def close(self) -> None:
        """End the zygote, and remove its folder."""
        self.process.kill()
        self.process.wait()
        shutil.rmtree(self.folder)
