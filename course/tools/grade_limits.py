"""The grader under Gradescope's limits against submissions that attack the resources, and
the reference's own footprint there.

    sudo python -m course.tools.grade_limits              # cgroup v1, as root; about 4 minutes
    sudo python -m course.tools.grade_limits --footprint  # the reference, every part (3 min)

Instructors only. Each attack is the empty handout with code in AdditionDataset.__init__
(course.grading.attacks.plant): it allocates without end, fills /dev/shm, fills the disk,
starts threads without end, or makes the judge decode replies as large as the seam carries
(the grading tree's anonymous memory must then peak at 700 MiB or less). Each is graded
(part p1a, a 5 s test limit) by `python -m course.grading.grade` inside a cgroup of the
default container's size (768 MiB, 0.5 CPU). The judge-side attacks (a tensor tolist() would
blow up, a raw frame of millions of values) must bring no OOM kill, the first under 700 MiB
of anonymous memory; the memory no address space holds (files unlinked but open, memfds,
System V segments) must score 0 with the grader alive. A line per attack: whether the grader
exited 0 and wrote results.json, its score, the reason its tests give, the cgroup's peak
memory and OOM kills, and whether anything of the attack was left in /dev/shm or on the
disk. The attack must score 0 and the grader survive.

--footprint grades this repository itself (the reference: its code, its results and whatever
weights lie in problemN/results; a real submission carries eleven: the ten of Problems 1 and
2 and Problem 3's long run) with every part and the default limits, in the same cgroup, and
prints its score, the CPU-seconds of the whole process tree (cpuacct), the cgroup's peak
with page cache, the peak of its anonymous memory (memory.stat's rss, sampled every 0.1 s),
OOM kills and the wall time; it fails unless every point is earned within FOOTPRINT_CPU_S
and PEAK_ANON_MIB.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from course.grading.attacks import plant
from course.grading.handout import make_handout
from provided.common import REPO_ROOT, ArgumentParser, fail, script

ATTACKS = {
    "memory_bomb": """
        hog = []
        while True:
            hog.append(bytearray(50 * 2**20))
        """,
    "shm_fill": """
        i = 0
        while True:
            with open(f"/dev/shm/hw_fill{i}", "wb") as f:
                f.write(b"x" * (60 * 2**20))
            i += 1
        """,
    "disk_fill": """
        import os, tempfile
        i = 0
        while True:
            with open(os.path.join(tempfile.gettempdir(), f"hw_fill{i}"), "wb") as f:
                f.write(b"x" * (60 * 2**20))
            i += 1
        """,
    "thread_storm": """
        import threading, time
        for _ in range(100000):
            try:
                threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
            except RuntimeError:
                break
        raise NotImplementedError
        """,
    # replies as large as the seam carries (tests/seam.py's MAX_MESSAGE_BYTES, less room
    # for the header), one per attribute a test reads: the judge decodes each
    "max_reply": """
        import torch
        self.src = self.tgt_in = self.tgt_out = torch.zeros((16 * 2**20 - 4096) // 8,
                                                            dtype=torch.int64)
        return
        """,
    # replies shaped to grow in the judge: a tensor whose tolist() makes 8,000,000 lists,
    # and a raw frame of 3,000,000 empty dicts written on the seam's descriptor
    "tolist_reply": """
        import torch
        self.src = self.tgt_in = self.tgt_out = torch.zeros(4_000_000, 1, 1, dtype=torch.uint8)
        return
        """,
    "raw_frame": """
        import os, struct, time
        body = b'{"tree":{"$list":[' + b"{}," * 3_000_000 + b'{}]},"blobs":[]}'
        frame = struct.pack("<Q", len(body)) + body
        os.write(3, struct.pack("<Q", len(frame)) + frame)
        time.sleep(30)
        """,
    # memory no address space holds: files unlinked but kept open, memfds, System V segments
    "nameless_files": """
        import os
        block, kept = b"x" * 2**20, []
        while True:
            fd = os.memfd_create("held") if len(kept) % 2 else os.open(
                f"hw_held{len(kept)}", os.O_RDWR | os.O_CREAT, 0o600)
            for _ in range(60):
                os.write(fd, block)
            if not len(kept) % 2:
                os.unlink(f"hw_held{len(kept)}")
            kept.append(fd)
        """,
    "system_v": """
        import ctypes
        libc = ctypes.CDLL(None)
        libc.shmat.restype = ctypes.c_void_p
        while True:
            ident = libc.shmget(0, 60 * 2**20, 0o1600)
            if ident < 0:
                raise NotImplementedError
            address = libc.shmat(ident, None, 0)
            ctypes.memset(address, 1, 60 * 2**20)
            libc.shmdt(ctypes.c_void_p(address))
        """,
}
# the grading tree's anonymous peak in the cgroup where the attack is not about memory
# itself (the sandbox's own memory, files and shared memory are its budgets' business)
PEAK_BUDGET_MIB = {"max_reply": 700, "thread_storm": 700, "tolist_reply": 700}
NO_OOM_KILL = ("tolist_reply", "raw_frame")  # the judge's attacks: nothing may be killed
# (a raw frame: 725 MiB of anonymous peak in all, against 632 for max_reply; natively the
# judge that took it peaked at 421 MiB resident, the other at 376; that the rest is its own
# sandbox building 9 MB several times over is a hypothesis)
CGROUP = Path("/sys/fs/cgroup")
MEMORY_BYTES = 768 * 2**20
CPU_QUOTA_US, CPU_PERIOD_US = 50_000, 100_000
FOOTPRINT_CPU_S, PEAK_ANON_MIB = 90, 700  # the reference's budget in that cgroup


def make_cgroup(name: str) -> dict:
    """{controller: folder} of a new cgroup v1 of the default container's size."""
    folders = {c: CGROUP / c / name for c in ("cpu", "memory", "cpuacct")}
    for folder in folders.values():
        folder.mkdir()
    (folders["cpu"] / "cpu.cfs_quota_us").write_text(str(CPU_QUOTA_US))
    (folders["cpu"] / "cpu.cfs_period_us").write_text(str(CPU_PERIOD_US))
    (folders["memory"] / "memory.limit_in_bytes").write_text(str(MEMORY_BYTES))
    return folders


