"""The warden: the one root process beside a judge, which does for it what needs privilege.

Runs in a judge's warden, a child the judge (course/grading/judge.py) forks before it drops
root for a user of its own (hw-judge, course/grading/accounts.py) and before it reads a
test: from then on the judge's pytest run, which decodes what the sandboxes send, holds no
privilege, and every privileged step of a test's sandbox is this process's, on one of three
requests whose arguments it checks itself:

    tree    copy the submission's tree for a test's sandbox, give it to the sandbox user (a
            slot of the judge's pool, never a uid the judge names) and fork the sandbox
            (course/grading/sandbox.py: a child of this process, which holds nothing secret:
            it was forked before the judge read a test); the warden keeps its channel
    call    one seam call: give the test's folders (in the judge's basetemp) to the sandbox
            user, let the sandbox run (SIGCONT), pass it the judge's message and wait for
            its reply while measuring what it holds (DISK_BYTES, DISK_FILES: over them it
            is killed), then stop it (SIGSTOP to every process of its user at once,
            users.sweep, until two passes over /proc find no thread running and the same
            processes), remove every link, FIFO, socket, device and hard-linked file it
            left in the lent folders, give them back to the judge's user, and return the
            reply's bytes undecoded
    close   kill every process of the sandbox's user, remove what that user left anywhere,
            its System V objects (by owner or creator), then its tree

The judge and the warden speak the seam's framing (tests/seam.py): a request or reply is a
frame holding a JSON header, then, if the header says so, a frame holding the bytes it
carries. Every walk over a folder a sandbox could write goes through file descriptors, never
a path a link or a rename could redirect (users.walk_fd). The warden ends when the judge
closes its end, and dies with the judge.
"""

import contextlib
import ctypes
import dataclasses
import json
import os
import select
import shutil
import signal
import socket
import stat
import time
from pathlib import Path

from course.grading import sandbox
from course.grading.users import (
    Sandbox,
    entries_of,
    give,
    ipc_objects,
    open_folder,
    processes_of,
    remove_tree,
    remove_user_files,
    scrub,
    signal_user,
    stop_user,
    walk_fd,
)
from provided.limits import MAX_FILE_BYTES  # a sandbox's RLIMIT_FSIZE

PR_SET_PDEATHSIG = 1
# the signals that may end a test in its judge: the grader's when the test is over its CPU
# or idle time (course/grading/judge.py, CPU_STOP), and pytest-timeout's for a test that
# sets its own timeout (the judges run with none)
TEST_STOPS = {signal.SIGALRM, signal.SIGUSR1}


# ----------------------------------------------------------------------- disk budget
DISK_BYTES = 256 * 2**20  # what one sandbox may hold at once outside its processes' memory:
DISK_FILES = 10_000       # its tree, its test's folders, its entries anywhere in /dev/shm,
# files without a name that its processes keep open or mapped (unlinked, O_TMPFILE, memfd)
# and its System V shared memory
POLL_SECONDS = 0.05  # a running sandbox's disk use is measured after each such run time
UNSEEN_MAPPINGS = ("/dev/zero", "/SYSV")  # shared anonymous memory (counted by RLIMIT_AS)
# and System V segments (counted by their size) in /proc/PID/maps


def usage(folders: list[int], user: Sandbox) -> tuple[int, int]:
    """(bytes, entries) beneath the open folders, plus the user's entries anywhere beneath
    /dev/shm and what its processes hold without a name (held)."""
    total = [0, 0]

    def counter(owner: int | None):
        def count(_dir_fd, _name, _fd, info) -> None:
            if owner is None or info.st_uid == owner:
                total[0] += info.st_blocks * 512
                total[1] += 1
        return count

    for folder in folders:
        walk_fd(folder, counter(None))
    if os.path.isdir("/dev/shm"):
        top = open_folder("/dev/shm")
        try:
            walk_fd(top, counter(user.uid))
        finally:
            os.close(top)
    return total[0] + held(user), total[1]


