"""The sandbox users, their trees and what they leave behind: who a sandbox runs as, the
folders it works in, and the cleanup after it.

Runs in the grader (a user reserved per job, the trees written, every process of the user
killed after a judge) and in the judges (a test's tree given to the user, its processes
signalled, its files removed after the test). World-writable folders are found once, in the
zygote (course/grading/zygote.py), which every sandbox and judge inherits the list from.
"""

import ctypes
import fcntl
import functools
import os
import pwd
import shutil
import signal
import stat
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

SANDBOX_USER = "hw-sandbox"
JUDGE_USER = "hw-judge"  # what a judge runs as once its warden is forked (judge.py)
SCRATCH_FOLDERS = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock", "/var/lock")
NOT_SCANNED = ("/proc", "/sys", "/dev")  # no folder a sandbox could leave a file in ...
DEVICE_SCRATCH = ("/dev/shm", "/dev/mqueue")  # ... but these
SPAWNED = "sandboxes.txt"  # in a judge's work folder: the pid of every sandbox it started
POOL = 4  # sandbox users per judge, taken in turn: consecutive tests never share a user
MAX_USERS = 64  # hw-sandbox, hw-sandbox1, ... on one machine


@dataclass(frozen=True)
class Sandbox:
    """Who a sandbox runs as: uid/gid of the sandbox user, or None when not root."""
    uid: int | None = None
    gid: int | None = None
    lock: int | None = None  # the open lock file that reserves the user for this grader

    @property
    def sealed(self) -> bool:
        return self.uid is not None


def sandbox_user(base: str = SANDBOX_USER) -> Sandbox:
    """A sandbox user of this grader's own when running as root, else an unsealed Sandbox
    (sandboxes then run as the grader's own user). Graders running side by side each lock
    a user of their own (hw-sandbox, hw-sandbox1, ...; made with useradd if missing),
    since a grader kills every process of its user after each test. base names another
    kind of user (JUDGE_USER: a judge's)."""
    if os.geteuid() != 0:
        return Sandbox()
    locks = Path("/run/lock") if Path("/run/lock").is_dir() else Path("/var/lock")
    for slot in range(MAX_USERS):
        name = base + (str(slot) if slot else "")
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
    raise RuntimeError(f"all {MAX_USERS} sandbox users are taken by graders running as root "
                       "on this machine")


def sandbox_pool(size: int = POOL) -> list[Sandbox]:
    """size sandbox users of this grader's own, for one judge: its tests' sandboxes take
    them in turn, so that no sandbox can signal, trace or read what the test before it left
    (each user also has a process limit of its own, RLIMIT_NPROC: a fork bomb that outlives
    its test costs nothing to the next)."""
    return [sandbox_user() for _ in range(size)]


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


def kill_spawned(work: Path, pool: list[Sandbox]) -> None:
    """Kill every sandbox a judge started in work (its session), and every process of its
    sandbox users: what a judge that died could not close."""
    try:
        pids = [int(line) for line in (work / SPAWNED).read_text().split()]
    except (OSError, ValueError):
        pids = []
    for pid in pids:
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    for sandbox in pool:
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
    """Remove the System V shared memory, semaphores and message queues uid owns, as uid
    itself in a forked child: root without CAP_SYS_ADMIN (Gradescope's container) may not
    remove another user's objects, their owner may (a child forked only when there are
    some)."""
    if not _own_ipc(uid):
        return
    pid = os.fork()
    if pid == 0:
        try:
            os.setgroups([])
            os.setuid(uid)
            _remove_own_ipc(uid)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)


IPC_KINDS = (("shm", "shmid"), ("sem", "semid"), ("msg", "msqid"))  # /proc/sysvipc's


def _own_ipc(uid: int) -> list[tuple[str, int]]:
    """(kind, id) of every System V object uid owns, from /proc/sysvipc."""
    found = []
    for kind, column in IPC_KINDS:
        try:
            lines = Path(f"/proc/sysvipc/{kind}").read_text().splitlines()
        except OSError:
            continue
        header = lines[0].split() if lines else []
        if column not in header or "uid" not in header:
            continue
        for line in lines[1:]:
            fields = line.split()
            if int(fields[header.index("uid")]) == uid:
                found.append((kind, int(fields[header.index(column)])))
    return found


def _remove_own_ipc(uid: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    ipc_rmid = 0
    for kind, ident in _own_ipc(uid):
        if kind == "sem":
            libc.semctl(ident, 0, ipc_rmid)
        else:
            {"shm": libc.shmctl, "msg": libc.msgctl}[kind](ident, ipc_rmid, None)
