"""The warden: the one root process beside a judge, which does for it what needs privilege.

Runs in a judge's warden, a child the judge (course/grading/judge.py) forks before it drops
root for a user of its own (hw-judge, course/grading/users.py): from then on the judge's
pytest run, which decodes what the sandboxes send, holds no privilege, and every privileged
step of a test's sandbox goes through this process, over a socket pair, as one of a few
requests whose arguments it checks itself:

    tree    copy the submission's tree for a test's sandbox and give it to the sandbox user
            (a slot of the judge's pool, never a uid the judge names), and make the
            sandbox's cgroup where the machine has cgroup v2
    go      give the test's folders (in the judge's basetemp) to the sandbox user, then let
            the sandbox run (thaw its cgroup; elsewhere SIGCONT)
    stop    stop it (freeze its cgroup and wait until it is frozen, which no process can
            evade; elsewhere SIGSTOP, which holds because the syscall policy refuses
            ptrace), then remove every link, FIFO, socket, device and hard-linked file it
            left in the lent folders and give them back to the judge's user
    close   kill everything of the sandbox (its cgroup, its session, its user), remove what
            its user left anywhere and its System V objects, then its tree and cgroup

The warden ends when the judge closes its end, and dies with the judge.
"""

import ctypes
import json
import os
import shutil
import signal
import socket
import time
from pathlib import Path

from course.grading.users import (
    SPAWNED,
    Sandbox,
    give,
    remove_tree,
    remove_user_files,
    scrub,
    signal_user,
)

PR_SET_PDEATHSIG = 1
CGROUPS = "cgroups.txt"  # in a judge's work folder: every sandbox cgroup its warden made
FREEZE_SECONDS = 2.0  # how long a freeze may take before the signals stop it too


# ---------------------------------------------------------------------------- cgroups
def cgroup_root() -> Path | None:
    """A cgroup v2 folder where this process may make child cgroups: its own cgroup in the
    machine's cgroup2 mount, if writable (root without CAP_SYS_ADMIN in a container usually
    sees it read-only), else None."""
    try:
        mounts = Path("/proc/self/mountinfo").read_text().splitlines()
        own = next(line.split("::", 1)[1] for line in
                   Path("/proc/self/cgroup").read_text().splitlines() if line.startswith("0::"))
    except (OSError, StopIteration):
        return None
    for line in mounts:
        fields = line.split()
        if " - cgroup2 " in line and "rw" in fields[5].split(","):
            folder = Path(fields[4]) / own.strip().lstrip("/")
            probe = folder / f"hw-probe-{os.getpid()}"
            try:
                probe.mkdir()
                ok = (probe / "cgroup.freeze").exists()
                probe.rmdir()
            except OSError:
                continue
            if ok:
                return folder
    return None


def frozen(cgroup: Path) -> bool:
    try:
        return "frozen 1" in (cgroup / "cgroup.events").read_text()
    except OSError:
        return True  # gone: nothing left to run


def freeze(cgroup: Path, value: int) -> bool:
    """Freeze (1) or thaw (0) a cgroup; on freezing, wait until every process in it is
    frozen. Whether it worked in time."""
    try:
        (cgroup / "cgroup.freeze").write_text(str(value))
    except OSError:
        return False
    if value == 0:
        return True
    until = time.monotonic() + FREEZE_SECONDS
    while not frozen(cgroup):
        if time.monotonic() > until:
            return False
        time.sleep(0.0005)
    return True


def kill_cgroup(cgroup: Path) -> None:
    """Kill every process in the cgroup (cgroup.kill: none escapes by forking), wait until
    it is empty and remove it."""
    try:
        (cgroup / "cgroup.kill").write_text("1")
    except OSError:
        for pid in _members(cgroup):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    until = time.monotonic() + 5
    while time.monotonic() < until:
        try:
            cgroup.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.002)


def _members(cgroup: Path) -> list[int]:
    try:
        return [int(p) for p in (cgroup / "cgroup.procs").read_text().split()]
    except (OSError, ValueError):
        return []


def remove_cgroups(work: Path) -> None:
    """Kill and remove every sandbox cgroup a judge's warden made in work (what a warden
    that died could not close)."""
    try:
        folders = (work / CGROUPS).read_text().split()
    except OSError:
        return
    for folder in folders:
        kill_cgroup(Path(folder))


