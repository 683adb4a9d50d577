"""The sandbox process: where submission code runs, receiving and returning only data.

Runs only in a sandbox, a process a judge's warden (course/grading/warden.py) forks for one
graded test, over a copy of the submission's tree. The grader (course/grading/grade.py) and
its judges never run submission code. The warden was forked from its judge before the judge
read a test, and the judge from the zygote, a fresh interpreter that the grader starts before
it reads anything secret (hidden tests, reference solutions, bands, rubric): no sandbox ever
holds those in its memory. Before it serves a request, a sandbox

  - starts a session of its own, with limits on file size, core dumps, open files, address
    space, processes and threads (provided/limits.py, which --check applies too: a pool
    sized by the CPU count of a 256-core machine fits);
  - drops root for an unprivileged user of its own (`hw-sandbox`, course/grading/
    accounts.py), so that the grading files, the results and other submissions are out of
    its reach, and dies with its warden;
  - restricts its file system with Landlock (course/grading/landlock.py: it reads only its
    tree, its test's folders, the Python environment and the system's programs, libraries
    and configuration; it writes only its tree, its test's folders and /dev/shm, where
    multiprocessing keeps its locks; scoped, where the kernel can, to its own abstract Unix
    sockets and processes) and installs a default-deny syscall policy
    (course/grading/syscalls.py): no network socket, and Unix sockets only where none it
    makes can reach outside it (unix_sockets_contained; socket pairs always);
  - keeps one file descriptor, its channel to its warden, and sends /dev/null its output;
  - imports only its tree: the submission's files (the given code as the handout has it)
    and the public test helpers. No test file enters it.

This is the one isolation of every grading, the one Gradescope's container allows (root,
Docker's default capabilities and seccomp profile, no writable cgroup, no namespaces). It
then answers the judge's requests, which its warden passes on (tests/seam.py: import, get an
attribute, call, ...), until the channel closes. Between requests it is stopped (every
process of its user stopped by SIGSTOP at once, then checked until none runs, which holds
because the policy refuses ptrace), so that it cannot touch the files the judge reads;
during a request what it holds is measured, and over its budget it is killed; after the
test, every process of its user is killed and what it left in any world-writable folder
removed (course/grading/warden.py).
"""

import ctypes
import os
import resource
import signal
import socket
import sys
from pathlib import Path

from course.grading import landlock, syscalls
from course.grading.paths import REPO_ROOT, forget_repository_modules
from provided.limits import (  # noqa: F401 (MAX_FILE_BYTES: the sandbox's, as the kit reads it)
    ENVIRONMENT,
    MAX_FILE_BYTES,
    MAX_PROCESSES,
    limit,
    limit_resources,
)

DEBUG = bool(os.environ.get("GRADE_DEBUG"))  # sandboxes keep the grader's stderr
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_CHILD_SUBREAPER = 1, 4, 36
POSIX_IPC = ("/dev/shm",)  # writable: multiprocessing's locks and queues (POSIX semaphores)
CONTAINER_MARKS = ("/.dockerenv", "/run/.containerenv")  # Docker's (Gradescope's), podman's


def _works_in_a_child(attempt) -> bool:
    pid = os.fork()
    if pid == 0:
        os._exit(0 if attempt() else 1)
    _, status = os.waitpid(pid, 0)
    return os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


def _refused() -> bool:
    """Whether, after the syscall policy is installed, a new socket is refused (it works)."""
    if not syscalls.install():
        return False
    try:
        socket.socket(socket.AF_INET, socket.SOCK_STREAM).close()
    except OSError:
        return True
    return False


def isolation() -> str:
    """The isolation sandboxes get here, in words (the policy tried in a throwaway child)."""
    container = any(os.path.exists(mark) for mark in CONTAINER_MARKS)
    words = ["as root" + (" in a container" if container else "")]
    version = landlock.abi()
    if version:
        scoped = ("; connects to no abstract Unix socket and signals no process made outside "
                  "it" if version >= landlock.SCOPED_ABI else
                  "; no scoping in this kernel (before 6.12): a sandbox makes no Unix socket, "
                  "only socket pairs")
        words.append(f"Landlock ABI {version} (reads only its tree, its test's folders, "
                     "the Python environment and the system's programs, libraries and "
                     f"configuration; writes only the first two and /dev/shm{scoped})")
    else:
        words.append("NO Landlock here (a kernel older than 5.13, or it is disabled): a sandbox "
                     "reads whatever its user may, another checkout of this repository included")
    if _works_in_a_child(_refused):
        words.append("a default-deny syscall policy (libseccomp: no network socket, Unix "
                     "sockets only where contained, no ptrace, no namespace, no mount, no "
                     "io_uring)")
    else:
        words.append("NO syscall policy: libseccomp (pyseccomp) is missing or seccomp is "
                     "refused here")
    words.append("stopped between calls by SIGSTOP to every process of its user at once "
                 "(kill(-1) as that user) until none runs (ptrace refused)")
    words.append("judges run as their own users (hw-judge), a root warden beside each")
    return "; ".join(words)


