"""The grader's limits on the code it grades: resources, environment, time and system calls.

Students: given; `python -m provided.submission --check` applies these to the public tests
(provided/check_limits.py), as the grader applies them to each graded test, so that a test
that fails in the grader because of them fails in --check too. You need not read it.

In the grader, a sandbox (the grader's process that runs your code) runs the code under
test with the resource limits and environment below (also MAX_PROCESSES processes
and threads for its user), Landlock on its files and the syscall policy below; each test may
take TEST_CPU_S seconds of CPU time (user and system, the test's and every process of its
code's), and a test that sleeps or waits ends after WALL_FACTOR times that; a part's public
tests (and its hidden ones) together may take GROUP_TESTS times TEST_CPU_S. The grader takes
all of these from here, so --check and the grader cannot differ in them.

The syscall policy: default deny, built with libseccomp (through pyseccomp). A sandbox
installs it last, after its limits and user are in place, so that the policy
binds every line of submission code and every process it starts (no_new_privs: nothing it
runs can gain a privilege). It needs no privilege itself, so it holds in an unprivileged
container (Gradescope's, without CAP_SYS_ADMIN) and in --check.

ALLOWED is what the homework's code needs on the CPU (Python, torch, numpy, RDKit,
matplotlib): files, memory, threads, signals, time, pipes, System V IPC, Unix socket pairs
and (where the sandbox asks for them: see policy) Unix sockets, which is what asyncio,
multiprocessing and concurrent.futures use. Everything else is refused with EPERM, in
particular every network socket (AF_INET, AF_INET6, AF_NETLINK, AF_PACKET, AF_VSOCK, ...:
socket() and socketpair() are allowed for AF_UNIX alone), ptrace and process_vm_readv/writev,
prctl(PR_SET_DUMPABLE), bpf, perf_event_open, userfaultfd, the kernel's keyrings,
unshare/setns and the namespace flags of clone, mount, io_uring, module loading, and
changes of user or capability. clone3 answers ENOSYS, so that the C library falls back to
clone, whose flags the policy can read.

pyseccomp (a small ctypes binding of the system's libseccomp2, the library behind Docker's
and systemd's filters) builds the BPF program for the machine's architecture and refuses
foreign ABIs (x32 included), which a hand-written filter has to get right by itself.
"""

import ctypes
import errno
import functools
import sys

try:
    import resource
except ImportError:  # Windows: none of the limits below
    resource = None

MAX_FILE_BYTES = 64 * 2**20  # no file written larger than this
MAX_OPEN_FILES = 256
MAX_ADDRESS_BYTES = 4 * 2**30  # a process's address space
MAX_PROCESSES = 1024  # processes and threads of a sandbox's user: Pool(os.cpu_count())
# or a ThreadPoolExecutor of as many on a 256-core machine fits (a worker holds one thread:
# OMP_NUM_THREADS=1); a fork bomb stops there, and the address space and CPU time limits and
# the kill of everything of the user at the test's end bound the rest
MALLOC_ARENAS = 8  # the C library's malloc arenas: by default 8 per core, each reserving 64
# MiB of address space, so that a thread pool sized by a large machine's cores would run out
# of MAX_ADDRESS_BYTES with almost nothing allocated
ENVIRONMENT = {"OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg",
               "MALLOC_ARENA_MAX": str(MALLOC_ARENAS)}  # one torch thread; no display
TEST_CPU_S = 20  # one test's CPU time limit, its code's and the test's own
WALL_FACTOR = 5  # a test that sleeps or waits ends after this many times its CPU limit
# (the grader counts the time in which none of its threads runs or waits for a CPU; --check
# counts wall-clock time)
GROUP_TESTS = 3  # a part's public tests together: this many tests' limits
# what a test over a time limit says, in the grader and in --check
OVER_TEST_CPU = ("not graded: this test ran over its time limit of {seconds:.0f} CPU-seconds "
                 "(an endless loop, or a far too slow implementation?)")
OVER_GROUP_CPU = ("not graded: the tests of {group} ran over their time limit of "
                  "{seconds:.0f} CPU-seconds together")
M_ARENA_MAX = -8  # mallopt's parameter (glibc)


def limit(kind: int, value: int) -> None:
    """Set resource limit kind (soft and hard) to value, or to the hard limit if lower."""
    soft, hard = resource.getrlimit(kind)
    value = value if hard == resource.RLIM_INFINITY else min(value, hard)
    resource.setrlimit(kind, (value, value))


