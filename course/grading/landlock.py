"""The sandbox's file-system scope, with Landlock: what a sandbox may read and write.

Runs in a sandbox (course/grading/sandbox.py), which restricts itself just before its
syscall policy (course/grading/syscalls.py). Landlock is the kernel's unprivileged access
control (Linux 5.13 and newer): it needs no capability, so it holds in Gradescope's
container, where mounts and namespaces are refused.
A sandbox then reads only its own tree, the folders pytest gave its test, the Python
environment and the system's programs, libraries and configuration; it writes only its
tree and those folders. Another checkout of this repository on the same machine (with its
reference solutions and hidden tests), the grading repository itself, the graders' other
trees and the users' homes are out of its reach, whatever their permissions say.

Where the kernel has them, it is also scoped (ABI 6, Linux 6.12): it connects to no abstract
Unix socket and signals no process that a process outside its own domain made or runs (the
grader's, a judge's, a warden's, another sandbox's, anything of the machine or container it
shares a network namespace with), and (ABI 4) it binds and connects no TCP port. Without
the scoping, the sandbox makes no Unix socket at all (course/grading/sandbox.py,
unix_sockets_contained).

Called through ctypes on the three syscalls, whose numbers are the same on every
architecture Linux gives them (x86_64, aarch64).
"""

import ctypes
import os
import sys
import sysconfig

CREATE_RULESET, ADD_RULE, RESTRICT_SELF = 444, 445, 446
CREATE_RULESET_VERSION = 1
RULE_PATH_BENEATH = 1
EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1, 2, 4, 8
REMOVE_DIR, REMOVE_FILE, MAKE_CHAR, MAKE_DIR, MAKE_REG = 16, 32, 64, 128, 256
MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM = 512, 1024, 2048, 4096
REFER, TRUNCATE, IOCTL_DEV = 8192, 16384, 32768  # ABI 2, 3 and 5
NET_BIND_TCP, NET_CONNECT_TCP = 1, 2  # ABI 4
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1, 2  # ABI 6
NET_ABI, SCOPED_ABI = 4, 6
READ = EXECUTE | READ_FILE | READ_DIR
PR_SET_NO_NEW_PRIVS = 38
# read (and execute): the system's programs, libraries, configuration and kernel views; not
# /usr, /opt, /srv, /home, /var or /usr/local wholesale, where a checkout of this repository
# (its hidden tests, its reference solution) may lie world-readable
SYSTEM = ("/usr/bin", "/usr/sbin", "/usr/lib", "/usr/lib32", "/usr/lib64", "/usr/libx32",
          "/usr/libexec", "/usr/share/zoneinfo", "/lib", "/lib32", "/lib64", "/bin", "/sbin",
          "/etc", "/proc", "/sys", "/dev")
WRITABLE_DEVICES = ("/dev/null",)


class _Ruleset(ctypes.Structure):
    """The ruleset's attributes; a kernel older than a field accepts it while it is zero."""
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def abi() -> int:
    """The kernel's Landlock ABI version, 0 where it has none (or it is disabled, or this
    is not Linux)."""
    if not sys.platform.startswith("linux"):
        return 0
    libc = ctypes.CDLL(None, use_errno=True)
    version = libc.syscall(CREATE_RULESET, None, ctypes.c_size_t(0),
                           ctypes.c_uint32(CREATE_RULESET_VERSION))
    return max(0, version)


def handled(version: int) -> int:
    """Every file-system right the kernel's ABI knows: all of them are refused unless a rule
    allows them."""
    rights = (EXECUTE | WRITE_FILE | READ_FILE | READ_DIR | REMOVE_DIR | REMOVE_FILE
              | MAKE_CHAR | MAKE_DIR | MAKE_REG | MAKE_SOCK | MAKE_FIFO | MAKE_BLOCK | MAKE_SYM)
    rights |= REFER if version >= 2 else 0
    rights |= TRUNCATE if version >= 3 else 0
    return rights | (IOCTL_DEV if version >= 5 else 0)


def restrict(writable: list[str]) -> int:
    """Restrict this process (and all it starts) to reading SYSTEM and the Python
    environment, and to reading and writing writable (the sandbox's tree, its test's
    folders), scoped and with no TCP where the kernel can; the ABI version it took with (0:
    it did not, and nothing is restricted)."""
    version = abi()
    if not version:
        return 0
    libc = ctypes.CDLL(None, use_errno=True)
    everything = handled(version)
    ruleset = _Ruleset(everything,
                       NET_BIND_TCP | NET_CONNECT_TCP if version >= NET_ABI else 0,
                       SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if version >= SCOPED_ABI else 0)
    fd = libc.syscall(CREATE_RULESET, ctypes.byref(ruleset),
                      ctypes.c_size_t(ctypes.sizeof(ruleset)), ctypes.c_uint32(0))
    if fd < 0:
        return 0
    try:
        readable = [*SYSTEM, *python_folders()]
        rules = [(path, READ) for path in readable]
        rules += [(path, everything & ~(MAKE_CHAR | MAKE_BLOCK)) for path in writable]
        rules += [(path, READ_FILE | WRITE_FILE) for path in WRITABLE_DEVICES]
        for path, access in rules:
            _allow(libc, fd, path, access & everything, version)
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            return 0
        return version if libc.syscall(RESTRICT_SELF, fd, ctypes.c_uint32(0)) == 0 else 0
    finally:
        os.close(fd)


def python_folders() -> list[str]:
    """What this Python needs to run and import: the standard library and site-packages of
    the environment and of the Python it was made from, the folder of the Python library
    (libpython), the interpreter's own folder and the environment's pyvenv.cfg; never a
    prefix wholesale (/usr/local would bring /usr/local/share with it)."""
    found = {os.path.dirname(sys.executable), os.path.dirname(os.path.realpath(sys.executable)),
             os.path.join(sys.prefix, "pyvenv.cfg")}
    for prefix in {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}:
        paths = sysconfig.get_paths(vars={"base": prefix, "platbase": prefix,
                                          "installed_base": prefix,
                                          "installed_platbase": prefix})
        found |= {paths[key] for key in ("stdlib", "platstdlib", "purelib", "platlib")}
    libdir = sysconfig.get_config_var("LIBDIR")
    if libdir:
        found.add(libdir)
    return sorted(found)


def _allow(libc, ruleset_fd: int, path: str, access: int, version: int) -> None:
    """A rule giving access beneath path (a file gets only the rights files have); a path
    that does not exist is skipped."""
    try:
        target = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return
    try:
        if not os.path.isdir(path):
            access &= EXECUTE | WRITE_FILE | READ_FILE | (TRUNCATE if version >= 3 else 0) | (
                IOCTL_DEV if version >= 5 else 0)
        rule = _PathBeneath(access, target)
        libc.syscall(ADD_RULE, ruleset_fd, ctypes.c_int(RULE_PATH_BENEATH),
                     ctypes.byref(rule), ctypes.c_uint32(0))
    finally:
        os.close(target)
