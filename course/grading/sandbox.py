"""The sandbox process: where submission code runs, receiving and returning only data.

Runs only in a sandbox, a process the zygote (course/grading/zygote.py) forks at a judge's
request (course/grading/judge.py's SandboxTransport, over a tree its warden made). The
grader (course/grading/grade.py) and its judges never run submission code; each graded test
that calls the submission gets a sandbox of its own. The zygote is a fresh Python
interpreter that the grader starts before it reads anything secret (hidden tests, reference
solutions, bands, rubric), so no sandbox ever holds those in its memory. Before it serves a
request, a sandbox

  - joins the cgroup its warden made for it (cgroup v2, where the machine lets root make
    one), so that every process it starts can be frozen and killed at once;
  - starts a session of its own, with limits on file size, core dumps, open files, address
    space and (sealed) processes and threads (provided/limits.py, which --check applies
    too: a pool sized by the CPU count of a 256-core machine fits);
  - when the grader runs as root (sealed): enters new network, IPC, mount and pid
    namespaces where the kernel allows it (no network at all, no System V IPC shared with
    anything, a private tmpfs over each world-writable folder but the one holding its tree,
    the grading repository's folders and the zygote's covered by empty ones, and every
    process it starts killed with it), then drops to an unprivileged user of its own (`hw-sandbox`,
    course/grading/users.py), so that the grading files, the results and other submissions
    are out of its reach;
  - restricts its file system with Landlock (course/grading/landlock.py: it reads only its
    tree, its test's folders, the Python environment and the system's programs, libraries
    and configuration; it writes only its tree, its test's folders and /dev/shm, where
    multiprocessing keeps its locks; scoped, where the kernel can, to its own abstract Unix
    sockets and processes) and installs a default-deny syscall policy
    (course/grading/syscalls.py), sealed or not: no network socket, and Unix sockets only
    where none it makes can reach outside it (unix_sockets_contained; socket pairs always);
  - keeps one file descriptor, its channel to its warden, and sends /dev/null its output;
  - imports only its tree: the submission's files (the given code as the handout has it)
    and the public test helpers. No test file enters it.

It then answers the judge's requests, which its warden passes on (tests/seam.py: import, get
an attribute, call, ...), until the channel closes. Between requests it is stopped (its
cgroup frozen; without one, every process of its user stopped by SIGSTOP at once, then
checked until none runs, which holds because the policy refuses ptrace), so that it cannot
touch the files the judge reads; during a request its disk use is measured, and over its
budget it is killed; after the test, everything of its cgroup and its user is killed and
what it left in any world-writable folder removed (course/grading/warden.py).
"""

import ctypes
import os
import resource
import socket
import sys
from pathlib import Path

