"""Gradescope: its results.json, the autograder zip (setup.sh, run_autograder, the grading
files) and the container's limits (CPU quota, memory), from which the grader sizes its jobs
and its time limits.

Runs in the grader (course/grading/grade.py) and in `make autograder`.
"""

import math
import os
import re
import shlex
import time
import zipfile
from pathlib import Path

from course.grading import rubric as RUBRIC
from course.grading.paths import HIDDEN_DIR
from provided.common import REPO_ROOT

DEADLINE_S = 540  # Gradescope stops an autograder at 10 minutes, with no feedback at all
GRADER_BYTES = 500 * 2**20  # the grader's own resident memory, measured: about 470 MiB
WORKER_BYTES = 300 * 2**20  # a worker's own pages on top of the grader's, with room to spare


def summary(entries: list[dict]) -> str:
    """The score table of the visible tests: one row per part, then the totals; one row per
    problem's results status (its points are hidden until publication, like the hidden
    tests': one line says how many)."""
    visible = [e for e in entries if e["visibility"] == "visible"]
    rows, totals = [], {}
    for part, (problem, letter, title, _) in RUBRIC.PARTS.items():
        mine = [e for e in visible if part in e["tags"]]
        if mine:
            rows.append((problem, f"{letter} {title} (public tests)", total(mine, "score"),
                         total(mine, "max_score")))
    lines = [f"{'problem':<10} {'part':<58} {'score':>6} {'max':>6}"]
    for problem, part, score, maximum in rows:
        lines.append(f"{problem:<10} {part:<58} {score:6.2f} {maximum:6.2f}")
        totals.setdefault(problem, [0.0, 0.0])
        totals[problem][0] += score
        totals[problem][1] += maximum
    for problem, (score, maximum) in totals.items():
        lines.append(f"{problem:<10} {'total of the visible tests':<58} {score:6.2f} "
                     f"{maximum:6.2f}")
    hidden = [e for e in entries if e["visibility"] != "visible"]
    results = total([e for e in hidden if e["tags"][0].endswith("-results")], "max_score")
    lines.append(f"{'all':<10} {'visible tests':<58} {total(visible, 'score'):6.2f} "
                 f"{total(visible, 'max_score'):6.2f}")
    for problem in RUBRIC.RESULTS:
        for entry in visible:
            if entry["tags"] == [f"{problem}-results"] and entry["output"]:
                lines.append(f"{problem:<10} results: {entry['output'].splitlines()[0]}")
    if hidden:
        lines.append(f"Hidden tests worth {total(hidden, 'max_score') - results:.2f} more points"
                     + (f", and the results' {results:.2f}," if results else "")
                     + " are graded too; their outcomes are shown when the grades are "
                     "published.")
    notes = sorted({e["output"].splitlines()[0] for e in visible
                    if not e["tags"][0].endswith("-results")
                    and e["output"].startswith(("not graded", "your submission has no"))})
    return "\n".join(lines + notes)


def total(entries: list[dict], key: str) -> float:
    return round(sum(e[key] for e in entries), 4)


def results_json(entries: list[dict], start: float, note: str = "") -> dict:
    """Gradescope's results.json. It states no total: the top-level "score" is left out
    (Gradescope's specification: "optional, but required if not on each test case below.
    Overrides total of tests if specified"), so the submission's score is Gradescope's sum
    of the entries, which it hides from students while any entry is hidden ("If test cases
    are hidden, students will not be able to see their total score"): the hidden tests'
    and the results' entries are after_published, and the visible output (summary) adds up
    the visible entries only. A student sees nothing before publication that the hidden
    entries hide. course/INSTRUCTORS.md, "Gradescope", quotes the specification."""
    output = summary(entries) + (f"\n{note}" if note else "")
    return {"execution_time": round(time.monotonic() - start), "output": output,
            "visibility": "visible", "stdout_visibility": "hidden", "tests": entries}


def score_of(results: dict) -> float:
    """A results.json's total, as Gradescope sums it: its entries' scores (the top-level
    score where one stands alone, as in run_autograder's results of a failed grader)."""
    tests = results.get("tests") or []
    return total(tests, "score") if tests else float(results.get("score", 0))


SETUP_SH = """#!/usr/bin/env bash
# Gradescope runs this once when it builds the autograder image (Ubuntu, Python >= 3.10).
# AUTOGRADER_ROOT is for the kit's own simulation of Gradescope; Gradescope leaves it unset.
set -euo pipefail
ROOT=${AUTOGRADER_ROOT:-/autograder}
apt-get update && apt-get install -y python3 python3-pip python3-venv
python3 -m venv "$ROOT/venv"
. "$ROOT/venv/bin/activate"
cd "$ROOT/source"
pip install torch --index-url https://download.pytorch.org/whl/cpu
pip install -r requirements.txt
pip install @GRADER_REQUIREMENTS@
# the data the results are recomputed on (the grader checks its SHA-1 and refuses to grade
# without it); the kit's own simulation sets AUTOGRADER_NO_DATA: no download, and
# run_autograder then grades the code alone (--code-only)
[ -n "${AUTOGRADER_NO_DATA:-}" ] || python generate_datasets.py
# the users submissions run as, a test each in turn (course/grading/users.py's POOL), and
# the judge's own; the grading files are root's alone
for user in hw-sandbox hw-sandbox1 hw-sandbox2 hw-sandbox3 hw-judge; do
  id -u "$user" >/dev/null 2>&1 || useradd --system --no-create-home \\
      --shell /usr/sbin/nologin "$user"
done
chmod 700 "$ROOT/source"
"""
RUN_AUTOGRADER = """#!/usr/bin/env bash
# Gradescope runs this for every submission: the results land in /autograder/results.
ROOT=${AUTOGRADER_ROOT:-/autograder}
. "$ROOT/venv/bin/activate"
cd "$ROOT/source"
chmod 700 "$ROOT/source" "$ROOT/results" 2>/dev/null || true
# AUTOGRADER_NO_DATA: the kit's simulation only (Gradescope leaves it unset, and setup.sh
# made the data): the results entries then say "not graded: --code-only"
python -m course.grading.grade "$ROOT/submission" --out "$ROOT/results/results.json" \
    ${AUTOGRADER_NO_DATA:+--code-only}
if [ ! -s "$ROOT/results/results.json" ]; then  # the grader itself failed: say so, score 0
  echo '{"score": 0, "tests": [], "output": "The autograder failed before it could grade' \
       'this submission; please tell the course staff."}' > "$ROOT/results/results.json"
fi
"""
# the packages of course/requirements.txt that the grader imports itself: setup.sh installs
# their lines (pinned as there), not the instructors' other tools
GRADER_PACKAGES = ("pyseccomp",)


