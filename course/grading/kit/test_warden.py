"""The warden against a sandbox that fights its stop, fills the disk or races root's walks.

The warden (course/grading/warden.py) is driven here as a judge drives it, a seam call at a
time, over a tree of two files (the seam's server and a probe module), in the one way it
stops a sandbox between calls: SIGSTOP to every process of its user (stop_user). Root's
walks over folders a sandbox wrote (give, scrub) are raced by a process of another user
that keeps exchanging a folder and a link to a root-owned folder outside (renameat2
RENAME_EXCHANGE). Needs root.
"""

import ctypes
import os
import pwd
import shutil
import signal
import stat
import tempfile
import threading
import time
from pathlib import Path

import pytest

from course.grading import users as users_module
from course.grading import warden as warden_module
from course.grading.accounts import JUDGE_USER, release, sandbox_pool, sandbox_user
from course.grading.judge import SandboxTransport
from course.grading.users import (
    Sandbox,
    give,
    open_folder,
    processes_of,
    remove_tree,
    scrub,
    sweep,
)
from provided.common import REPO_ROOT
from tests import seam

pytestmark = [pytest.mark.kit, pytest.mark.timeout(300),
              pytest.mark.skipif(os.geteuid() != 0, reason="sandbox users need root")]

PROBE = '''
import os, time


def start_forker(log):
    """A helper in its own session that writes the time every 2 ms and every 20 ms forks
    and exits (a new pid each time, slowly enough that its zombies, which the sandbox's
    first process does not reap, stay under the process limit for a second)."""
    def body():
        for step in range(10**9):
            if step % 10 == 0 and os.fork():
                os._exit(0)
            write_time(log)
            time.sleep(0.002)
    start_helper(log, body)


def start_thread_forker(log):
    """A helper in its own session whose three threads each fork a child that writes the
    time and exits, reap it and fork the next: at almost any moment some thread is in
    the middle of a fork while the others may already be stopped."""
    import threading

    def forks():
        while True:
            child = os.fork()
            if child == 0:
                write_time(log)
                os._exit(0)
            os.waitpid(child, 0)

    def body():
        for _ in range(3):
            threading.Thread(target=forks, daemon=True).start()
        while True:
            write_time(log)
            time.sleep(0.002)
    start_helper(log, body)


def start_helper(log, body):
    """Run body in a child in its own session; why it ended, if it did, in log + ".end"."""
    if os.fork() == 0:
        try:
            os.setsid()
            body()
        except BaseException as error:
            with open(log + ".end", "w") as out:
                out.write(repr(error))
        finally:
            os._exit(0)


def write_time(log):
    with open(log, "a") as out:
        out.write(f"{time.monotonic()}\\n")


def ended(log):
    """Why the helper ended ("" while it runs)."""
    return open(log + ".end").read() if os.path.exists(log + ".end") else ""


def run_for(seconds):
    """Let the helpers run for seconds within this call; the time at its end."""
    time.sleep(seconds)
    return time.monotonic()


def times(log):
    return [float(line) for line in open(log).read().split()]


def _square(x):
    return x * x


def workers():
    """Each kind of worker process the homework's code may use, and what it returned."""
    import multiprocessing, subprocess, sys
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    found = {}
    with multiprocessing.Pool(2) as pool:
        found["pool"] = pool.map(_square, range(4))
    queue = multiprocessing.Queue()
    child = multiprocessing.Process(target=queue.put, args=(42,))
    child.start()
    found["queue"] = queue.get(timeout=60)
    child.join()
    with multiprocessing.Lock():
        found["lock"] = True
    pid = os.fork()
    if pid == 0:
        os._exit(7)
    found["fork"] = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    found["python"] = subprocess.run([sys.executable, "-c", "print(6 * 7)"],
                                     capture_output=True, text=True).stdout.strip()
    loader = DataLoader(TensorDataset(torch.arange(6.0)), batch_size=3, num_workers=2)
    found["dataloader"] = [batch[0].tolist() for batch in loader]
    return found


def fill(folder, megabytes):
    """Write files of 32 MiB until megabytes are written or a write fails."""
    block = b"x" * 2**20
    for index in range(megabytes // 32):
        with open(os.path.join(folder, f"fill{index}"), "wb") as out:
            for _ in range(32):
                out.write(block)
    return "written"


KEPT = []  # what the probe holds between calls


def hold(kind, folder, count, megabytes):
    """Hold count files of megabytes each, of a kind no name shows: "unlinked" (a file
    unlinked, its descriptor kept), "memfd", "mapped" (a file mapped by one page, its
    descriptor closed, then unlinked), "sysv" (a System V segment, touched and detached);
    then run a while, so that the warden measures. The MiB held."""
    import ctypes
    import mmap
    libc = ctypes.CDLL(None, use_errno=True)
    libc.shmat.restype = ctypes.c_void_p
    block, held = b"x" * 2**20, 0
    for index in range(count):
        if kind == "sysv":
            ident = libc.shmget(0, megabytes * 2**20, 0o600 | 0o1000)  # IPC_PRIVATE, IPC_CREAT
            if ident < 0:
                break
            address = libc.shmat(ident, None, 0)
            ctypes.memset(address, 1, megabytes * 2**20)
            libc.shmdt(ctypes.c_void_p(address))
        else:
            path = os.path.join(folder, f"held{index}")
            fd = (os.memfd_create(f"held{index}") if kind == "memfd" else
                  os.open(path, os.O_RDWR | os.O_CREAT, 0o600))
            for _ in range(megabytes):
                os.write(fd, block)
            if kind == "mapped":
                KEPT.append(mmap.mmap(fd, 4096))
                os.close(fd)
            else:
                KEPT.append(fd)
            if kind != "memfd":
                os.unlink(path)
        held += megabytes
    run_for(0.5)
    return held


def orphan_burns(seconds):
    """A grandchild whose parent exits at once burns seconds of CPU time and ends, while
    this call waits (an orphan: init's child, but for the sandbox's subreaper)."""
    if os.fork() == 0:
        if os.fork() == 0:
            until = time.process_time() + seconds
            while time.process_time() < until:
                pass
        os._exit(0)
    run_for(4 * seconds + 1)
    return "burned"


def parent_and_self():
    return [os.getppid(), os.getpid()]


def deep_files(folder, count):
    """Up to count empty files in a folder two levels below folder, until one is refused;
    then run a while. How many were made."""
    inner = os.path.join(folder, "a", "b")
    os.makedirs(inner)
    for index in range(count):
        try:
            open(os.path.join(inner, str(index)), "w").close()
        except OSError:
            break
    run_for(0.5)
    return index
'''