from course.grading import landlock, syscalls
from course.grading.users import world_writable_folders
from course.grading.warden import DISK_BYTES, DISK_FILES, cgroup_root
from provided.limits import (  # noqa: F401 (MAX_FILE_BYTES: the sandbox's, as the kit reads it)
    ENVIRONMENT,
    MAX_FILE_BYTES,
    MAX_PROCESSES,
    limit,
    limit_resources,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
DEBUG = bool(os.environ.get("GRADE_DEBUG"))  # sandboxes keep the grader's stderr
CLONE_NEWNS, CLONE_NEWIPC, CLONE_NEWPID, CLONE_NEWNET = (0x00020000, 0x08000000,
                                                       0x20000000, 0x40000000)
NAMESPACES = CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWPID | CLONE_NEWNET
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
PR_SET_DUMPABLE, PR_SET_CHILD_SUBREAPER = 4, 36
MS_BIND, MS_REC, MS_PRIVATE = 0x1000, 0x4000, 0x40000
POSIX_IPC = ("/dev/shm",)  # writable: multiprocessing's locks and queues (POSIX semaphores)


def _unshare(flags: int) -> bool:
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.unshare(flags) == 0


def _mount(source: str, target: str, kind: str | None, flags: int, data: str = "") -> bool:
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.mount(source.encode(), target.encode(), kind.encode() if kind else None,
                      flags, data.encode() or None) == 0


def private_scratch(tree: str, shared: list[str], zygote: str) -> None:
    """In the sandbox's own mount namespace: a fresh, empty tmpfs over every world-writable
    folder that holds neither the sandbox's tree nor a folder the judge shares with it (what
    the sandbox writes there vanishes with it); over every top-level folder of the grading
    repository that neither the tree nor Python needs, and over the folder of the zygote's
    socket (zygote), an empty read-only tmpfs, and over every top-level file, /dev/null."""
    _mount("none", "/", None, MS_REC | MS_PRIVATE)
    needed = [tree, *shared, sys.prefix, sys.base_prefix]
    inside = lambda folder: any(Path(n).is_relative_to(folder) for n in needed)  # noqa: E731
    for folder in world_writable_folders():
        if not inside(folder):
            _mount("tmpfs", folder, "tmpfs", MS_NOSUID | MS_NODEV,
                   f"size=64m,nr_inodes={DISK_FILES},mode=1777")
    for entry in [*REPO_ROOT.iterdir(), Path(zygote).parent]:
        if entry.is_symlink() or inside(str(entry)):
            continue
        if entry.is_dir():
            _mount("tmpfs", str(entry), "tmpfs", MS_NOSUID | MS_NODEV | MS_RDONLY,
                   "size=4k,mode=000")
        elif entry.is_file():
            _mount("/dev/null", str(entry), None, MS_BIND)


def private_ipc_limits() -> None:
    """In the sandbox's own IPC namespace, whose System V objects the warden cannot see
    (course/grading/warden.py counts them where the sandbox shares the grader's): its
    shared memory capped at the disk budget, its message queues at 16 of the kernel's
    default size."""
    for name, value in (("shmall", DISK_BYTES // os.sysconf("SC_PAGE_SIZE")),
                        ("shmmax", DISK_BYTES), ("msgmni", 16)):
        try:
            Path(f"/proc/sys/kernel/{name}").write_text(str(value))
        except OSError:
            pass


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


def isolation_available() -> tuple[bool, str]:
    """(whether sandboxes enter new namespaces, the isolation in words): each way tried in
    a throwaway child."""
    namespaces = os.geteuid() == 0 and _works_in_a_child(
        lambda: _unshare(NAMESPACES) and _mount("none", "/", None, MS_REC | MS_PRIVATE))
    policy = _works_in_a_child(_refused)
    freezer = cgroup_root() is not None
    words = [mode(namespaces, freezer)]
    if namespaces:
        words.append("network, IPC, mount and pid namespaces (no network, private System V "
                     "IPC, a private tmpfs over every world-writable folder, the grading "
                     "repository covered, every process killed with the sandbox)")
    if landlock.abi():
        scoped = ("; connects to no abstract Unix socket and signals no process made outside "
                  "it" if landlock.abi() >= landlock.SCOPED_ABI else
                  "; no scoping in this kernel (before 6.12): a sandbox without a network "
                  "namespace makes no Unix socket, only socket pairs")
        words.append(f"Landlock ABI {landlock.abi()} (reads only its tree, its test's folders, "
                     "the Python environment and the system's programs, libraries and "
                     f"configuration; writes only the first two and /dev/shm{scoped})")
    else:
        words.append("NO Landlock here (a kernel older than 5.13, or it is disabled): a sandbox "
                     "reads whatever its user may, another checkout of this repository included")
    if policy:
        words.append("a default-deny syscall policy (libseccomp: no network socket, Unix "
                     "sockets only where contained, no ptrace, no namespace, no mount, no "
                     "io_uring)")
    else:
        words.append("NO syscall policy: libseccomp (pyseccomp) is missing or seccomp is "
                     "refused here")
    if freezer:
        words.append("a cgroup v2 of its own (frozen between calls, killed whole)")
    else:
        words.append("no writable cgroup v2: stopped between calls by SIGSTOP to every process "
                     "of its user at once (kill(-1) as that user) until none runs (ptrace "
                     "refused)")
    if os.geteuid() != 0:
        words.append("not running as root: sandboxes run as the grader's own user, unsealed")
    else:
        words.append("judges run as their own users (hw-judge), a root warden beside each")
    return namespaces, "; ".join(words)


def mode(namespaces: bool, freezer: bool) -> str:
    """The grading mode in a few words: who the grader runs as, in what, with what."""
    if os.geteuid() != 0:
        return "mode: not root (unsealed)"
    container = " in a container" if os.path.exists("/run/.containerenv") else ""
    if namespaces:
        return f"mode: root{container} with namespaces" + (" and a cgroup freezer" * freezer)
    return (f"mode: root{container} without namespaces (no CAP_SYS_ADMIN, or a seccomp profile "
            "refusing unshare), " + ("a cgroup freezer" if freezer else
                                     "no writable cgroup fs (Gradescope's container)"))


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


def join_cgroup(cgroup: str | None) -> None:
    """Move this process (a sandbox, still root) into its cgroup, before it starts
    anything: every process it starts is then in it too. Only a folder the warden made (a
    child of a cgroup2 mount named hw-sandbox-...) is joined."""
    if not cgroup:
        return
    folder = Path(cgroup)
    if not folder.name.startswith("hw-sandbox-") or ".." in folder.parts:
        return
    try:
        (folder / "cgroup.procs").write_text("0")
    except OSError:
        pass


def unix_sockets_contained(sealed: bool, own_network: bool, landlock_version: int) -> bool:
    """Whether no Unix socket a sandbox makes can reach a socket outside it, so that its
    policy may allow socket(AF_UNIX) (multiprocessing's Manager, Listener and forkserver,
    torch's tensor handoff). Abstract names: its own network namespace holds them, or
    Landlock's scoping (ABI 6) keeps it from connecting to one made outside its domain.
    Names in the file system: connecting needs write permission on the socket's file, which
    a sealed sandbox's user (hw-sandbox..., no supplementary group) has on world-writable
    sockets alone; the grader's one, the zygote's, is covered by an empty folder where the
    sandbox has a mount namespace, and refuses sandbox users and any process under a syscall
    policy (zygote.allowed). Unsealed, a socket in the file system would reach whatever the
    grader's own user can (its session bus, a container engine's socket), which no Landlock
    right of these kernels governs. Where this is False (unsealed; sealed without a network
    namespace on a kernel before 6.12), the sandbox makes socket pairs only: asyncio,
    threads, fork and spawn pools, Pipe and Queue work; a Manager and the forkserver start
    method do not."""
    return sealed and (own_network or landlock_version >= landlock.SCOPED_ABI)


def tensors_by_value() -> None:
    """Let a tensor cross between processes (a DataLoader's workers, a multiprocessing
    queue) by value where the sandbox makes no Unix socket: torch's own handoff shares memory
    by sending a descriptor over one, so its reducers leave multiprocessing's pickler and
    tensors pickle as they do with pickle itself (the same values arrive, copied)."""
    from multiprocessing.reduction import ForkingPickler

    for kind in [k for k in ForkingPickler._extra_reducers if k.__module__.startswith("torch")]:
        del ForkingPickler._extra_reducers[kind]


def prepare() -> dict:
    """Run once in the zygote, before any fork: what every sandbox inherits (the
    world-writable folders, found once, and the syscall policy, built once) and what the
    kernel allows here, for main's
    requests and the grader's first lines."""
    namespaces, isolation = isolation_available()
    world_writable_folders()
    syscalls.policy(unix_sockets=False)
    syscalls.policy(unix_sockets=True)
    return {"namespaces": namespaces, "isolation": isolation}


def main(request: dict, fd: int, facts: dict) -> None:
    """The forked sandbox: seal itself, then answer the judge's requests on the socket fd
    (the seam's server, tests/seam.py of its own tree). Never returns."""
    try:
        join_cgroup(request.get("cgroup"))
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
        uid, gid = request.get("uid"), request.get("gid")
        own_network = False
        if uid is not None:
            own_network = facts["namespaces"] and _unshare(NAMESPACES)
            if own_network:
                private_ipc_limits()
                private_scratch(request["tree"], request.get("shared", []), facts["zygote"])
                _become_init()
            limit(resource.RLIMIT_NPROC, MAX_PROCESSES)  # per user: a fork bomb stops
            os.setgroups([])
            os.setgid(gid)
            os.setuid(uid)
            # dumpable again (a change of user made it not): its warden, with this user's
            # file-system identity, reads what its processes hold (warden.held)
            ctypes.CDLL(None).prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)
        version = landlock.restrict([request["tree"], *request.get("shared", []),
                                     *[f for f in POSIX_IPC if os.path.isdir(f)]])
        unix_sockets = unix_sockets_contained(uid is not None, own_network, version)
        syscalls.install(unix_sockets)
        if not unix_sockets:
            tensors_by_value()
        tree = request["tree"]
        os.chdir(tree)
        os.environ.clear()
        os.environ.update({**request["env"], **ENVIRONMENT})
        import tempfile

        tempfile.tempdir = None
        for name in [n for n in sys.modules if n.split(".")[0] == "provided"]:
            del sys.modules[name]  # the grader's own (provided/limits.py): the tree's instead
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