def grader_requirements() -> list[str]:
    """course/requirements.txt's lines of GRADER_PACKAGES, as pip takes them (read when the
    zip is built: the zip ships no course/requirements.txt)."""
    found = {}
    for line in (REPO_ROOT / "course" / "requirements.txt").read_text().splitlines():
        name = re.match(r"[A-Za-z0-9._-]+", line)
        if name and name.group(0).lower() in GRADER_PACKAGES:
            found[name.group(0).lower()] = line.split("#")[0].strip()
    missing = set(GRADER_PACKAGES) - set(found)
    if missing:
        raise ValueError(f"course/requirements.txt lacks {', '.join(sorted(missing))}")
    return [found[name] for name in GRADER_PACKAGES]


def setup_sh() -> str:
    """SETUP_SH with the grader's own packages of course/requirements.txt."""
    return SETUP_SH.replace("@GRADER_REQUIREMENTS@",
                            " ".join(map(shlex.quote, grader_requirements())))


AUTOGRADER_FILES = ("requirements.txt", "conftest.py", "pyproject.toml", "generate_datasets.py",
                    "provided/**/*", "problem*/*.py", "problem1/position_table.pt",
                    "problem*/results/reference_bands.json", "tests/**/*",
                    "course/__init__.py", "course/grading/*.py", f"{HIDDEN_DIR}/*")


def autograder_files() -> list[str]:
    """The repository files the autograder needs, relative to the root."""
    names = {path.relative_to(REPO_ROOT).as_posix() for pattern in AUTOGRADER_FILES
             for path in REPO_ROOT.glob(pattern)
             if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"}
    return sorted(names)


def build_autograder(path: Path) -> None:
    """The zip Gradescope takes: setup.sh, run_autograder and the repository's grading
    files, all at the zip's root (Gradescope unpacks it into /autograder/source)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, text in (("setup.sh", setup_sh()), ("run_autograder", RUN_AUTOGRADER)):
            info = zipfile.ZipInfo(name)
            info.external_attr = 0o755 << 16
            archive.writestr(info, text)
        for name in autograder_files():
            archive.write(REPO_ROOT / name, name)
    os.replace(tmp, path)


def cgroup_files(name_v2: str, controller: str, name_v1: str) -> list[Path]:
    """Where this process's cgroup keeps a limit: its own cgroup's file (the path that
    /proc/self/cgroup names), then the mount's root (a container sees its own there)."""
    own = []
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            if controllers == "":
                own.append(Path("/sys/fs/cgroup" + path) / name_v2)
            elif controller in controllers.split(","):
                own.append(Path(f"/sys/fs/cgroup/{controller}{path}") / name_v1)
    except (OSError, ValueError):
        pass
    return own + [Path("/sys/fs/cgroup") / name_v2,
                  Path(f"/sys/fs/cgroup/{controller}") / name_v1]


def cpu_quota() -> float:
    """The CPUs this process may use: the cgroup's quota if it has one, else the cores
    it may run on (a container reports the host's count in os.cpu_count())."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (
        os.cpu_count() or 1)
    for path in cgroup_files("cpu.max", "cpu", "cpu.cfs_quota_us"):
        try:
            quota = (_cgroup2_cpu if path.name == "cpu.max" else _cgroup1_cpu)(path)
        except (OSError, ValueError, ZeroDivisionError):
            continue
        if quota:
            return min(cores, quota)
    return float(cores)


def _cgroup2_cpu(path: Path) -> float | None:
    quota, period = path.read_text().split()[:2]
    return None if quota == "max" else int(quota) / int(period)


def _cgroup1_cpu(path: Path) -> float | None:
    quota = int(path.read_text())
    period = int((path.parent / "cpu.cfs_period_us").read_text())
    return None if quota <= 0 else quota / period


def memory_limit() -> int:
    """Bytes this process may use: the cgroup's limit if it has one, else the memory
    available on the machine."""
    for path in cgroup_files("memory.max", "memory", "memory.limit_in_bytes"):
        try:
            text = path.read_text().strip()
        except OSError:
            continue
        if text.isdigit() and int(text) < 2**60:
            return int(text)
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return GRADER_BYTES + WORKER_BYTES


def default_jobs() -> int:
    """Parts graded side by side: one per whole CPU of the quota, as far as the memory
    allows (the grader's share, then WORKER_BYTES a job), at least one."""
    by_memory = (memory_limit() - GRADER_BYTES) // WORKER_BYTES
    return int(max(1, min(math.floor(cpu_quota()), by_memory)))