def limit_resources() -> bool:
    """The grader's file size, core dump, open file and address space limits on this
    process and all it starts, and malloc's arenas (MALLOC_ARENAS) in this one; whether
    they could be set (not on Windows)."""
    if resource is None:
        return False
    limit(resource.RLIMIT_FSIZE, MAX_FILE_BYTES)
    limit(resource.RLIMIT_CORE, 0)
    limit(resource.RLIMIT_NOFILE, MAX_OPEN_FILES)
    limit(resource.RLIMIT_AS, MAX_ADDRESS_BYTES)
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None).mallopt(M_ARENA_MAX, MALLOC_ARENAS)
        except (OSError, AttributeError):  # a C library without mallopt
            pass
    return True



ALLOWED = (
    # files and folders
    "read", "write", "readv", "writev", "pread64", "pwrite64", "preadv", "pwritev", "preadv2",
    "pwritev2", "open", "openat", "openat2", "close", "close_range", "creat", "lseek",
    "stat", "fstat", "lstat", "newfstatat", "statx", "statfs", "fstatfs", "access",
    "faccessat", "faccessat2", "getdents", "getdents64", "getcwd", "chdir", "fchdir",
    "mkdir", "mkdirat", "rmdir", "unlink", "unlinkat", "rename", "renameat", "renameat2",
    "link", "linkat", "symlink", "symlinkat", "readlink", "readlinkat", "chmod", "fchmod",
    "fchmodat", "chown", "fchown", "fchownat", "lchown", "truncate", "ftruncate",
    "fallocate", "fadvise64", "readahead", "fsync", "fdatasync", "sync", "syncfs",
    "sync_file_range", "flock", "fcntl", "ioctl", "dup", "dup2", "dup3", "umask", "utime",
    "utimes", "utimensat", "futimesat", "getxattr", "lgetxattr", "fgetxattr", "listxattr",
    "llistxattr", "flistxattr", "setxattr", "lsetxattr", "fsetxattr", "removexattr",
    "lremovexattr", "fremovexattr", "copy_file_range", "sendfile", "splice", "tee",
    "vmsplice", "inotify_init", "inotify_init1", "inotify_add_watch", "inotify_rm_watch",
    # memory
    "brk", "mmap", "munmap", "mremap", "mprotect", "madvise", "mincore", "msync", "mlock",
    "mlock2", "munlock", "mlockall", "munlockall", "membarrier", "memfd_create", "mbind",
    "get_mempolicy", "set_mempolicy", "remap_file_pages", "pkey_alloc", "pkey_free",
    "pkey_mprotect",
    # processes and threads (clone: see clone_rules)
    "fork", "vfork", "execve", "execveat", "exit", "exit_group", "wait4", "waitid",
    "set_tid_address", "set_robust_list", "get_robust_list", "rseq", "futex",
    "futex_waitv", "arch_prctl", "getpid", "getppid", "gettid", "getuid", "geteuid",
    "getgid", "getegid", "getgroups", "getresuid", "getresgid", "getpgid", "getpgrp",
    "setpgid", "getsid", "setsid", "getpriority", "setpriority", "getrlimit", "setrlimit",
    "prlimit64", "getrusage", "sched_yield", "sched_getaffinity", "sched_setaffinity",
    "sched_getparam", "sched_setparam", "sched_getscheduler", "sched_setscheduler",
    "sched_getattr", "sched_setattr", "sched_get_priority_max", "sched_get_priority_min",
    "sched_rr_get_interval", "getcpu", "capget", "uname", "sysinfo", "times",
    "ioprio_get", "ioprio_set", "pidfd_open", "pidfd_send_signal", "restart_syscall",
    # signals
    "rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "rt_sigpending", "rt_sigsuspend",
    "rt_sigtimedwait", "rt_sigqueueinfo", "rt_tgsigqueueinfo", "sigaltstack", "kill",
    "tkill", "tgkill", "signalfd", "signalfd4", "pause", "alarm",
    # time and waiting
    "nanosleep", "clock_nanosleep", "clock_gettime", "clock_getres", "gettimeofday", "time",
    "getitimer", "setitimer", "timer_create", "timer_delete", "timer_settime",
    "timer_gettime", "timer_getoverrun", "timerfd_create", "timerfd_settime",
    "timerfd_gettime", "poll", "ppoll", "select", "pselect6", "epoll_create",
    "epoll_create1", "epoll_ctl", "epoll_wait", "epoll_pwait", "epoll_pwait2", "eventfd",
    "eventfd2", "getrandom",
    # pipes, System V IPC (removed after every test; its control calls: see IPC_COMMANDS),
    # sockets it holds (only Unix ones can be made: see policy)
    "pipe", "pipe2", "shmget", "shmat", "shmdt", "semget", "semop", "semtimedop", "msgget",
    "msgsnd", "msgrcv", "sendto", "recvfrom", "sendmsg", "recvmsg", "sendmmsg", "recvmmsg",
    "shutdown", "getsockname", "getpeername", "getsockopt", "setsockopt", "bind", "connect",
    "listen", "accept", "accept4",
)
AF_UNIX = 1
# clone's flags that make new namespaces (or share a parent's view across one)
CLONE_NAMESPACES = (0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000
                    | 0x20000000 | 0x40000000 | 0x00000080)
