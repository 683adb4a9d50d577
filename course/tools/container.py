"""A command run as Gradescope runs the grader: as root in a container, with a real runtime.

    sudo .venv/bin/python -m course.tools.container -- pytest course/grading/kit/test_warden.py
    make grade-container      # the kit's grading tests there (CI's third pass)

Instructors only. podman (Debian's package) with runc, over this machine's own root
filesystem as a throwaway overlay (`--rootfs /:O`: no image is pulled; the repository is
mounted at its own path as an overlay too, so nothing the command writes survives it),
with the runtime's defaults for what a Gradescope container gets: Docker's default
capabilities (no CAP_SYS_ADMIN, CAP_SYS_PTRACE, CAP_SYS_RESOURCE, CAP_IPC_OWNER ...), the
runtime's default seccomp profile (no unshare, mount, keyctl ...), no privilege, the cgroup
fs read-only, no network, and the open-file and process limits a container usually has.
The command runs in the repository with this machine's environment (the same Python and
virtual environment), and its exit status is the tool's. The container first says what it
got (capabilities, seccomp mode, writable cgroup mounts) and stops if that is more than
Gradescope's container has.

It may run while graders run on this machine (CI runs it beside `pytest course`): its /tmp,
/var/tmp and repository are its own (a grader closes the repository to other users while it
grades: measured, a grader in the container did so to a weights reader outside), and it
shares one folder, where graders lock the sandbox and judge users they take
(course/grading/users.py), with every user made here first, so that a grader in the
container and one outside never take the same uid (a grader signals and cleans up after
every process and file of its users).

podman's other runtime, crun, refuses a machine whose cgroups are mixed v1 and v2 (this
project's CI machine), hence runc; ulimits above the machine's hard limits are refused.
"""

import os
import shutil
import subprocess

from course.grading.accounts import (
    JUDGE_USER,
    SANDBOX_USER,
    lock_folder,
    lock_path,
    make_user,
    user_names,
)
from provided.common import REPO_ROOT, ArgumentParser, fail, script

RUNC = "/usr/sbin/runc"
# what the container must look like before the command runs (sh, in the container)
CHECK = r"""
caps=$(awk '/^CapEff/ {print $2}' /proc/self/status)
seccomp=$(awk '/^Seccomp:/ {print $2}' /proc/self/status)
rw_cgroup=$(awk '{for (i = 7; i < NF; i++) if ($i == "-") {kind = $(i + 1); break}}
  kind ~ /^cgroup/ && $6 ~ /(^|,)rw(,|$)/' /proc/self/mountinfo | wc -l)
echo "container: CapEff $caps, seccomp mode $seccomp, writable cgroup mounts $rw_cgroup"
[ "$seccomp" = 2 ] && [ "$rw_cgroup" = 0 ] && [ $(( 0x$caps & (1 << 21 | 1 << 19) )) = 0 ] \
  || { echo "error: the container has more than Gradescope's" >&2; exit 3; }
"""


def podman_command(command: list[str]) -> list[str]:
    """The podman command line that runs command (argv) in the repository, in the container."""
    environment = [f"--env={name}={os.environ[name]}" for name in ("PATH", "VIRTUAL_ENV")
                   if name in os.environ]
    inner = CHECK + 'cd "$1" && shift && exec "$@"'
    scratch = [f"--tmpfs={folder}:rw,exec,nosuid,nodev,mode=1777,notmpcopyup"
               for folder in ("/tmp", "/var/tmp")]
    return ["podman", "--runtime", RUNC, "run", "--rm", "--network", "none",
            "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=4096:4096",
            *environment, *scratch, f"--volume={REPO_ROOT}:{REPO_ROOT}:O",
            f"--volume={lock_path()}:{lock_path()}", "--rootfs", "/:O",
            "sh", "-c", inner, "sh", str(REPO_ROOT), *command]


def make_users() -> None:
    """Every sandbox and judge user a grader may take, made on this machine first (a
    useradd in the container would write the container's own /etc/passwd, with uids this
    machine may give other users), and the shared lock folder."""
    for name in user_names(SANDBOX_USER) + user_names(JUDGE_USER):
        make_user(name)
    os.close(lock_folder())


@script
def main(argv=None) -> int:
    parser = ArgumentParser(__doc__)
    parser.add_argument("command", nargs="+", help="the command and its arguments (after --)")
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        fail("run it as root (sudo .venv/bin/python -m course.tools.container -- ...): "
             "Gradescope's container runs the grader as root")
    if shutil.which("podman") is None or not os.path.exists(RUNC):
        fail("podman and runc are missing: apt-get install podman runc")
    make_users()
    return subprocess.run(podman_command(args.command)).returncode


if __name__ == "__main__":
    raise SystemExit(main())
