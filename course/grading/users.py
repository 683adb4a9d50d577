"""What a sandbox user holds and leaves behind: who a sandbox runs as, root's walks over the
folders it wrote, its processes stopped, continued and killed, and the cleanup after it.

Runs in the judges' wardens (course/grading/warden.py: a test's tree and folders given to its
user and back through file descriptors, its processes stopped between calls, its files and
System V objects removed after the test) and, for a judge that died before its warden could
clean up, in the grader (end_users). The grader's accounts, the users it reserves, are
course/grading/accounts.py's. World-writable folders are found once, by the grader, which
gives the list to each judge's warden.
"""

import ctypes
import functools
import os
import platform
import signal
import stat
import threading
import time
from dataclasses import dataclass
from pathlib import Path

SCRATCH_FOLDERS = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock", "/var/lock")
NOT_SCANNED = ("/proc", "/sys", "/dev")  # no folder a sandbox could leave a file in ...
DEVICE_SCRATCH = ("/dev/shm", "/dev/mqueue")  # ... but these


@dataclass(frozen=True)
class Sandbox:
    """A user a sandbox (or a judge, or a weights reader) runs as: its uid and gid."""
    uid: int
    gid: int
    lock: int | None = None  # the open lock file that reserves the user for this grader


# ------------------------------------------------------ root's walks, through descriptors
# Root walks folders that a sandbox could have written (its tree, its test's folders) to
# give them away, scrub them and remove them. Every walk goes through file descriptors: a
# folder is opened relative to its parent's descriptor without following a link, an entry is
# opened with O_PATH | O_NOFOLLOW and checked with fstat before anything is done to it, so
# that no rename or link swapped in by a process still running redirects root to a file
# outside the tree.
MAX_DEPTH = 64  # deeper folders are removed whole, never walked
AT_EMPTY_PATH = 0x1000
_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_libc = ctypes.CDLL(None, use_errno=True)


def open_folder(path: str | Path, dir_fd: int | None = None) -> int:
    """A descriptor of the folder at path (relative to dir_fd if given), never through a
    link at its last component; OSError if it is not a folder."""
    return os.open(path, _FOLDER, dir_fd=dir_fd)


def _chown_fd(fd: int, uid: int, gid: int) -> None:
    """Change the owner of what the O_PATH descriptor fd is (a link itself, if one)."""
    if _libc.fchownat(fd, b"", uid, gid, AT_EMPTY_PATH) != 0:
        raise OSError(ctypes.get_errno(), "fchownat")


def _entries(fd: int) -> list[str]:
    try:
        with os.scandir(fd) as found:
            return [entry.name for entry in found]
    except OSError:
        return []


def walk_fd(top: int, visit, depth: int = 0) -> None:
    """visit(dir_fd, name, fd, info) for every entry beneath the open folder top (folders
    before their contents), fd an O_PATH descriptor of the entry and info its fstat; a
    folder deeper than MAX_DEPTH is removed with what it holds instead. visit may return
    "gone" (it removed the entry)."""
    for name in _entries(top):
        try:
            fd = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=top)
        except OSError:
            continue
        try:
            info = os.fstat(fd)
            if visit(top, name, fd, info) == "gone" or not stat.S_ISDIR(info.st_mode):
                continue
            if depth >= MAX_DEPTH:
                remove_entry(top, name)
                continue
            try:
                inner = open_folder(name, top)
            except OSError:
                continue
            try:
                if os.path.samestat(os.fstat(inner), info):
                    walk_fd(inner, visit, depth + 1)
            finally:
                os.close(inner)
        finally:
            os.close(fd)


def give(folder: Path | int, owner: Sandbox, owners: set[int]) -> None:
    """Make folder (a path or an open descriptor) and everything under it owner's: only
    what one of owners owns (never a file of root's or another user's that a link or a
    rename put there) and, but for folders, only what has a single link."""
    def visit(_dir_fd, _name, fd, info) -> None:
        plain = stat.S_ISDIR(info.st_mode) or info.st_nlink == 1
        if info.st_uid in owners and info.st_uid != owner.uid and plain:
            try:
                _chown_fd(fd, owner.uid, owner.gid)
            except OSError:
                pass

    top = folder if isinstance(folder, int) else open_folder(folder)
    try:
        visit(None, ".", top, os.fstat(top))
        walk_fd(top, visit)
    finally:
        if not isinstance(folder, int):
            os.close(top)