PR_SET_DUMPABLE = 4
# the System V control commands a sandbox may use (each call: the argument holding it):
# every one but IPC_SET, which could give an object to another user (root, whose objects
# the cleanup after a test would not look for); POSIX message queues (mq_*) are refused
IPC_COMMANDS = {"shmctl": (1, (0, 2, 3, 11, 12, 13, 14, 15)),  # RMID, STAT, INFO, SHM_*
                "semctl": (2, (0, 2, 3, *range(11, 21))),  # RMID, STAT, INFO, GET*/SET*, SEM_*
                "msgctl": (1, (0, 2, 3, 11, 12, 13))}  # RMID, STAT, INFO, MSG_*
IPC_COMMAND_MASK = 0xFF  # the C library adds IPC_64 (0x100) to the command
# a few the policy refuses by name, each checked by the grader's kit: what an attacker
# reaches for first
REFUSED_EXAMPLES = ("socket", "ptrace", "process_vm_readv",
                    "process_vm_writev", "bpf", "perf_event_open", "userfaultfd", "keyctl",
                    "add_key", "unshare", "setns", "mount", "io_uring_setup", "setuid",
                    "pidfd_getfd", "mq_open")


@functools.cache
def policy(unix_sockets: bool = False):
    """The policy, built once (the zygote builds both before it forks, so that a sandbox only
    loads one: importing libseccomp costs a sandbox some 20 ms); None where libseccomp is
    missing, e.g. on macOS. socketpair(AF_UNIX) is always allowed (a pair names nothing and
    reaches nothing); socket(AF_UNIX) only with unix_sockets, which a sandbox asks for where
    no Unix socket it makes can reach one outside it (the grader's unix_sockets_contained)."""
    try:
        import pyseccomp as seccomp
    except (ImportError, OSError):  # pyseccomp loads libseccomp when imported
        return None
    try:
        built = seccomp.SyscallFilter(defaction=seccomp.ERRNO(errno.EPERM))
        for name in ALLOWED:
            if seccomp.resolve_syscall(seccomp.system_arch(), name) >= 0:  # -1: not here
                built.add_rule(seccomp.ALLOW, name)
        built.add_rule(seccomp.ALLOW, "clone",
                       seccomp.Arg(0, seccomp.MASKED_EQ, CLONE_NAMESPACES, 0))
        built.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")
        for name in ("socketpair", "socket") if unix_sockets else ("socketpair",):
            built.add_rule(seccomp.ALLOW, name, seccomp.Arg(0, seccomp.EQ, AF_UNIX))
        built.add_rule(seccomp.ALLOW, "prctl", seccomp.Arg(0, seccomp.NE, PR_SET_DUMPABLE))
        for name, (argument, commands) in IPC_COMMANDS.items():
            for command in commands:
                built.add_rule(seccomp.ALLOW, name, seccomp.Arg(
                    argument, seccomp.MASKED_EQ, IPC_COMMAND_MASK, command))
    except (OSError, RuntimeError, ValueError):
        return None
    return built


def install(unix_sockets: bool = False) -> bool:
    """Install the policy (policy(unix_sockets)) in this process and everything it starts;
    whether it took (False where libseccomp is missing or the kernel refuses filters)."""
    built = policy(unix_sockets)
    if built is None:
        return False
    try:
        built.load()  # sets no_new_privs first
    except (OSError, RuntimeError, ValueError):
        return False
    return True
