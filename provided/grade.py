"""Grade a submission, or a folder of them, part by part; or build the Gradescope autograder.

    python -m provided.grade SUBMISSION_DIR --out results.json     # one submission
    python -m provided.grade SUBMISSIONS_DIR --csv scores.csv      # a folder of submissions
    python -m provided.grade --autograder build/autograder.zip      # make autograder

Instructors only: the handout leaves this file out. The points are in grading/rubric.py.

Each part (p1a .. p3e) is graded on its own. The grader copies this repository's code and
tests (public tests/ and hidden grading/hidden/) into a scratch folder, puts the
submission's functions of that part in place of the reference's (provided.handout.splice,
function by function), and runs the tests marked with the part, with a timeout per test.
Every other part keeps the reference code, so one mistake costs points in one part only,
and the provided code and the tests are always this repository's own. A part's points are
shared equally among its tests. A problem whose results/metrics.json was submitted is also
checked against problemN/results/reference_bands.json, if the bands exist.

Output: a score table per problem and part on stdout, and Gradescope's results.json
(`score`, `tests[]` with `name`, `score`, `max_score`, `visibility`, `output`). The exit
status is 0 whenever the submission could be graded, whatever its score.
"""

import csv
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from provided.common import REPO_ROOT, ArgumentParser, fail, read_json, write_json
from provided.handout import region_functions, splice, strip_solutions

TEST_DIRS = ("tests", "grading/hidden")
HIDDEN = "grading/hidden/"
REPORT_ENV = "GRADE_REPORT"  # where the pytest plugin below writes the outcomes
NOT_COPIED = ("data/", "grading/alternatives/", "build/")
SKIPPED_FOLDERS = {".git", ".venv", ".venv-ci", "__pycache__", ".pytest_cache", ".ruff_cache",
                   ".hypothesis", "attention_homework.egg-info"}
PART_TIMEOUT_S = 900  # a whole part's pytest run; each test also has pytest-timeout's limit
OUTPUT_CHARS = 3000


def load_rubric(repo: Path = REPO_ROOT):
    """grading/rubric.py as a module (it is not a package the handout ships)."""
    spec = importlib.util.spec_from_file_location("rubric", repo / "grading" / "rubric.py")
    rubric = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(rubric)
    return rubric


# ------------------------------------------------------------------ the pytest plugin
# Loaded in the scratch tree with `-p provided.grade`: it records every test's outcome.
_outcomes: dict = {}


def pytest_runtest_logreport(report) -> None:
    """A test passes if none of its phases failed or skipped (a graded test never skips)."""
    entry = _outcomes.setdefault(report.nodeid, {"outcome": "passed", "output": ""})
    if report.failed or report.skipped:
        entry["outcome"] = "failed" if report.failed else "skipped"
        entry["output"] += report.longreprtext[-OUTPUT_CHARS:]


def pytest_sessionfinish(session) -> None:
    path = os.environ.get(REPORT_ENV)
    if path:
        Path(path).write_text(json.dumps(_outcomes))


# ---------------------------------------------------------------------- grading trees
def find_root(submission: Path) -> Path | None:
    """The folder of a submission that holds problem1/, problem2/ or problem3/ (Gradescope
    may unpack a repository one level down)."""
    for folder in [submission, *sorted(p for p in submission.iterdir() if p.is_dir())]:
        if any((folder / f"problem{n}").is_dir() for n in (1, 2, 3)):
            return folder
    return None


def reference_files(keep_bands: bool = False) -> list[str]:
    """The repository's files that grading needs (code, tests, hidden tests, rubric), as
    paths relative to the root: no data, results, weights, caches or virtual environments.
    Read from the folder itself, so that it works where the repository is no git clone."""
    names = []
    for path in sorted(REPO_ROOT.rglob("*")):
        name = path.relative_to(REPO_ROOT).as_posix()
        parts = set(name.split("/"))
        if (not path.is_file() or parts & SKIPPED_FOLDERS or name.startswith(NOT_COPIED)
                or path.suffix in (".pth", ".pyc", ".tmp")):
            continue
        if "/results/" in name and not (keep_bands and name.endswith("reference_bands.json")):
            continue
        names.append(name)
    return names


def copy_reference(out: Path) -> None:
    for name in reference_files():
        target = out / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO_ROOT / name, target)