def grade_in(folders: dict, submission: Path, out: Path, flags: str = "--parts p1a "
             "--test-seconds 5 --jobs 1", on_wait=None) -> int:
    """The grader's exit status, run inside the cgroup; on_wait() is called every 0.1 s
    while it runs."""
    tasks = " ".join(str(f / "tasks") for f in folders.values())
    command = (f"for t in {tasks}; do echo $$ > $t; done; exec {sys.executable} -m "
               f"course.grading.grade {submission} {flags} --out {out}")
    process = subprocess.Popen(["bash", "-c", command], cwd=REPO_ROOT,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while process.poll() is None:
        if on_wait is not None:
            on_wait()
        time.sleep(0.1)
    return process.returncode


def remove_cgroup(folders: dict) -> None:
    for folder in folders.values():
        folder.rmdir()


def anonymous_peak(folders: dict) -> tuple[list, object]:
    """([the cgroup's anonymous memory peak so far], a sampler for grade_in's on_wait)."""
    anon = [0]

    def sample() -> None:
        stat = (folders["memory"] / "memory.stat").read_text().split()
        anon[0] = max(anon[0], int(stat[stat.index("rss") + 1]))
    return anon, sample


def footprint() -> int:
    """Grade the reference (every part, default limits) in the cgroup: 0 if it earns every
    point within the budgets."""
    folders = make_cgroup(f"hw_footprint_{os.getpid()}")
    anon, sample = anonymous_peak(folders)
    with tempfile.TemporaryDirectory(prefix="grade_footprint_") as scratch:
        out = Path(scratch) / "results.json"
        start = time.monotonic()
        try:
            status = grade_in(folders, REPO_ROOT, out, "", sample)
            wall = time.monotonic() - start
            cpu = int((folders["cpuacct"] / "cpuacct.usage").read_text()) / 1e9
            memory = folders["memory"]
            peak = int((memory / "memory.max_usage_in_bytes").read_text()) >> 20
            kills = (memory / "memory.oom_control").read_text().split("oom_kill ")[-1].strip()
        finally:
            remove_cgroup(folders)
        results = json.loads(out.read_text()) if out.exists() else {"tests": []}
    score = sum(t["score"] for t in results["tests"])
    top = sum(t.get("max_score", 0) for t in results["tests"])
    unverified = [t["name"] for t in results["tests"] if "unverified" in t.get("output", "")
                  and t.get("max_score")]
    ok = (status == 0 and score == top > 0 and cpu <= FOOTPRINT_CPU_S
          and anon[0] >> 20 <= PEAK_ANON_MIB and kills == "0")
    print(f"{'ok  ' if ok else 'FAIL'} the reference: exit {status}, {score:g}/{top:g}, "
          f"{cpu:.1f} CPU-s (budget {FOOTPRINT_CPU_S}), anonymous peak {anon[0] >> 20} MiB "
          f"(budget {PEAK_ANON_MIB}), peak with page cache {peak} MiB, {kills} OOM kills, "
          f"{wall:.0f} s; weights: {len(list(REPO_ROOT.glob('problem[123]/results/model_*.pth')))}"
          f"{'; unverified: ' + ', '.join(unverified) if unverified else ''}", flush=True)
    return 0 if ok else 1


def leftovers() -> list[str]:
    return [str(p) for p in Path("/dev/shm").glob("hw_fill*")]


@script
def main(argv=None) -> int:
    parser = ArgumentParser(__doc__)
    parser.add_argument("--footprint", action="store_true",
                        help="grade the reference itself in the cgroup (see above)")
    args = parser.parse_args(argv)
    if os.geteuid() != 0 or not (CGROUP / "memory").is_dir():
        fail("run as root on a machine with cgroup v1 (/sys/fs/cgroup/memory)")
    if args.footprint:
        return footprint()
    failures = 0
    with tempfile.TemporaryDirectory(prefix="grade_limits_") as scratch:
        scratch = Path(scratch)
        make_handout(scratch / "handout")
        for name, code in ATTACKS.items():
            plant(scratch / "handout", scratch / name, "init", code)
            folders = make_cgroup(f"hw_limits_{os.getpid()}_{name}")
            out = scratch / f"{name}.json"
            anon, sample = anonymous_peak(folders)
            try:
                status = grade_in(folders, scratch / name, out, on_wait=sample)
                memory = folders["memory"]
                peak = int((memory / "memory.max_usage_in_bytes").read_text()) >> 20
                kills = (memory / "memory.oom_control").read_text().split("oom_kill ")[-1]
            finally:
                remove_cgroup(folders)
            results = json.loads(out.read_text()) if out.exists() else None
            tests = [t for t in (results or {"tests": []})["tests"] if t["tags"] == ["p1a"]]
            score = sum(t["score"] for t in tests)
            reason = Counter(t["output"].split("\n")[0][:70] for t in tests).most_common(1)
            left = leftovers()
            within = anon[0] >> 20 <= PEAK_BUDGET_MIB.get(name, anon[0] >> 20)
            ok = (status == 0 and results is not None and score == 0 and not left and within
                  and (name not in NO_OOM_KILL or kills.strip() == "0"))
            failures += not ok
            print(f"{'ok  ' if ok else 'FAIL'} {name}: exit {status}, score {score}, "
                  f"{reason[0][0] if reason else 'no tests'!r}, anonymous peak "
                  f"{anon[0] >> 20} MiB, peak {peak} MiB, "
                  f"{kills.strip()} OOM kills, left behind {left}", flush=True)
            shutil.rmtree(scratch / name)
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