def held(user: Sandbox) -> int:
    """Bytes the kernel holds for the user outside any folder: files without a name that
    its processes keep open or mapped (unlinked files, O_TMPFILE files, memfds), each
    counted once, and the System V shared memory segments and message queues it owns or
    created (a segment's full size, a queue's bytes).

    /proc/PID/fd and maps are read with the user's file-system identity (as_user): root
    without CAP_SYS_PTRACE (Gradescope's container) may not read another user's, the user
    may read its own (a sandbox makes itself dumpable again after it changes its user). A
    mapped file whose descriptor is closed is measured through /proc/PID/map_files, which
    needs CAP_SYS_ADMIN; where that is refused, one in /dev/shm counts as much as is mapped
    of it (a POSIX semaphore of multiprocessing's: a page; a container's /dev/shm is a small
    tmpfs of its own, 64 MiB by default), one elsewhere as MAX_FILE_BYTES, the most such a
    file can hold."""
    seen, total = set(), 0
    shm = os.stat("/dev/shm").st_dev if os.path.isdir("/dev/shm") else None
    with as_user(user):
        for pid in processes_of(user.uid):
            for fd in entries_of(f"/proc/{pid}/fd"):
                try:
                    info = os.stat(f"/proc/{pid}/fd/{fd}")
                except OSError:
                    continue
                if stat.S_ISREG(info.st_mode) and info.st_nlink == 0 and \
                        (info.st_dev, info.st_ino) not in seen:
                    seen.add((info.st_dev, info.st_ino))
                    total += info.st_blocks * 512
            for span, key in _unnamed_mappings(pid):
                if key in seen:
                    continue
                try:
                    size = os.stat(f"/proc/{pid}/map_files/{span}").st_blocks * 512
                except PermissionError:
                    size = _span_bytes(span) if key[0] == shm else MAX_FILE_BYTES
                except OSError:
                    continue  # the process ended meanwhile
                seen.add(key)
                total += size
    return total + sum(size for _, _, size in ipc_objects(user.uid) if size)


def _span_bytes(span: str) -> int:
    start, end = (int(n, 16) for n in span.split("-"))
    return end - start


@contextlib.contextmanager
def as_user(user: Sandbox):
    """This thread's file-system identity is the user's (setfsuid, setfsgid) for the block,
    root's again after it."""
    libc = ctypes.CDLL(None)
    libc.setfsgid(user.gid)
    libc.setfsuid(user.uid)
    try:
        yield
    finally:
        libc.setfsuid(0)
        libc.setfsgid(0)


def _unnamed_mappings(pid: int) -> list[tuple[str, tuple[int, int]]]:
    """(address span, (device, inode)) of each file mapping of pid whose file has no name
    left, but shared anonymous memory and System V segments."""
    try:
        lines = Path(f"/proc/{pid}/maps").read_text().splitlines()
    except OSError:
        return []
    found = []
    for line in lines:
        fields = line.split(maxsplit=5)
        if len(fields) < 6 or not fields[5].endswith(" (deleted)") or \
                fields[5].startswith(UNSEEN_MAPPINGS):
            continue
        major, minor = (int(n, 16) for n in fields[3].split(":"))
        found.append((fields[0], (os.makedev(major, minor), int(fields[4]))))
    return found


def over_budget(folders: list[int], user: Sandbox) -> str | None:
    """What a sandbox holds beyond its disk budget, in words; None within it."""
    used, entries = usage(folders, user)
    if used > DISK_BYTES:
        return (f"the code under test held more than {DISK_BYTES >> 20} MiB on disk or in "
                "shared memory (files, files it unlinked but kept open, memfds, /dev/shm, "
                "System V segments), the grader's limit for one test: it was stopped")
    if entries > DISK_FILES:
        return (f"the code under test made more than {DISK_FILES:,} files and folders, the "
                "grader's limit for one test: it was stopped")
    return None


# ----------------------------------------------------------------------------- warden
def sandbox_env(tree: str) -> dict:
    """The environment of a sandbox's code: its tree as home, its tree's tmp/ as TMPDIR."""
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": tree,
            "TMPDIR": f"{tree}/tmp", "MPLBACKEND": "Agg", "MPLCONFIGDIR": f"{tree}/tmp",
            "OMP_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1", "LANG": "C.UTF-8"}


class Warden:
    """The judge's handle on its warden: one request and its reply per call (write_message,
    read_message)."""

    def __init__(self, seat: dict):
        ours, theirs = socket.socketpair()
        self.pid = os.fork()
        if self.pid == 0:
            ours.close()
            try:
                ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
                signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # its sandboxes are reaped
                serve(theirs, Seat.from_request(seat))
            finally:
                os._exit(0)
        theirs.close()
        self.basetemp = Path(seat["basetemp"])
        self.channel = ours
        self.pending = 0  # replies the judge stopped waiting for (a test's time ran out)

    def call(self, op: str, payload: bytes | None = None, **args) -> tuple[dict, bytes | None]:
        """(the warden's reply, the bytes it carries) to a request. A test's stop
        (TEST_STOPS) may end the wait for a reply, never a message half written or half
        read: the replies a stopped test left unread are read and dropped at the next
        request, which the warden, still waiting on the sandbox, takes as the sign to end
        it."""
        with _deferred(TEST_STOPS):
            write_message(self.channel, {"op": op, **args}, payload)
            self.pending += 1
        while True:
            select.select([self.channel], [], [])  # where a test's stop lands
            with _deferred(TEST_STOPS):
                reply = read_message(self.channel)
                self.pending -= 1
            if not self.pending:
                return reply


