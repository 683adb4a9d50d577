"""The sandbox's syscall policy: default deny, built with libseccomp (through pyseccomp).

Runs in a sandbox (course/grading/sandbox.py), which installs it last, after its limits,
namespaces and user are in place, so that the policy binds every line of submission code
and every process it starts (no_new_privs: nothing it runs can gain a privilege). Needs no
privilege itself, so it holds in an unprivileged container (Gradescope's, without
CAP_SYS_ADMIN) and when the grader is not root.

ALLOWED is what the homework's code needs on the CPU (Python, torch, numpy, RDKit,
matplotlib): files, memory, threads, signals, time, pipes, System V IPC and the I/O on the
sockets it already holds. Everything else is refused with EPERM, in particular every new
socket (the seam's channel is inherited), ptrace and process_vm_readv/writev,
prctl(PR_SET_DUMPABLE), bpf, perf_event_open, userfaultfd, the kernel's keyrings,
unshare/setns and the namespace flags of clone, mount, io_uring, module loading, and
changes of user or capability. clone3 answers ENOSYS, so that the C library falls back to
clone, whose flags the policy can read.

pyseccomp (a small ctypes binding of the system's libseccomp2, the library behind Docker's
and systemd's filters) builds the BPF program for the machine's architecture and refuses
foreign ABIs (x32 included), which a hand-written filter has to get right by itself.
"""

import errno
import functools

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
    # pipes, System V IPC (removed after every test; its control calls: see IPC_COMMANDS), held
# sockets
    "pipe", "pipe2", "shmget", "shmat", "shmdt", "semget", "semop", "semtimedop", "msgget",
    "msgsnd", "msgrcv", "sendto", "recvfrom",
    "sendmsg", "recvmsg", "sendmmsg", "recvmmsg", "shutdown", "getsockname", "getpeername",
    "getsockopt", "setsockopt",
)
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
# a few the policy refuses by name, each checked by the kit (course/grading/kit/
# test_sandbox_policy.py): what an attacker reaches for first
REFUSED_EXAMPLES = ("socket", "socketpair", "connect", "bind", "ptrace", "process_vm_readv",
                    "process_vm_writev", "bpf", "perf_event_open", "userfaultfd", "keyctl",
                    "add_key", "unshare", "setns", "mount", "io_uring_setup", "setuid",
                    "pidfd_getfd", "mq_open")


@functools.cache
def policy():
    """The policy, built once (the zygote builds it before it forks, so that a sandbox only
    loads it: importing libseccomp costs a sandbox some 20 ms); None where libseccomp is
    missing, e.g. on macOS."""
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
        built.add_rule(seccomp.ALLOW, "prctl", seccomp.Arg(0, seccomp.NE, PR_SET_DUMPABLE))
        for name, (argument, commands) in IPC_COMMANDS.items():
            for command in commands:
                built.add_rule(seccomp.ALLOW, name, seccomp.Arg(
                    argument, seccomp.MASKED_EQ, IPC_COMMAND_MASK, command))
    except (OSError, RuntimeError, ValueError):
        return None
    return built


def install() -> bool:
    """Install the policy in this process and everything it starts; whether it took (False
    where libseccomp is missing or the kernel refuses filters)."""
    built = policy()
    if built is None:
        return False
    try:
        built.load()  # sets no_new_privs first
    except (OSError, RuntimeError, ValueError):
        return False
    return True