@pytest.fixture
def transport():
    """A seam transport on a warden of a judge as root, over a tree of the seam and PROBE."""
    root = Path(tempfile.mkdtemp(prefix="hw_warden_"))
    root.chmod(0o711)
    template, work = root / "template", root / "work"
    (template / "tests").mkdir(parents=True)
    shutil.copy(REPO_ROOT / "tests" / "seam.py", template / "tests" / "seam.py")
    (template / "probe.py").write_text(PROBE)
    (template / "tmp").mkdir()
    work.mkdir(mode=0o711)
    (work / "pytest").mkdir(mode=0o711)
    judge, pool = sandbox_user(JUDGE_USER), sandbox_pool(1)
    seat = {"pool": [[user.uid, user.gid] for user in pool],
            "judge": [judge.uid, judge.gid], "template": str(template), "work": str(work),
            "basetemp": str(work / "pytest"), "scratch": users_module.world_writable_folders()}
    warden = warden_module.Warden(seat)
    made = SandboxTransport(warden, 0, lambda: [])
    made.warden_uid = seat["pool"][0][0]
    made.warden_pid = warden.pid
    try:
        yield made
    finally:
        made.close()
        warden.channel.close()
        os.waitpid(warden.pid, 0)
        release([judge, *pool])
        remove_tree(root)


@pytest.fixture
def probe(transport, monkeypatch):
    """The probe module in the sandbox, through the seam (this test's own session)."""
    monkeypatch.setattr(seam, "_SESSION", seam.Session(lambda: transport))
    return seam.submission("probe")


@pytest.mark.parametrize("helper", ["start_forker", "start_thread_forker"])
def test_a_process_that_forks_in_a_loop_does_not_run_between_calls(transport, probe, helper):
    """Neither a helper that forks and exits in a loop (a new pid each time) nor one whose
    threads fork in a loop (a child made while its leader is already stopped) writes the
    time while its sandbox is stopped between two calls."""
    log = f"{transport.tree}/tmp/forker.log"
    getattr(probe, helper)(log)
    probe.run_for(0.3)  # a call's own time: the helper writes
    stopped_at = time.monotonic()  # the call returned: the sandbox was stopped (one clock)
    time.sleep(1.0)  # between two calls: the helper must not run
    resumed_at = time.monotonic()
    for _ in range(10):  # the helper runs again (on a busy machine, a call may take a while)
        probe.run_for(0.2)
        written = probe.times(log)
        if len([t for t in written if t > resumed_at]) > 10:
            break
    between = [t for t in written if stopped_at < t < resumed_at]
    assert len([t for t in written if t < stopped_at]) > 10, "the helper never ran"
    assert len([t for t in written if t > resumed_at]) > 10, (
        f"the helper did not live through the stop ({probe.ended(log) or 'killed'}): the "
        "test shows nothing")
    assert between == [], (f"a helper that forks in a loop ran {len(between)} times while its "
                           "sandbox was stopped between two calls")