def part_tree(base: Path, out: Path, submission: Path, part: str, regions: dict) -> None:
    """out = base with the submission's functions of `part` in place of the reference's,
    plus any module of its own the submission added to a problem folder (a helper file)."""
    shutil.copytree(base, out)
    for added in submission.glob("problem*/*.py"):
        target = out / added.relative_to(submission)
        if not target.exists():
            shutil.copy2(added, target)
    for name, parts in regions.items():
        mine = [function for function, p in parts.items() if p == part]
        if not mine:
            continue
        reference = (REPO_ROOT / name).read_text()
        submitted = submission / name
        student = submitted.read_text() if submitted.exists() else strip_solutions(reference)
        others = [f for f in region_functions(reference) if f not in mine]
        try:
            source = splice(student, reference, others)
        except SyntaxError:
            source = student  # it does not import: the part's tests fail, as they should
        (out / name).write_text(source)


def test_dirs(tree: Path) -> list[str]:
    return [name for name in TEST_DIRS if (tree / name).is_dir()]


def collect(tree: Path, part: str) -> list[str]:
    """The node ids of the part's tests (collected in the reference tree)."""
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", part,
                           "-p", "no:cacheprovider", *test_dirs(tree)], cwd=tree, env=_env(tree),
                          capture_output=True, text=True)
    ids = [line for line in done.stdout.splitlines() if "::" in line]
    if not ids:
        raise RuntimeError(f"no tests collected for {part}:\n{done.stdout[-2000:]}"
                           f"{done.stderr[-2000:]}")
    return ids


def run_part(tree: Path, part: str) -> dict:
    """{node id: {'outcome', 'output'}} of the part's tests in tree."""
    report = tree / ".grade_report.json"
    env = {**_env(tree), REPORT_ENV: str(report)}
    try:
        subprocess.run([sys.executable, "-m", "pytest", "-q", "-m", part, "-p", "provided.grade",
                        "-p", "no:cacheprovider", *test_dirs(tree)], cwd=tree, env=env,
                       capture_output=True, text=True, timeout=PART_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pass  # every test without a recorded pass scores 0
    return json.loads(report.read_text()) if report.exists() else {}


def _env(tree: Path) -> dict:
    return {**os.environ, "PYTHONPATH": str(tree), "PYTHONDONTWRITEBYTECODE": "1"}


# --------------------------------------------------------------------------- scoring
def grade_code(submission: Path, rubric, parts: list[str], jobs: int) -> list[dict]:
    """One Gradescope test entry per test of every part."""
    with tempfile.TemporaryDirectory(prefix="grade_") as scratch:
        scratch = Path(scratch)
        base = scratch / "reference"
        copy_reference(base)

        def grade_part(part: str) -> list[dict]:
            expected = collect(base, part)
            tree = scratch / part
            part_tree(base, tree, submission, part, rubric.REGIONS)
            outcomes = run_part(tree, part)
            problem, letter, title, points = rubric.PARTS[part]
            share = points / len(expected)
            entries = []
            for node in expected:
                result = outcomes.get(node, {"outcome": "failed",
                                             "output": "did not run (import error or timeout)"})
                passed = result["outcome"] == "passed"
                hidden = node.startswith(HIDDEN)
                entries.append({
                    "name": f"{problem} {letter} ({part}): {node.split('::', 1)[1]}"
                            + (" [hidden]" if hidden else ""),
                    "score": share if passed else 0.0, "max_score": share,
                    "visibility": "after_published" if hidden else "visible",
                    "output": "" if passed else result["output"], "tags": [part]})
            return entries

        with ThreadPoolExecutor(max_workers=jobs) as pool:
            return [entry for entries in pool.map(grade_part, parts) for entry in entries]


def grade_results(submission: Path, rubric) -> list[dict]:
    """Headline numbers of each submitted results/metrics.json against the reference bands."""
    entries = []
    for problem, points in rubric.RESULTS.items():
        bands_path = REPO_ROOT / problem / "results" / "reference_bands.json"
        metrics = submission / problem / "results" / "metrics.json"
        if not (bands_path.exists() and metrics.exists()):
            continue
        try:
            submitted = _submitted_quantities(submission / problem / "results", problem)
        except (ValueError, KeyError, TypeError, OSError) as err:
            entries.append({"name": f"{problem} results", "score": 0.0, "max_score": points,
                            "visibility": "visible", "tags": [f"{problem}-results"],
                            "output": f"could not read {metrics.name}: {err}"})
            continue
        bands = read_json(bands_path)
        checks = [(run, q, band) for run, quantities in bands.items()
                  for q, band in quantities.items() if run in submitted]
        for run, quantity, band in checks:
            value = submitted[run].get(quantity)
            inside, accepted = in_band(value, band)
            entries.append({
                "name": f"{problem} results: {run} {quantity}",
                "score": points / len(checks) if inside else 0.0,
                "max_score": points / len(checks), "visibility": "visible",
                "tags": [f"{problem}-results"],
                "output": f"yours {value}; reference: {accepted}"})
    return entries


def in_band(value, band: dict) -> tuple[bool, str]:
    """(whether value is accepted, the band in words). None (e.g. steps_to_95 never reached)
    is accepted when some reference seed had None too."""
    missing = band.get("missing", [])
    words = f"{band['n_seeds'] + len(missing)} seeds"
    if missing:
        words += f", {len(missing)} of them without a value (e.g. never reached)"
    if not band["n_seeds"]:
        return value is None, words
    low, high = band_limits(band)
    words += (f"; mean {band['mean']:.4g}, sd {band['sd'] or 0:.2g}, range "
              f"[{band['min']:.4g}, {band['max']:.4g}]; accepted [{low:.4g}, {high:.4g}]")
    if value is None:
        return bool(missing), words
    return low <= value <= high, words


def band_limits(band: dict) -> tuple[float, float]:
    """The accepted interval: the seeds' range widened by two standard deviations (and by
    1% of the mean's scale, so that a band of identical seeds still admits rounding)."""
    widen = 2 * (band["sd"] or 0.0) + 0.01 * max(abs(band["mean"]), 1e-3)
    return band["min"] - widen, band["max"] + widen


def _submitted_quantities(results: Path, problem: str) -> dict:
    """The quantities tools/bands.py computes, read from a submission's results folder."""
    spec = importlib.util.spec_from_file_location("bands", REPO_ROOT / "tools" / "bands.py")
    bands = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bands)
    return bands.QUANTITIES[problem](results)