def unix_sockets_contained(landlock_version: int) -> bool:
    """Whether no Unix socket a sandbox makes can reach a socket outside it, so that its
    policy may allow socket(AF_UNIX) (multiprocessing's Manager, Listener and forkserver,
    torch's tensor handoff). Abstract names: Landlock's scoping (ABI 6) keeps it from
    connecting to one made outside its domain. Names in the file system: connecting needs
    write permission on the socket's file, which a sandbox's user (hw-sandbox..., no
    supplementary group) has on world-writable sockets alone; the grader's one, the
    zygote's, is root's alone and refuses any process under a syscall policy
    (zygote.allowed). Where this is False (a kernel before 6.12), the sandbox makes socket
    pairs only: asyncio, threads, fork and spawn pools, Pipe and Queue work; a Manager and
    the forkserver start method do not."""
    return landlock_version >= landlock.SCOPED_ABI


def tensors_by_value() -> None:
    """Let a tensor cross between processes (a DataLoader's workers, a multiprocessing
    queue) by value where the sandbox makes no Unix socket: torch's own handoff shares memory
    by sending a descriptor over one, so its reducers leave multiprocessing's pickler and
    tensors pickle as they do with pickle itself (the same values arrive, copied)."""
    from multiprocessing.reduction import ForkingPickler

    for kind in [k for k in ForkingPickler._extra_reducers if k.__module__.startswith("torch")]:
        del ForkingPickler._extra_reducers[kind]


def prepare() -> str:
    """Run once in the zygote, before any fork: the syscall policy, built once for every
    sandbox to inherit; the isolation in words, for the grader's first lines."""
    syscalls.policy(unix_sockets=False)
    syscalls.policy(unix_sockets=True)
    return isolation()


def main(request: dict, fd: int) -> None:
    """The forked sandbox: seal itself, then answer the judge's requests on the socket fd
    (the seam's server, tests/seam.py of its own tree). Never returns."""
    try:
        os.setsid()
        # orphans of its processes become its children, not init's: their CPU time stays
        # where the grader counts it (course/grading/judges.py, Meter), as zombies or reaped
        ctypes.CDLL(None).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        os.dup2(fd, 3)
        null = os.open(os.devnull, os.O_RDWR)
        for target in (0, 1) if DEBUG else (0, 1, 2):
            os.dup2(null, target)
        os.closerange(4, 65536)
        limit_resources()
        try:  # out of memory, the kernel kills the sandbox first
            Path("/proc/self/oom_score_adj").write_text("1000")
        except OSError:
            pass
        limit(resource.RLIMIT_NPROC, MAX_PROCESSES)  # per user: a fork bomb stops
        os.setgroups([])
        os.setgid(request["gid"])
        os.setuid(request["uid"])
        # dumpable again (a change of user made it not): its warden, with this user's
        # file-system identity, reads what its processes hold (warden.held)
        ctypes.CDLL(None).prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)
        # it dies with its warden (set after the change of user, which clears it)
        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        version = landlock.restrict([request["tree"], *request.get("shared", []),
                                     *[f for f in POSIX_IPC if os.path.isdir(f)]])
        unix_sockets = unix_sockets_contained(version)
        syscalls.install(unix_sockets)
        if not unix_sockets:
            tensors_by_value()
        tree = request["tree"]
        os.chdir(tree)
        os.environ.clear()
        os.environ.update({**request["env"], **ENVIRONMENT})
        import tempfile

        tempfile.tempdir = None
        forget_repository_modules()  # the grader's own (provided/limits.py, tests/seam.py)
        sys.path[:] = [tree] + [p for p in sys.path if p not in ("", ".", str(REPO_ROOT))]
        sys.argv = ["sandbox"]
        from tests import seam

        seam.serve(socket.socket(fileno=3))
    except BaseException:
        if DEBUG:
            import traceback

            traceback.print_exc()
    finally:
        os._exit(0)