@contextlib.contextmanager
def _deferred(signals: set):
    """The signals wait until the block is done."""
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, signals)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)


def write_message(channel: socket.socket, header: dict, payload: bytes | None) -> None:
    """A request or a reply: header as one seam frame, then payload, if any, as another."""
    from tests import seam  # the process's own (a judge imports its tree's)

    seam.send(channel, json.dumps({**header, "carries": payload is not None}).encode())
    if payload is not None:
        seam.send(channel, payload)


def read_message(channel: socket.socket) -> tuple[dict, bytes | None]:
    """(header, payload or None) of the next message; RuntimeError if the other side
    ended."""
    from tests import seam

    head = seam.receive(channel)
    if head is None:
        raise RuntimeError("the judge's warden ended")
    header, payload = json.loads(head), None
    if header.pop("carries", False):
        payload = seam.receive(channel)
        if payload is None:
            raise RuntimeError("the judge's warden ended")
    return header, payload


class Seat:
    """What the warden serves, fixed by the grader before the judge dropped root: the pool
    of sandbox users, the judge's user, the submission's template tree, the judge's work
    folder and pytest's basetemp, and the machine's world-writable folders (scratch, which
    the grader found: users.world_writable_folders)."""

    def __init__(self, pool, judge, template, work, basetemp, scratch):
        self.pool, self.judge, self.template = pool, judge, template
        self.work, self.basetemp, self.scratch = work, basetemp, tuple(scratch)
        self.sandboxes: dict[str, Running] = {}

    @classmethod
    def from_request(cls, seat: dict) -> "Seat":
        return cls([Sandbox(uid, gid) for uid, gid in seat["pool"]], Sandbox(*seat["judge"]),
                   Path(seat["template"]), Path(seat["work"]), Path(seat["basetemp"]),
                   seat["scratch"])


@dataclasses.dataclass
class Running:
    """A sandbox the warden started: its pool user and channel."""
    user: Sandbox
    channel: socket.socket
    ended: str | None = None  # why the warden ended it (over its disk budget)
    unmeasured: float = 0.0  # seconds it ran since its disk use was last measured


def serve(channel: socket.socket, seat: Seat) -> None:
    """The warden's loop: one request, one reply, until the judge closes its end."""
    while True:
        try:
            request, payload = read_message(channel)
        except RuntimeError:
            return
        try:
            reply, data = handle(request, payload, seat, channel)
        except (ValueError, KeyError, TypeError, IndexError, OSError) as err:
            reply, data = {"error": f"{type(err).__name__}: {err}"}, None
        write_message(channel, reply, data)


def handle(request: dict, payload: bytes | None, seat: Seat,
           judge: socket.socket) -> tuple[dict, bytes | None]:
    """One request (see the module's docstring): its reply and the bytes it carries."""
    op = request["op"]
    if op == "tree":
        return {"tree": start(seat, int(request["slot"]) % len(seat.pool))}, None
    tree = str(request["tree"])
    running = seat.sandboxes[tree]
    if op == "call":
        if payload is None:
            raise ValueError("a call without its message")
        return relay(seat, tree, running, payload, request.get("folders", []), judge)
    if op == "close":
        close(seat, tree, running)
        return {}, None
    raise ValueError(f"unknown request {op!r}")


def start(seat: Seat, slot: int) -> str:
    """Copy the template into a new tree, give it to the slot's user and fork the sandbox
    (course/grading/sandbox.py, stopped until its first call)."""
    user = seat.pool[slot]
    tree = seat.work / f"sandbox-{os.getpid()}-{time.monotonic_ns()}"
    shutil.copytree(seat.template, tree, symlinks=True)
    give(tree, user, {os.geteuid()})
    ours, theirs = socket.socketpair()
    request = {"tree": str(tree), "shared": [str(seat.basetemp)], "env": sandbox_env(str(tree)),
               "uid": user.uid, "gid": user.gid}
    if os.fork() == 0:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        sandbox.main(request, theirs.fileno())  # never returns
    theirs.close()
    seat.sandboxes[str(tree)] = Running(user, ours)
    return str(tree)