def summary(entries: list[dict], rubric) -> str:
    """The score table: one row per part and per problem's results, then the total."""
    rows, totals = [], {}
    for part, (problem, letter, title, _) in rubric.PARTS.items():
        mine = [e for e in entries if part in e["tags"]]
        if mine:
            rows.append((problem, f"{letter} {title}", _sum(mine, "score"),
                         _sum(mine, "max_score")))
    for problem in rubric.RESULTS:
        mine = [e for e in entries if f"{problem}-results" in e["tags"]]
        if mine:
            rows.append((problem, "results within the reference bands", _sum(mine, "score"),
                         _sum(mine, "max_score")))
    lines = [f"{'problem':<10} {'part':<44} {'score':>7} {'max':>6}"]
    for problem, part, score, maximum in rows:
        lines.append(f"{problem:<10} {part:<44} {score:7.2f} {maximum:6.2f}")
        totals.setdefault(problem, [0.0, 0.0])
        totals[problem][0] += score
        totals[problem][1] += maximum
    for problem, (score, maximum) in totals.items():
        lines.append(f"{problem:<10} {'total':<44} {score:7.2f} {maximum:6.2f}")
    lines.append(f"{'all':<10} {'':<44} {_sum(entries, 'score'):7.2f} "
                 f"{_sum(entries, 'max_score'):6.2f}")
    return "\n".join(lines)


def _sum(entries: list[dict], key: str) -> float:
    return round(sum(e[key] for e in entries), 4)


def grade(submission: Path, parts: list[str], jobs: int) -> dict:
    """Gradescope's results.json for one submission (its root folder)."""
    rubric = load_rubric()
    start = time.perf_counter()
    entries = grade_code(submission, rubric, parts, jobs) + grade_results(submission, rubric)
    table = summary(entries, rubric)
    return {"score": _sum(entries, "score"), "max_score": _sum(entries, "max_score"),
            "execution_time": round(time.perf_counter() - start), "output": table,
            "visibility": "visible", "stdout_visibility": "hidden", "tests": entries}


