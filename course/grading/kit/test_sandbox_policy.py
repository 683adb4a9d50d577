"""The sandbox's syscall policy (course/grading/syscalls.py): what an attacker reaches for
first fails inside a sandbox (graded as root) and in a process that installs the policy alone;
the same probe without the policy shows the calls would work; System V objects a sandbox user
left are removed (course/grading/users.py). The Unix sockets a sandbox may make reach nothing
outside it (the zygote's, an abstract name bound outside), and the standard library's
concurrency (asyncio, multiprocessing, concurrent.futures with every start method, a pool sized
for a large machine) works in it."""

import ctypes
import errno
import json
import os
import pwd
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

import pytest

from course.grading import grade, syscalls
from course.grading.attacks import plant
from course.grading.handout import make_handout
from course.grading.users import remove_user_ipc

pytestmark = [pytest.mark.kit, pytest.mark.timeout(600)]

# each call with arguments under which it would succeed, or fail with another errno than
# EPERM, where nothing refuses it
PROBE = """
import ctypes, json, os, socket
import pyseccomp
libc = ctypes.CDLL(None, use_errno=True)
def nr(name):
    return pyseccomp.resolve_syscall(pyseccomp.system_arch(), name)
def call(name, *args):
    ctypes.set_errno(0)
    result = libc.syscall(nr(name), *[ctypes.c_long(a) for a in args])
    return 0 if result >= 0 else ctypes.get_errno()
def sock(*args):
    try:
        socket.socket(*args).close()
        return 0
    except OSError as err:
        return err.errno
def pair(family):
    try:
        for s in socket.socketpair(family):
            s.close()
        return 0
    except OSError as err:
        return err.errno
found = {
    "socket": sock(socket.AF_INET, socket.SOCK_STREAM),
    "socket_inet6": sock(socket.AF_INET6, socket.SOCK_DGRAM),
    "socket_netlink": sock(socket.AF_NETLINK, socket.SOCK_RAW),
    "socket_packet": sock(socket.AF_PACKET, socket.SOCK_DGRAM),
    "socket_vsock": sock(40, socket.SOCK_STREAM),
    "socketpair_inet": pair(socket.AF_INET),
    "unshare": call("unshare", 0),
    "unshare_user": call("unshare", 0x10000000),
    "setns": call("setns", -1, 0),
    "mount": call("mount", 0, 0, 0, 0, 0),
    "prctl_dumpable": call("prctl", 4, 1, 0, 0, 0),
    "ptrace": call("ptrace", 16, os.getppid(), 0, 0),
    "process_vm_readv": call("process_vm_readv", os.getpid(), 0, 0, 0, 0, 0),
    "io_uring_setup": call("io_uring_setup", 1, 0),
    "keyctl": call("keyctl", 0, -1, 0),
    "add_key": call("add_key", 0, 0, 0, 0, 0),
    "perf_event_open": call("perf_event_open", 0, 0, -1, -1, 0),
    "pidfd_getfd": call("pidfd_getfd", -1, 0, 0),
    "setuid": call("setuid", os.getuid()),
    "clone_newuser": call("clone", 0x10000000 | 17, 0, 0, 0, 0),
    "shmctl_ipc_set": call("shmctl", 0, 1 | 0x100, 0),
    "semctl_ipc_set": call("semctl", 0, 0, 1 | 0x100, 0),
    "msgctl_ipc_set": call("msgctl", 0, 1, 0),
    "mq_open": call("mq_open", 0, 0, 0, 0),
}
"""
SHOULD_WORK = ("socket", "socket_inet6", "unshare", "unshare_user", "prctl_dumpable",
               "process_vm_readv")
# socket pairs always, and Unix sockets where the sandbox asks for them
UNIX = """
import socket
found = {}
for name, make in (("socketpair", socket.socketpair),
                   ("socket_unix", lambda: [socket.socket(socket.AF_UNIX)])):
    try:
        for s in make():
            s.close()
        found[name] = 0
    except OSError as err:
        found[name] = err.errno
"""