def lent(seat: Seat, folders: list) -> list[int]:
    """Descriptors of the test's folders: each a folder directly in the basetemp, opened
    without following a link (the judge names them; the warden trusts no path)."""
    if not folders:  # pytest makes the basetemp at a test's first tmp_path
        return []
    base = open_folder(seat.basetemp)
    opened = []
    try:
        for folder in folders:
            path = Path(str(folder))
            if path.parent != seat.basetemp or path.name in ("", ".", ".."):
                raise ValueError(f"{folder} is not a folder of the basetemp")
            opened.append(open_folder(path.name, base))
    except (OSError, ValueError):
        for fd in opened:
            os.close(fd)
        raise
    finally:
        os.close(base)
    return opened


def relay(seat: Seat, tree: str, running: Running, message: bytes, folders: list,
          judge: socket.socket) -> tuple[dict, bytes | None]:
    """One seam call: lend the test's folders to the sandbox user, let the sandbox run,
    pass it the judge's message and wait for its reply (measuring its disk use meanwhile),
    stop it, scrub the folders and give them back to the judge's user. The reply's bytes
    are passed on as they are: the warden never decodes them."""
    fds = lent(seat, folders)
    tree_fd = open_folder(tree)
    user, reply = running.user, None
    try:
        for fd in fds:
            give(fd, user, {seat.judge.uid})
        if running.ended is None:
            started = time.monotonic()
            go(running)
            reply = exchange(running, message, [tree_fd, *fds], judge)
            stop(running)
            running.unmeasured += time.monotonic() - started
            if running.ended is None and running.unmeasured >= POLL_SECONDS:
                running.ended = over_budget([tree_fd, *fds], user)
                running.unmeasured = 0.0
            if running.ended is not None:
                end(running)
        for fd in fds:
            scrub(fd)
            give(fd, seat.judge, {user.uid})
    finally:
        for fd in [tree_fd, *fds]:
            os.close(fd)
    if running.ended is not None or reply is None:
        return {"ended": running.ended}, None
    return {}, reply


def exchange(running: Running, message: bytes, folders: list[int],
             judge: socket.socket) -> bytes | None:
    """Send the sandbox the framed message and read one framed reply; None if it ended,
    sent more than a seam message may hold, went over its disk budget, or the judge sent
    another request meanwhile (its test's time ran out). Bytes the sandbox sent unasked
    (before the message, or after its reply) are dropped."""
    from tests import seam  # the repository's (the warden's import path)

    channel = running.channel
    try:
        _drain(channel)
        channel.settimeout(60)
        seam.send(channel, message)
        channel.setblocking(False)
    except OSError:
        return None
    received, size, head = bytearray(), None, seam.FRAME.size
    while size is None or len(received) < head + size:
        ready, _, _ = select.select([channel, judge], [], [], POLL_SECONDS)
        if judge in ready:  # the judge gave up on this call: its test's time ran out
            running.ended = "this test ran over its time limit during this call"
            return None
        if channel not in ready:
            running.ended = over_budget(folders, running.user)
            running.unmeasured = 0.0
            if running.ended is not None:
                return None
            continue
        try:
            chunk = channel.recv(1 << 20)
        except BlockingIOError:
            continue
        except OSError:
            return None
        if not chunk:
            return None
        received += chunk
        if size is None and len(received) >= head:
            (size,) = seam.FRAME.unpack(received[:head])
            if size > seam.MAX_MESSAGE_BYTES:
                return None
    return bytes(received[head:head + size])


def _drain(channel: socket.socket) -> None:
    """Drop whatever the sandbox's channel holds unread."""
    channel.setblocking(False)
    try:
        while channel.recv(1 << 20):
            pass
    except (BlockingIOError, InterruptedError):
        pass


def go(running: Running) -> None:
    """Let the sandbox run: SIGCONT to every process of its user."""
    signal_user(running.user.uid, signal.SIGCONT)


def stop(running: Running) -> None:
    """Stop the sandbox: stop every process of its user until none runs (users.stop_user);
    what cannot be stopped in time is killed."""
    if not stop_user(running.user.uid):
        running.ended = "the code under test could not be stopped between calls: it was killed"
        end(running)


def end(running: Running) -> None:
    """Kill every process of the sandbox's user."""
    signal_user(running.user.uid, signal.SIGKILL)


def close(seat: Seat, tree: str, running: Running) -> None:
    """Kill the sandbox, remove what its user left anywhere and its System V objects, then
    its tree. (A sandbox closed before it took its user ends by itself: its channel is
    closed.)"""
    running.channel.close()
    end(running)
    remove_user_files(running.user.uid, seat.scratch)
    remove_tree(Path(tree))
    del seat.sandboxes[tree]