# ----------------------------------------------------------------------------- warden
class Warden:
    """The judge's handle on its warden."""

    def __init__(self, pool: list[Sandbox], judge: Sandbox, template: Path, work: Path,
                 basetemp: Path):
        ours, theirs = socket.socketpair()
        self.pid = os.fork()
        if self.pid == 0:
            ours.close()
            try:
                ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
                serve(theirs, pool, judge, template, work, basetemp)
            finally:
                os._exit(0)
        theirs.close()
        self.basetemp = basetemp
        self.channel = ours.makefile("rwb", buffering=0)

    def call(self, op: str, **args) -> dict:
        self.channel.write((json.dumps({"op": op, **args}) + "\n").encode())
        reply = self.channel.readline()
        if not reply:
            raise RuntimeError("the judge's warden ended")
        return json.loads(reply)


def serve(channel: socket.socket, pool: list[Sandbox], judge: Sandbox, template: Path,
          work: Path, basetemp: Path) -> None:
    """The warden's loop: one request per line, one reply per line, until the judge closes
    its end. pool, judge and the folders come from the grader's request, before the judge
    dropped root; a request names a sandbox only by its pool slot and its tree."""
    stream = channel.makefile("rwb", buffering=0)
    cgroups = cgroup_root()
    sandboxes = {}  # tree -> (slot, pid, cgroup)
    for line in stream:
        try:
            request = json.loads(line)
            reply = handle(request, pool, judge, template, work, basetemp, cgroups,
                           sandboxes) or {}
        except (ValueError, KeyError, TypeError, IndexError, OSError) as err:
            reply = {"error": f"{type(err).__name__}: {err}"}
        stream.write((json.dumps(reply) + "\n").encode())


def _inside(path: str, root: Path) -> Path:
    """path, if it lies strictly inside root (no link on the way); else ValueError."""
    resolved = Path(os.path.realpath(path))
    if resolved == root or not resolved.is_relative_to(root) or resolved != Path(path):
        raise ValueError(f"{path} is not inside {root}")
    return resolved


def handle(request: dict, pool, judge, template, work, basetemp, cgroups,
           sandboxes) -> dict | None:
    """One request (see the module's docstring); its reply, if it has one."""
    op = request["op"]
    if op == "tree":
        slot = int(request["slot"]) % len(pool)
        tree = work / f"sandbox-{os.getpid()}-{time.monotonic_ns()}"
        shutil.copytree(template, tree, symlinks=True)
        user = pool[slot]
        if user.sealed:
            give(tree, user)
        cgroup = None
        if cgroups is not None:
            cgroup = cgroups / f"hw-sandbox-{os.getpid()}-{time.monotonic_ns()}"
            cgroup.mkdir()
            with open(work / CGROUPS, "a") as made:
                made.write(f"{cgroup}\n")
        sandboxes[str(tree)] = [slot, None, cgroup]
        return {"tree": str(tree), "cgroup": str(cgroup) if cgroup else None}
    tree = request["tree"]
    slot, pid, cgroup = sandboxes[tree]
    user = pool[slot]
    folders = [_inside(f, basetemp) for f in request.get("folders", [])]
    if op == "started":
        sandboxes[tree][1] = int(request["pid"])
        with open(work / SPAWNED, "a") as spawned:  # for the grader, should the judge die
            spawned.write(f"{int(request['pid'])}\n")
    elif op == "go":
        if user.sealed:
            for folder in folders:
                give(folder, user)
        if not (cgroup and freeze(cgroup, 0)):
            _signal(pid, user, signal.SIGCONT)
    elif op == "stop":
        if not (cgroup and freeze(cgroup, 1)):
            _signal(pid, user, signal.SIGSTOP)
        for folder in folders:
            scrub(folder)
            if judge.sealed:
                give(folder, judge)
    elif op == "close":
        if cgroup:
            kill_cgroup(cgroup)
        _signal(pid, user, signal.SIGKILL)
        if user.sealed:
            remove_user_files(user.uid)
        remove_tree(Path(tree))
        del sandboxes[tree]
    else:
        raise ValueError(f"unknown request {op!r}")
    return None


def _signal(pid: int | None, user: Sandbox, number: int) -> None:
    """Signal the sandbox's session, and (sealed) every process of its user."""
    if pid is not None:
        try:
            os.killpg(pid, number)
        except (ProcessLookupError, PermissionError):
            pass
    if user.sealed:
        signal_user(user.uid, number)