def probe_in_child(with_policy: bool, probe: str = PROBE, unix_sockets: bool = False) -> dict:
    """probe's {call: errno, 0 if it worked} in a forked child, the policy
    (policy(unix_sockets)) installed first or not."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(read_fd)
            if with_policy and not syscalls.install(unix_sockets):
                raise SystemExit(3)
            namespace = {}
            exec(probe, namespace)
            os.write(write_fd, json.dumps(namespace["found"]).encode())
        finally:
            os._exit(0)
    os.close(write_fd)
    with os.fdopen(read_fd) as pipe:
        text = pipe.read()
    os.waitpid(pid, 0)
    assert text, "the probe did not report (libseccomp missing?)"
    return json.loads(text)


def test_without_the_policy_the_probe_succeeds():
    found = probe_in_child(with_policy=False)
    assert all(found[name] == 0 for name in SHOULD_WORK), found


def test_every_probed_call_is_refused_by_the_policy_alone():
    """No namespace, no user change: what a container without CAP_SYS_ADMIN has."""
    found = probe_in_child(with_policy=True)
    allowed = {name: code for name, code in found.items() if code != errno.EPERM}
    assert not allowed, f"not refused with EPERM (0: it worked): {allowed}"


@pytest.mark.parametrize("unix_sockets", [False, True])
def test_socket_pairs_always_and_unix_sockets_where_asked(unix_sockets):
    found = probe_in_child(with_policy=True, probe=UNIX, unix_sockets=unix_sockets)
    assert found == {"socketpair": 0, "socket_unix": 0 if unix_sockets else errno.EPERM}


def reports_from_a_graded_sandbox(tmp_path, code: str, tag: str,
                                  files: dict | None = None) -> tuple[list, list]:
    """code planted in AdditionDataset.__init__ of the empty handout (ZYGOTE in it: the
    path of the grader's zygote socket), which ends by raising
    RuntimeError(f"{tag} {json.dumps(found)} END"), with files ({path: text}) added to the
    handout, graded on part p1a: what each test's sandbox found, read from the failures,
    and the failures' outputs."""
    make_handout(tmp_path / "handout")
    for name, text in (files or {}).items():
        (tmp_path / "handout" / name).write_text(text)
    code += f'\nraise RuntimeError("{tag} " + json.dumps(found) + " END")\n'
    grader = grade.setup(["p1a"], jobs=1)
    try:
        plant(tmp_path / "handout", tmp_path / "planted", "init",
              code.replace("ZYGOTE", repr(grader.zygote.path)))
        results = grade.grade(tmp_path / "planted", grader, ["p1a"], None,
                              grade.Budget(time.monotonic() + 300, 20.0))
    finally:
        grader.close()
    outputs = [t["output"] for t in results["tests"] if tag in t["output"]]
    reports = [json.loads(m) for output in outputs
               for m in re.findall(tag + r" ([\[{].*?) END", output)]
    assert reports, results["tests"][0]["output"][:500]
    return reports, outputs


def test_every_probed_call_is_refused_inside_a_graded_sandbox(tmp_path):
    """The probe in each p1a test's sandbox: every call refused."""
    reports, _ = reports_from_a_graded_sandbox(tmp_path, PROBE, "PROBE")
    for found in reports:
        allowed = {name: c for name, c in found.items() if c != errno.EPERM}
        assert not allowed, f"not refused in the sandbox (0: it worked): {allowed}"


# the sandbox's own Unix sockets, and every socket outside it it might try (ZYGOTE: the
# grader's zygote; OUTSIDE: an abstract name and PORT a TCP port the kit's process listens on)
REACH = """
import errno, json, os, socket, tempfile
found = {}
def attempt(name, action):
    try:
        found[name] = action()
    except OSError as err:
        found[name] = errno.errorcode.get(err.errno, str(err.errno))
def own(address):
    with socket.socket(socket.AF_UNIX) as server, socket.socket(socket.AF_UNIX) as client:
        server.bind(address)
        server.listen()
        client.connect(address)
        return "ok"
def zygote():
    with socket.socket(socket.AF_UNIX) as client:
        client.connect(ZYGOTE)
        socket.send_fds(client, [json.dumps({"entry": "judge"}).encode()], [client.fileno()])
        return client.recv(4096).decode() or "closed"
def outside():
    with socket.socket(socket.AF_UNIX) as client:
        client.connect(OUTSIDE)
        return "connected"
def network():
    with socket.socket(socket.AF_INET) as client:
        client.connect(("127.0.0.1", PORT))
        return "connected"
attempt("socketpair", lambda: len(socket.socketpair()) and "ok")
attempt("own path", lambda: own(os.path.join(tempfile.mkdtemp(), "s")))
attempt("own abstract", lambda: own("\\0hw-own-" + str(os.getpid())))
attempt("zygote", zygote)
attempt("outside abstract", outside)
attempt("network", network)
"""


def test_a_sandboxs_unix_sockets_reach_nothing_outside_it(tmp_path):
    """In each p1a test's sandbox: a socket pair, and (where contained) a Unix socket
    bound to a path in its folders or to an abstract name, work; the zygote's socket forks
    nothing (root's alone, and it refuses a process under the policy), an abstract name bound
    outside and a TCP port on 127.0.0.1 are not reached (nothing arrives at either)."""
    import socket

    from course.grading import landlock, sandbox

    contained = sandbox.unix_sockets_contained(landlock.abi())
    name = f"\0hw-outside-{os.getpid()}"
    with socket.socket(socket.AF_UNIX) as abstract, socket.socket(socket.AF_INET) as tcp:
        abstract.bind(name)
        tcp.bind(("127.0.0.1", 0))
        for listener in (abstract, tcp):
            listener.listen()
            listener.setblocking(False)
        code = REACH.replace("OUTSIDE", repr(name)).replace("PORT", str(tcp.getsockname()[1]))
        reports, _ = reports_from_a_graded_sandbox(tmp_path, code, "REACH")
        for listener in (abstract, tcp):
            with pytest.raises(BlockingIOError):
                listener.accept()
    own = "ok" if contained else "EPERM"
    for found in reports:
        assert found["socketpair"] == "ok", found
        assert found["own path"] == found["own abstract"] == own, found
        assert found["zygote"] in ("ENOENT", "EACCES", "EPERM", "closed"), found
        assert found["outside abstract"] in ("ECONNREFUSED", "EPERM"), found
        assert found["network"] == "EPERM", found


def asks_the_zygote(path: str, under_the_policy: bool) -> str:
    """What the zygote at path answers a forked child (root) that asks it for a weights
    reader over a socket pair's end, the syscall policy installed first or not ("" where it
    forked nothing)."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            import socket

            os.close(read_fd)
            if under_the_policy and not syscalls.install(unix_sockets=True):
                raise SystemExit(3)
            ours, theirs = socket.socketpair()
            with socket.socket(socket.AF_UNIX) as client:
                client.connect(path)
                nobody = pwd.getpwnam("nobody")
                request = {"entry": "weights", "uid": nobody.pw_uid, "gid": nobody.pw_gid}
                socket.send_fds(client, [json.dumps(request).encode()], [theirs.fileno()])
                os.write(write_fd, client.recv(4096) or b"-")
        finally:
            os._exit(0)
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as pipe:
        answer = pipe.read().decode()
    os.waitpid(pid, 0)
    return answer.strip("-")


def test_the_zygote_forks_nothing_for_a_process_under_the_policy():
    """A sandbox, and whatever it starts, runs under the policy, which the zygote lacks: the
    zygote forks nothing for such a process even where its user is the one it serves (root);
    the same request without the policy gets a child. Closed, it leaves no folder."""
    from course.grading.zygote import Zygote

    zygote = Zygote()
    try:
        refused, served = (asks_the_zygote(zygote.path, policy) for policy in (True, False))
    finally:
        zygote.close()
    assert not os.path.exists(zygote.folder), "a closed zygote left its folder behind"
    assert refused == "", f"the zygote forked for a process under the policy: {refused}"
    assert '"pid"' in served, "the zygote forked nothing at all: the test shows nothing"


def test_the_standard_librarys_concurrency_works_in_a_graded_sandbox(tmp_path):
    """course/grading/kit/stdlib_idioms.py in each p1a test's sandbox: asyncio, threads (256),
    multiprocessing's Pool (a fork pool of 72 too), Manager, Pipe and Queue,
    ProcessPoolExecutor with each start method, tempfile, logging to a file and a Python
    subprocess all work as they do on a laptop (where no Unix socket is contained, a Manager
    and the forkserver need one and are refused). What the code wrote
    to stderr before it raised is in the test's failure (tests/seam.py)."""
    from course.grading import landlock, sandbox

    module = Path(__file__).with_name("stdlib_idioms.py").read_text()
    reports, outputs = reports_from_a_graded_sandbox(
        tmp_path, "import json, sys\nfrom problem1.stdlib_idioms import run\nfound = run()\n"
        "print('error: written to stderr in the sandbox', file=sys.stderr)\n",
        "IDIOMS", files={"problem1/stdlib_idioms.py": module})
    contained = sandbox.unix_sockets_contained(landlock.abi())
    for found in reports:
        failed = {idiom: how for idiom, how in found.items() if how != "ok" and (
            contained or not ("Manager" in idiom or "forkserver" in idiom))}
        assert not failed, failed
    # what the sandbox's code wrote to stderr, in a failure its error ends (not one whose
    # test reworded it)
    assert any("error: written to stderr in the sandbox" in output for output in outputs)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as another user")
def test_system_v_objects_of_a_sandbox_user_are_removed():
    """Its shared memory, semaphores and message queues, and a segment it gave to root
    (IPC_SET, which a sandbox's policy refuses, done here without one): removed by creator."""
    import pwd

    uid = pwd.getpwnam("nobody").pw_uid
    pid = os.fork()
    if pid == 0:
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            os.setuid(uid)
            ok = [libc.shmget(0x5EEE, 4096, 0o1600) >= 0, libc.semget(0x5EEE, 1, 0o1600) >= 0,
                  libc.msgget(0x5EEE, 0o1600) >= 0]
            given = libc.shmget(0x5EEF, 4096, 0o1600)
            ds = ctypes.create_string_buffer(512)
            ok.append(given >= 0 and libc.shmctl(given, 2, ds) == 0)  # IPC_STAT
            ds[4:8] = (0).to_bytes(4, "little")  # struct ipc_perm's uid: root
            ok.append(libc.shmctl(given, 1, ds) == 0)  # IPC_SET
            os._exit(0 if all(ok) else 1)
        finally:
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0, "the objects could not be made"

    def made() -> list[str]:
        rows = []
        for kind in ("shm", "sem", "msg"):
            lines = open(f"/proc/sysvipc/{kind}").read().splitlines()
            columns = [lines[0].split().index(c) for c in ("uid", "cuid")]
            rows += [f"{kind}: {line}" for line in lines[1:]
                     if uid in [int(line.split()[c]) for c in columns]]
        return rows
    assert len(made()) == 4
    shm = open("/proc/sysvipc/shm").read().splitlines()
    owner, creator = (shm[0].split().index(c) for c in ("uid", "cuid"))
    assert any(row.split()[owner] == "0" and row.split()[creator] == str(uid)
               for row in shm[1:]), "the segment was not given to root"
    remove_user_ipc(uid)
    assert made() == []


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as the sandbox user")
def test_a_batchs_graded_code_is_closed_to_the_sandbox_users(monkeypatch):
    """--csv keeps each submission's code as graded and its results.json beside the CSV: a
    later submission's sandbox (another user) can neither list nor read an earlier one's,
    even where the CSV's folder is open to all."""
    import pwd
    import shutil
    import tempfile
    from pathlib import Path

    from course.grading import intake

    tmp_path = Path(tempfile.mkdtemp(prefix="hw_batch_", dir="/tmp"))
    monkeypatch.chdir("/")

    folder = tmp_path / "class"
    for name in ("a", "b"):
        (folder / name).mkdir(parents=True)

    def fake_grade(path, grader, parts, out, budget, keep=None):
        intake.keep_graded_code(keep, {"problem1/dataset.py": b"SOLVED = True\n"})
        out.write_text('{"score": 4.0, "tests": []}')
        return {"score": 4.0, "tests": []}
    monkeypatch.setattr(grade, "grade", fake_grade)
    tmp_path.chmod(0o755)
    grader = grade.Grader(kit=None, sandboxes=[], zygote=None, test_seconds=1.0, judges=[],
                          reader=None)
    grade.grade_folder(folder, tmp_path / "scores.csv", grader, ["p1a"], deadline=60)
    kept = tmp_path / intake.GRADED_FOLDER / "a"
    assert (kept / "problem1" / "dataset.py").exists()
    uid = pwd.getpwnam("nobody").pw_uid
    pid = os.fork()
    if pid == 0:
        try:
            os.setuid(uid)
            reached = []
            for path in (kept / "problem1" / "dataset.py", kept / "results.json"):
                try:
                    path.read_bytes()
                    reached.append(str(path))
                except OSError:
                    pass
            try:
                os.listdir(kept.parent)
                reached.append("listed")
            except OSError:
                pass
            os._exit(1 if reached else 0)
        finally:
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    shutil.rmtree(tmp_path)
    assert os.WEXITSTATUS(status) == 0, "another user read the batch's graded code"


# where a TA may keep another, world-readable checkout: none is in a sandbox's read scope
OTHER_CHECKOUTS = ("/tmp", "/opt", "/srv", "/home", "/usr/local/share", "/var", "/usr/share")


def test_another_checkout_on_the_machine_is_out_of_a_sandboxs_reach(tmp_path):
    """Landlock: a world-readable copy of a hidden test and a reference file elsewhere on the
    machine (a TA's other checkout, in each usual place) cannot be read from a graded
    sandbox, nor this repository's own."""
    import shutil
    import tempfile
    from pathlib import Path

    from provided.common import REPO_ROOT

    others, targets = [], []
    try:
        for place in OTHER_CHECKOUTS:
            if not os.path.isdir(place):
                continue
            other = Path(tempfile.mkdtemp(prefix="hw_other_checkout_", dir=place))
            others.append(other)
            other.chmod(0o755)
            for name, source in (("test_hidden_p1a.py", "def test_every_item_by_hand(): pass\n"),
                                 ("model.py", (REPO_ROOT / "problem1" / "model.py").read_text())):
                (other / name).write_text(source)
                (other / name).chmod(0o644)
                targets.append(str(other / name))
        targets += [str(REPO_ROOT / "course" / "grading" / "hidden" / "test_hidden_p1a.py"),
                    str(REPO_ROOT / "problem1" / "model.py")]
        code = (f"import json\nfound = []\nfor path in {targets!r}:\n"
                "    try:\n        open(path).read()\n        found.append(path)\n"
                "    except OSError:\n        pass\n")
        reports, _ = reports_from_a_graded_sandbox(tmp_path, code, "READ")
    finally:
        for other in others:
            shutil.rmtree(other)
    assert len(targets) >= 2 * 5 + 2, targets
    assert all(found == [] for found in reports), reports[:3]


WHO = '''
import json, os, socket


def test_who(tmp_path):
    caps = [line.split()[1] for line in open("/proc/self/status") if line.startswith("CapEff")]
    try:
        zygote = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        zygote.connect(ZYGOTE)
        socket.send_fds(zygote, [json.dumps({"entry": "judge"}).encode()], [zygote.fileno()])
        forked = zygote.recv(4096).decode()
    except OSError as error:
        forked = error.strerror
    assert False, "WHO " + json.dumps({"uid": os.geteuid(), "caps": caps,
                                       "forked": forked}) + " END"
'''


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to have a judge user")
def test_a_judge_holds_no_privilege_and_reaches_no_zygote():
    """A judge runs its tests as its own user, with no capability left, once its warden is
    forked; the zygote's socket, root's alone, forks nothing for it (a judge asks the zygote
    for nothing: its warden forks its sandboxes)."""
    from course.grading.accounts import JUDGE_USER, sandbox_pool, sandbox_user
    from course.grading.judges import Seat, run_tests
    from course.grading.users import remove_tree
    from course.grading.zygote import Zygote

    tmp_path = Path(tempfile.mkdtemp(prefix="judge_user_"))  # as the grader's: others pass
    tmp_path.chmod(0o711)
    zygote = Zygote()
    try:
        tree, work = tmp_path / "tree", tmp_path / "work"
        tree.mkdir()
        work.mkdir(mode=0o711)
        (tree / "test_who.py").write_text(f"ZYGOTE = {zygote.path!r}\n" + WHO)
        seat = Seat(zygote, sandbox_pool(1), sandbox_user(JUDGE_USER), tree, work,
                    work / "pytest")
        result = run_tests(tree, ["test_who.py::test_who"], seat, str(tree), 20.0,
                           time.monotonic() + 120, "too late")
    finally:
        zygote.close()
        remove_tree(tmp_path)
    assert "test_who.py::test_who" in result.outcomes, result.unreached
    passed, output = result.outcomes["test_who.py::test_who"]
    found = json.loads(re.search(r"WHO (\{.*?\}) END", output).group(1))
    assert found["uid"] != 0 and found["caps"] == ["0000000000000000"], found
    assert '"pid"' not in found["forked"], f"the zygote forked for a judge: {found}"


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"),
                    reason="needs root to act as an unprivileged grader")
def test_a_grader_not_run_as_root_says_so_in_one_line():
    """The grader has one isolation, the deployed one (a user per judge and per sandbox):
    run as an ordinary user it grades nothing and says, in one line, how to run it."""
    import subprocess

    from course.grading.accounts import NOT_ROOT

    nobody = pwd.getpwnam("nobody")
    folder = Path(tempfile.mkdtemp(prefix="not_root_"))
    folder.chmod(0o777)
    try:
        done = subprocess.run(
            ["setpriv", f"--reuid={nobody.pw_uid}", f"--regid={nobody.pw_gid}",
             "--clear-groups", sys.executable, "-m", "course.grading.grade", str(folder),
             "--parts", "p1a", "--code-only", "--out", str(folder / "results.json")],
            cwd=Path(grade.__file__).parents[2], capture_output=True, text=True, timeout=120)
        assert done.returncode == 2 and done.stderr.strip().splitlines() == [
            f"error: {NOT_ROOT}"], (done.returncode, done.stdout[-500:], done.stderr[-1000:])
        assert not (folder / "results.json").exists()
    finally:
        shutil.rmtree(folder)