def scrub(folder: int) -> None:
    """Remove beneath the open folder everything but plain files and folders: links (a
    link could point the judge at a file the sandbox cannot read), FIFOs (which block a
    reader), sockets, devices, and files with a second hard link."""
    def visit(dir_fd, name, _fd, info) -> str | None:
        plain = stat.S_ISDIR(info.st_mode) or (stat.S_ISREG(info.st_mode)
                                               and info.st_nlink == 1)
        if plain:
            return None
        try:
            os.unlink(name, dir_fd=dir_fd)
        except OSError:
            pass
        return "gone"

    walk_fd(folder, visit)


def remove_entry(parent: int, name: str) -> None:
    """Remove the entry name of the open folder parent, whatever a sandbox did to it
    (links, modes, any depth): a folder is emptied level by level, the folders inside each
    of its folders moved up into it first, so that no walk holds more than two descriptors
    or follows a link."""
    try:
        info = os.stat(name, dir_fd=parent, follow_symlinks=False)
    except OSError:
        return
    if not stat.S_ISDIR(info.st_mode):
        try:
            os.unlink(name, dir_fd=parent)
        except OSError:
            pass
        return
    try:
        top = open_folder(name, parent)
    except OSError:
        return
    try:
        _empty(top)
    finally:
        os.close(top)
    try:
        os.rmdir(name, dir_fd=parent)
    except OSError:
        pass


def _empty(top: int) -> None:
    """Empty the open folder top (see remove_entry)."""
    lifted = 0
    for _ in range(1_000_000):
        names = _entries(top)
        if not names:
            return
        for name in names:
            try:
                inner = open_folder(name, top)
            except OSError:  # not a folder (or gone)
                try:
                    os.unlink(name, dir_fd=top)
                except OSError:
                    pass
                continue
            try:
                try:
                    os.fchmod(inner, 0o700)
                except OSError:
                    pass
                for sub in _entries(inner):
                    if _is_folder(inner, sub):
                        lifted += 1
                        while _exists(top, f".lifted-{lifted}"):
                            lifted += 1
                        try:
                            os.rename(sub, f".lifted-{lifted}", src_dir_fd=inner,
                                      dst_dir_fd=top)
                        except OSError:
                            pass
                    else:
                        try:
                            os.unlink(sub, dir_fd=inner)
                        except OSError:
                            pass
            finally:
                os.close(inner)
            try:
                os.rmdir(name, dir_fd=top)
            except OSError:
                pass