def children_of(pid: int) -> set[int]:
    found = set()
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat") as stat_file:
                if int(stat_file.read().rsplit(")", 1)[1].split()[1]) == pid:
                    found.add(int(entry))
        except (OSError, ValueError, IndexError):
            continue
    return found


def test_a_calls_processes_are_the_judges_warden_and_its_sandbox(transport, probe):
    """A seam call crosses the judge (here the test's own process), its warden and the
    test's sandbox, and no other process: the sandbox is the warden's only child, started
    by the warden itself, and the warden stops it with no helper process of its own."""
    parent, sandbox = probe.parent_and_self()
    assert parent == transport.warden_pid, "the sandbox is not the warden's child"
    probe.run_for(0.01)  # a stop and a start between the calls
    assert children_of(transport.warden_pid) == {sandbox}
    assert transport.warden_pid in children_of(os.getpid())


def test_worker_processes_work_and_leave_nothing(transport, probe):
    """A DataLoader with workers, multiprocessing's Pool, Queue and Lock, os.fork and the
    Python interpreter in a subprocess work in a sandbox, and nothing of them is left after
    its test: no process of its user, no file of its user in /dev/shm."""
    found = probe.workers()
    assert found == {"pool": [0, 1, 4, 9], "queue": 42, "lock": True, "fork": 7,
                     "python": "42", "dataloader": [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]}
    uid = transport.warden_uid
    transport.close()
    transport.close = lambda: None  # closed once
    left = processes_of(uid)
    assert left == {}, f"processes of the sandbox user left after its test: {left}"
    shm = [p.name for p in Path("/dev/shm").iterdir() if _uid(p) == uid]
    assert shm == [], f"files of the sandbox user left in /dev/shm: {shm}"


def _uid(path: Path) -> int | None:
    try:
        return path.stat().st_uid
    except OSError:
        return None


def test_a_sandbox_that_fills_the_disk_is_stopped(transport, probe):
    with pytest.raises(seam.SeamError, match="held more than"):
        probe.fill(f"{transport.tree}/tmp", 4096)
    written = sum(p.stat().st_size for p in Path(transport.tree, "tmp").glob("fill*"))
    assert written < warden_module.DISK_BYTES + 512 * 2**20, f"{written >> 20} MiB written"


@pytest.mark.parametrize("kind", ["unlinked", "memfd", "mapped", "sysv"])
def test_what_no_name_shows_counts_to_the_budget(transport, probe, kind):
    """Files unlinked but kept open, memfds, files mapped by a page whose descriptor is
    closed, and System V segments count to the disk budget: a sandbox holding 6 x 60 MiB
    of one kind is stopped (or, in a namespace of its own, where the warden sees no System
    V segment, refused the segments past the budget)."""
    budget = warden_module.DISK_BYTES >> 20
    try:
        held = probe.hold(kind, f"{transport.tree}/tmp", 6, 60)
    except seam.SeamError as err:
        assert "held more than" in str(err), err
        return
    assert kind == "sysv" and held <= budget, (
        f"a sandbox held {held} MiB as {kind} files, over the {budget} MiB budget, and ran on")


def test_dev_shm_counts_every_level(transport, probe):
    """Files two folders deep in /dev/shm count to the sandbox's file budget: it is
    stopped (or, with a /dev/shm of its own, refused the files past the budget)."""
    try:
        made = probe.deep_files(f"/dev/shm/hw-test-{os.getpid()}",
                                warden_module.DISK_FILES + 10)
    except seam.SeamError as err:
        assert "made more than" in str(err), err
        return
    assert made <= warden_module.DISK_FILES, f"{made} files in /dev/shm, and it ran on"


def test_an_orphans_cpu_time_counts_to_its_test(transport, probe):
    """The grader's meter (course/grading/judges.py) counts the CPU time of a process whose
    parent exited, after it ended: the sandbox is its subreaper, so it is not reaped by
    init, where its time would be lost."""
    from course.grading.judges import Meter

    meter = Meter(os.getpid(), {transport.warden_uid})
    meter.begin(None)
    before = meter.read().seconds
    probe.orphan_burns(0.6)
    burned = meter.read().seconds - before
    assert burned >= 0.5, f"the meter counted {burned:.2f} of an orphan's 0.6 CPU-seconds"


RENAME_EXCHANGE = 2


def _swap_until(folder: Path, uid: int, seconds: float) -> int:
    """A child as uid that keeps exchanging folder/d (a folder) and folder/l (a link to the
    victim) until seconds have passed; its pid."""
    pid = os.fork()
    if pid:
        return pid
    try:
        os.setgid(pwd.getpwuid(uid).pw_gid)
        os.setuid(uid)
        libc = ctypes.CDLL(None, use_errno=True)
        until = time.monotonic() + seconds
        while time.monotonic() < until:
            libc.renameat2(-100, str(folder / "d").encode(), -100, str(folder / "l").encode(),
                           RENAME_EXCHANGE)
    finally:
        os._exit(0)