# ------------------------------------------------------------------------ autograder
SETUP_SH = """#!/usr/bin/env bash
# Gradescope runs this once when it builds the autograder image.
set -euo pipefail
apt-get update && apt-get install -y python3 python3-pip python3-venv
cd /autograder/source
python3 -m venv /autograder/venv
. /autograder/venv/bin/activate
pip install torch --index-url https://download.pytorch.org/whl/cpu
pip install -r requirements.txt
"""

RUN_AUTOGRADER = """#!/usr/bin/env bash
# Gradescope runs this for every submission: the results land in /autograder/results.
. /autograder/venv/bin/activate
cd /autograder/source
python -m provided.grade /autograder/submission --out /autograder/results/results.json
"""


def build_autograder(path: Path) -> None:
    """The zip Gradescope takes: setup.sh, run_autograder and the repository under source/
    (code, tests, hidden tests, rubric, reference bands; no data, results or weights)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, text in (("setup.sh", SETUP_SH), ("run_autograder", RUN_AUTOGRADER)):
            info = zipfile.ZipInfo(name)
            info.external_attr = 0o755 << 16
            archive.writestr(info, text)
        for name in reference_files(keep_bands=True):
            archive.write(REPO_ROOT / name, f"source/{name}")
    os.replace(tmp, path)


# ------------------------------------------------------------------------------- main
def parse_args(argv=None):
    parser = ArgumentParser(__doc__)
    parser.add_argument("submission", type=Path, nargs="?",
                        help="a submission's folder, or a folder of submission folders")
    parser.add_argument("--out", type=Path, default=Path("results.json"),
                        help="Gradescope results file of one submission (default %(default)s)")
    parser.add_argument("--csv", type=Path, default=None,
                        help="grade every submission folder inside SUBMISSION into this CSV")
    parser.add_argument("--parts", nargs="+", default=None, help="only these parts, e.g. p1b")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                        help="parts graded side by side (default: the number of cores)")
    parser.add_argument("--autograder", type=Path, default=None,
                        help="write the Gradescope autograder zip here and stop")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.autograder is not None:
        build_autograder(args.autograder)
        print(f"wrote {args.autograder}")
        return 0
    if args.submission is None or not args.submission.is_dir():
        fail(f"{args.submission} is not a folder: give a submission's folder")
    rubric = load_rubric()
    parts = args.parts or list(rubric.PARTS)
    unknown = [p for p in parts if p not in rubric.PARTS]
    if unknown:
        fail(f"--parts {' '.join(unknown)}: not parts of the rubric ({' '.join(rubric.PARTS)})")
    if args.csv is not None:
        return grade_folder(args.submission, args.csv, parts, args.jobs, rubric)
    root = find_root(args.submission)
    if root is None:
        fail(f"{args.submission} holds no problem1/, problem2/ or problem3/ folder: "
             "is it a submission?")
    results = grade(root, parts, args.jobs)
    write_json(args.out, results)
    print(results["output"])
    print(f"wrote {args.out}")
    return 0


def grade_folder(folder: Path, csv_path: Path, parts: list[str], jobs: int, rubric) -> int:
    """One CSV row per submission folder inside folder: total and per-part scores."""
    submissions = sorted(p for p in folder.iterdir() if p.is_dir())
    columns = ["submission", "score", "max_score", *parts, "results"]
    rows = []
    for path in submissions:
        root = find_root(path)
        if root is None:
            print(f"skipping {path.name}: no problem folders in it", file=sys.stderr)
            rows.append({"submission": path.name, "score": 0.0})
            continue
        results = grade(root, parts, jobs)
        by_part = {part: _sum([t for t in results["tests"] if part in t["tags"]], "score")
                   for part in parts}
        result_tests = [t for t in results["tests"] if t["tags"][0].endswith("-results")]
        rows.append({"submission": path.name, "score": results["score"],
                     "max_score": results["max_score"], **by_part,
                     "results": _sum(result_tests, "score")})
        print(f"{path.name}: {results['score']:.2f} / {results['max_score']:.2f}", flush=True)
    csv_path.parent.mkdir(parents=True, exist_ok=True)
    with open(csv_path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {csv_path}: {len(rows)} submissions")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