def _is_folder(dir_fd: int, name: str) -> bool:
    try:
        return stat.S_ISDIR(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _exists(dir_fd: int, name: str) -> bool:
    try:
        os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        return True
    except OSError:
        return False


def remove_tree(path: Path) -> None:
    """Remove the tree at path whatever the submission did to it (links, modes, depth);
    path's own parent is trusted (a folder no sandbox writes in)."""
    try:
        parent = open_folder(path.parent)
    except OSError:
        return
    try:
        remove_entry(parent, path.name)
    finally:
        os.close(parent)


@functools.cache
def world_writable_folders() -> tuple[str, ...]:
    """Every folder of this machine that any user may write in (/tmp, /var/tmp, /dev/shm,
    /run/lock and any other, nested ones included), found once per grader: where a
    sandbox could leave a file behind. /proc, /sys and /dev other than /dev/shm and
    /dev/mqueue are not scanned, nor other containers' root filesystems (an overlay
    mounted below /: measured, a container running beside the grader made this scan take
    2.1 s instead of 0.8 s); links are not followed."""
    found, stack = set(), ["/"]
    skipped = set(NOT_SCANNED) | _container_roots()
    while stack:
        folder = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            path = entry.path
            if path in skipped:
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


def _container_roots() -> set[str]:
    """The mount points of overlay file systems other than /: containers' roots."""
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return set()
    return {line.split()[4] for line in lines
            if " - overlay " in line and line.split()[4] != "/"}


def end_users(pool: list[Sandbox]) -> None:
    """Kill every process of a judge's sandbox users and remove what they left: what a
    judge that died could not close."""
    for sandbox in pool:
        signal_user(sandbox.uid, signal.SIGKILL)
        remove_user_files(sandbox.uid, world_writable_folders())


def processes_of(uid: int) -> dict[int, bool]:
    """{pid: whether it may still run} for every live process whose real, effective or
    saved user is uid, from /proc/PID/status (a process /proc shows as root's, one that is
    not dumpable, still says its users there). A process may run while any of its threads
    is not stopped (T, t) or dead (Z, X): a thread of a stopped leader can be in the middle
    of a fork. One whose threads are all dead (a zombie its parent has not reaped) is left
    out."""
    found = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:  # /proc/PID is its effective user's, or root's when it is not dumpable
            if entry.stat().st_uid not in (uid, 0):
                continue
            status = Path(f"/proc/{entry.name}/status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        if uid not in [int(u) for u in fields.get("Uid", "").split()[:3]]:
            continue
        states = [_thread_state(entry.name, tid)
                  for tid in entries_of(f"/proc/{entry.name}/task")]
        if any(s not in "ZX" for s in states):
            found[int(entry.name)] = any(s not in "TtZX" for s in states)
    return found


def entries_of(folder: str) -> list[str]:
    """The names in a folder; none if it cannot be listed (a process that ended)."""
    try:
        return os.listdir(folder)
    except OSError:
        return []


def _thread_state(pid: str, tid: str) -> str:
    """A thread's state letter (R, S, D, T, t, Z, X ...); X if it is gone."""
    try:
        stat_line = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
    except OSError:
        return "X"
    return (stat_line.rsplit(")", 1)[-1].split() or ["X"])[0]


# setresuid's system call number (Linux's generic table on arm64)
SYS_SETRESUID = {"x86_64": 117, "aarch64": 147, "arm64": 147}.get(platform.machine())


def run_as(uid: int, action) -> None:
    """Run action() with uid's credentials alone (no root, no capability) in a thread of
    this process that ends with it: Linux keeps credentials per thread, and the system call
    is made directly because the C library's setresuid changes every thread's. The process
    itself stays root, so no process of uid may signal it (a signal to the thread alone is
    possible while it runs: a sandbox whose kernel scopes its signals, Landlock ABI 6, has
    none of that either). Where the system call's number is not known, a forked child does
    it instead."""
    if SYS_SETRESUID is None:
        _run_in_child(uid, action)
        return
    failed = []

    def body() -> None:
        try:
            if _libc.syscall(SYS_SETRESUID, *[ctypes.c_long(uid)] * 3) != 0:
                raise OSError(ctypes.get_errno(), "setresuid")
            action()
        except BaseException as error:  # passed on to the caller
            failed.append(error)

    thread = threading.Thread(target=body, name=f"as-{uid}")
    thread.start()
    thread.join()
    if failed:
        raise failed[0]


def _run_in_child(uid: int, action) -> None:
    child = os.fork()
    if child == 0:
        try:
            os.setgroups([])
            os.setresuid(uid, uid, uid)
            action()
        finally:
            os._exit(0)
    os.waitpid(child, 0)


def sweep(uid: int, number: int) -> None:
    """Send every process of uid the signal at once: kill(-1) as uid (run_as), which the
    kernel delivers to each process that user may signal while no process can be forked,
    and passes on to the child of any process in the middle of a fork. A pass over /proc
    that signals pid by pid misses a child not listed yet: measured, a process whose four
    threads fork in a loop kept writing after one such pass in 3 of 3 runs, after one sweep
    in 0 of 15."""
    if uid in (0, os.geteuid()):
        raise ValueError(f"no sweep of uid {uid}: it would signal the grader's own processes")

    def kill_all() -> None:
        try:
            os.kill(-1, number)
        except ProcessLookupError:  # no process of uid left
            pass

    run_as(uid, kill_all)


STOP_SECONDS = 2.0  # how long stopping a user's processes may take


def stop_user(uid: int, seconds: float = STOP_SECONDS) -> bool:
    """Stop every process of uid: SIGSTOP to all at once (sweep), then passes over /proc
    until two in a row find no thread that may run and the same processes (one that was
    exiting can make the kernel continue its orphaned process group); a pass that finds
    one sweeps again (a process in a system call stops when it returns). Whether that
    happened in time."""
    previous, until = None, time.monotonic() + seconds
    sweep(uid, signal.SIGSTOP)
    while time.monotonic() < until:
        found = processes_of(uid)
        if any(found.values()):
            sweep(uid, signal.SIGSTOP)
            previous = None
        elif set(found) == previous:
            return True
        else:
            previous = set(found)
        time.sleep(0.0002)
    return False


def signal_user(uid: int, number: int) -> None:
    """Send every process of uid the signal at once (sweep); SIGKILL again until none is
    left."""
    sweep(uid, number)
    for _ in range(100 if number == signal.SIGKILL else 0):
        if not processes_of(uid):
            return
        time.sleep(0.001)
        sweep(uid, number)


def remove_user_files(uid: int, scratch: tuple[str, ...]) -> None:
    """Delete what the sandbox user left in any world-writable folder of the machine
    (scratch: world_writable_folders(); POSIX shared memory and semaphores in /dev/shm
    included), and its System V IPC objects, so that nothing of one test reaches a later
    one."""
    for folder in scratch:
        try:
            top = open_folder(folder)
        except OSError:
            continue
        try:
            for name in _entries(top):
                try:
                    if os.stat(name, dir_fd=top, follow_symlinks=False).st_uid == uid:
                        remove_entry(top, name)
                except OSError:
                    pass
        finally:
            os.close(top)
    remove_user_ipc(uid)


def remove_user_ipc(uid: int) -> None:
    """Remove the System V shared memory, semaphores and message queues uid owns, as uid
    (run_as): root without CAP_SYS_ADMIN (Gradescope's container) may not remove another
    user's objects, their owner may."""
    if _own_ipc(uid):
        run_as(uid, lambda: _remove_own_ipc(uid))


# /proc/sysvipc's files, each with its id column and the column of the bytes it holds
IPC_KINDS = (("shm", "shmid", "size"), ("sem", "semid", None), ("msg", "msqid", "cbytes"))


def _own_ipc(uid: int) -> list[tuple[str, int]]:
    """(kind, id) of every System V object uid owns or created."""
    return [(kind, ident) for kind, ident, _ in ipc_objects(uid)]


def ipc_objects(uid: int) -> list[tuple[str, int, int | None]]:
    """(kind, id, bytes it holds: a shared memory segment's size, a message queue's bytes,
    None for semaphores) of every System V object uid owns or created (an object given away
    with IPC_SET still names its creator), from /proc/sysvipc."""
    found = []
    for kind, column, held in IPC_KINDS:
        try:
            lines = Path(f"/proc/sysvipc/{kind}").read_text().splitlines()
        except OSError:
            continue
        header = lines[0].split() if lines else []
        if not {column, "uid", "cuid"} <= set(header):
            continue
        for line in lines[1:]:
            fields = line.split()
            if uid in (int(fields[header.index("uid")]), int(fields[header.index("cuid")])):
                size = int(fields[header.index(held)]) if held in header else None
                found.append((kind, int(fields[header.index(column)]), size))
    return found


def _remove_own_ipc(uid: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    ipc_rmid = 0
    for kind, ident in _own_ipc(uid):
        if kind == "sem":
            libc.semctl(ident, 0, ipc_rmid)
        else:
            {"shm": libc.shmctl, "msg": libc.msgctl}[kind](ident, ipc_rmid, None)