def test_roots_walks_are_not_redirected_by_swapped_links(tmp_path):
    """give and scrub, root's walks over a lent folder, while its owner keeps swapping a
    folder inside it with a link to a root-owned folder outside: nothing outside changes."""
    attacker = pwd.getpwnam("nobody")
    other = sandbox_user(JUDGE_USER)
    area = Path(tempfile.mkdtemp(prefix="hw_swap_"))
    release([other])  # only its uid is used here
    try:
        area.chmod(0o711)
        victim = area / "victim"
        victim.mkdir(mode=0o700)
        (victim / "secret").write_text("root's")
        (victim / "secret").chmod(0o600)
        lent = area / "lent"
        (lent / "d").mkdir(parents=True)
        (lent / "d" / "file").write_text("x")
        os.symlink(victim, lent / "l")
        for path in (lent, lent / "d", lent / "d" / "file", lent / "l"):
            os.chown(path, attacker.pw_uid, attacker.pw_gid, follow_symlinks=False)
        swapper = _swap_until(lent, attacker.pw_uid, 4.0)
        owners = {attacker.pw_uid, other.uid}
        until = time.monotonic() + 3.5
        while time.monotonic() < until:
            fd = open_folder(lent)
            try:
                give(fd, other, owners)
                give(fd, Sandbox(attacker.pw_uid, attacker.pw_gid), owners)
            finally:
                os.close(fd)
        os.waitpid(swapper, 0)
        fd = open_folder(lent)
        try:
            scrub(fd)
        finally:
            os.close(fd)
        for path in (victim, victim / "secret"):
            info = path.stat()
            assert info.st_uid == 0, f"root gave {path} away to uid {info.st_uid}"
        assert stat.S_IMODE(victim.stat().st_mode) == 0o700
        assert stat.S_IMODE((victim / "secret").stat().st_mode) == 0o600
        assert not (lent / "l").is_symlink() and not (lent / "d").is_symlink(), (
            "scrub left a link in the lent folder")
    finally:
        remove_tree(area)


def test_the_instructions_state_the_disk_budget():
    """INSTRUCTORS.md's numbers for a sandbox's disk are the warden's and the sandbox's."""
    from course.grading.sandbox import MAX_FILE_BYTES

    text = " ".join((REPO_ROOT / "course" / "INSTRUCTORS.md").read_text().split())
    stated = (f"A sandbox may hold {warden_module.DISK_BYTES >> 20} MiB and "
              f"{warden_module.DISK_FILES:,} files and folders on disk at once")
    assert stated in text, f"INSTRUCTORS.md should say: {stated}"
    assert f"no file over {MAX_FILE_BYTES >> 20} MiB" in text


def test_a_sweep_never_signals_roots_processes():
    """sweep (the stop between calls) signals as the sandbox user: never as root or as the
    grader's own user, where kill(-1) would reach the grader."""
    for uid in {0, os.geteuid()}:
        with pytest.raises(ValueError, match="no sweep"):
            sweep(uid, 0)


@pytest.mark.parametrize("way", ["a thread of the caller", "a forked child"])
def test_a_sweep_signals_the_users_processes_and_leaves_the_caller_root(monkeypatch, way):
    """A sweep (kill(-1) as the user, run_as) kills a process of the user, from a thread
    whose credentials alone change or, where the system call's number is not known, from a
    forked child; the caller, its other threads and the judges' threads that sweep at the
    same time stay root."""
    if way == "a forked child":
        monkeypatch.setattr(users_module, "SYS_SETRESUID", None)
    user = sandbox_user()
    try:
        child = os.fork()
        if child == 0:
            try:
                os.setgid(user.gid)
                os.setuid(user.uid)
                time.sleep(20)  # ends by itself if the sweep fails
            finally:
                os._exit(0)
        until = time.monotonic() + 10
        while child not in processes_of(user.uid) and time.monotonic() < until:
            time.sleep(0.01)
        threads = [threading.Thread(target=lambda: [sweep(user.uid, 0) for _ in range(5)])
                   for _ in range(4)]
        for thread in threads:
            thread.start()
        sweep(user.uid, signal.SIGKILL)
        for thread in threads:
            thread.join(10)
        _, status = os.waitpid(child, 0)
        assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, status
        assert os.getresuid() == (0, 0, 0), "the sweep changed the caller's own user"
        assert not any(thread.is_alive() for thread in threads), "a sweep never returned"
    finally:
        release([user])
