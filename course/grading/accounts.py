"""The grader's accounts: the users its judges and sandboxes run as, reserved for this grader
and given back, and the trees it writes for them.

Runs in the grader only (course/grading/grade.py). What a sandbox user holds and leaves once
it runs (root's walks over its folders, its stop, the cleanup after it) is
course/grading/users.py's, which the judges' wardens run.
"""

import fcntl
import os
import pwd
import subprocess
import sys
from pathlib import Path

from course.grading.users import Sandbox

SANDBOX_USER = "hw-sandbox"
JUDGE_USER = "hw-judge"  # what a judge runs as once its warden is forked (judge.py)
POOL = 4  # sandbox users per judge, taken in turn: consecutive tests never share a user
MAX_USERS = 64  # hw-sandbox, hw-sandbox1, ... on one machine
NOT_ROOT = ("the grader runs each submission as users of its own, which takes root: "
            "sudo .venv/bin/python -m course.grading.grade ... (Gradescope runs it as root)")


def sandbox_user(base: str = SANDBOX_USER) -> Sandbox:
    """A sandbox user of this grader's own (root only: RuntimeError otherwise). Graders
    running side by side each lock a user of their own (hw-sandbox, hw-sandbox1, ...; made
    with useradd if missing), since a grader kills every process of its user after each
    test. base names another kind of user (JUDGE_USER: a judge's)."""
    if os.geteuid() != 0:
        raise RuntimeError(NOT_ROOT)
    locks = lock_folder()
    try:
        for name in user_names(base):
            lock = os.open(f"{name}.lock", os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600,
                           dir_fd=locks)
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(lock)
                continue
            entry = make_user(name)
            open_python_to_others()
            return Sandbox(entry.pw_uid, entry.pw_gid, lock)  # the lock lives as long as we do
    finally:
        os.close(locks)
    raise RuntimeError(f"all {MAX_USERS} sandbox users are taken by graders running as root "
                       "on this machine")


def user_names(base: str) -> list[str]:
    """The names of the users of one kind, in the order graders take them."""
    return [base + (str(slot) if slot else "") for slot in range(MAX_USERS)]


def make_user(name: str) -> pwd.struct_passwd:
    """The system user name, made with useradd if missing."""
    try:
        return pwd.getpwnam(name)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell",
                        "/usr/sbin/nologin", name], check=True, capture_output=True)
        return pwd.getpwnam(name)


LOCKS = "hw-grading"  # the folder of the users' lock files, in /run/lock (or /var/lock)


def lock_path() -> Path:
    base = Path("/run/lock") if Path("/run/lock").is_dir() else Path("/var/lock")
    return base / LOCKS


def lock_folder() -> int:
    """The folder where graders lock the users they take (a file each), opened: root's
    own, which a container shares with the machine it runs on (course/tools/container.py),
    so that no two graders on one machine ever take the same user."""
    path = lock_path()
    try:
        path.mkdir(mode=0o700)
    except FileExistsError:
        pass
    folder = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    info = os.fstat(folder)
    if info.st_uid != 0 or info.st_mode & 0o022:
        os.close(folder)
        raise RuntimeError(f"{path} is not root's own folder: remove it, then grade again")
    return folder


def release(users: list[Sandbox]) -> None:
    """Give back users this grader reserved (their locks), for another grader to take."""
    for user in users:
        if user.lock is not None:
            try:
                os.close(user.lock)
            except OSError:
                pass


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


def make_tree(out: Path, files: dict[str, bytes]) -> None:
    """Write files (relative path -> bytes) under out, a folder only its owner may enter
    (the warden gives a copy of it to a sandbox user, course/grading/warden.py)."""
    for name, data in files.items():
        path = out / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    (out / "tmp").mkdir(exist_ok=True)
    out.chmod(0o700)
