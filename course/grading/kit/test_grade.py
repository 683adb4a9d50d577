"""The grading machinery: splicing, the region map, the handout's contents, the grader.

The full acceptance runs (the reference and the alternative solutions grade 100 %, one part
filled earns exactly that part) take minutes; `make grade-check` runs them.
Here the grader
runs on single parts only.
"""

import ast
import csv
import json
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from course.grading import bands as bands_tool
from course.grading import grade, gradescope, intake, rubric, scoring, trusted
from course.grading.grader_data import DATA_SHA1
from course.grading.handout import make_handout, solution_files, splice
from provided.common import REPO_ROOT
from provided.given import definitions, region_functions, strip_solutions

pytestmark = pytest.mark.kit
RUBRIC = rubric

TARGET = '''"""Doc."""

import math


def helper(x):
    return x


class A:
    def f(self, x):
        """Target f."""
        raise NotImplementedError

    @staticmethod
    def g():
        raise NotImplementedError


def h():
    raise NotImplementedError
'''

DONOR = '''"""Other doc."""

import torch

SCALE = 3


def _mine(x):
    return x * SCALE


def helper(x):
    return -x


class A:
    def f(self, x):
        """Donor f."""
        return _mine(x)

    @staticmethod
    def g():
        return torch.zeros(1)
'''


def test_splice_replaces_named_functions_and_brings_their_imports_and_helpers():
    out = splice(TARGET, DONOR, ["A.f", "A.g", "h"])
    namespace = {}
    exec(compile(out, "spliced", "exec"), namespace)
    assert namespace["A"]().f(2) == 6  # the donor's body, with the donor's helper and constant
    assert float(namespace["A"].g()[0]) == 0.0  # decorators and the donor's import came along
    assert namespace["helper"](1) == 1  # not named: the target's own function stays
    with pytest.raises(NotImplementedError):
        namespace["h"]()  # the donor has no h: the target's stays
    assert out.startswith('"""Doc."""\n') and out.count("def helper") == 1


def test_splice_keeps_the_target_where_the_donor_defines_nothing():
    assert splice(TARGET, '"""Empty."""\n', ["A.f"]) == TARGET


def test_every_region_belongs_to_exactly_one_part():
    found = {name: region_functions((REPO_ROOT / name).read_text())
             for name in solution_files()}
    assert {name: sorted(functions) for name, functions in found.items()} == {
        name: sorted(parts) for name, parts in RUBRIC.REGIONS.items()}
    assert set(p for parts in RUBRIC.REGIONS.values() for p in parts.values()) == set(
        RUBRIC.PARTS)
    assert sum(map(len, found.values())) == 48


def test_every_part_has_public_and_hidden_tests():
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q",
                           "-p", "no:cacheprovider", "tests", "course/grading/hidden"],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    ids = [line for line in done.stdout.splitlines() if "::" in line]
    tree = {path: ast.parse(path.read_text()) for path in
            [*REPO_ROOT.glob("tests/test_*.py"),
             *REPO_ROOT.glob("course/grading/hidden/test_*.py")]}
    marked = {part: {str(p.relative_to(REPO_ROOT)) for p, t in tree.items() if part in ast.dump(t)}
              for part in RUBRIC.PARTS}
    for part, files in marked.items():
        assert any(f.startswith("tests/") for f in files), f"{part}: no public tests"
        assert any(f.startswith("course/grading/hidden/") for f in files), \
            f"{part}: no hidden tests"
    assert len(ids) > 150


@pytest.fixture(scope="module")
def handout(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("handout")
    assert make_handout(out) == 48
    return out


# lines any solution and any test of seeded code writes alike: finding one proves nothing
IDIOMS = {"generator = torch.Generator().manual_seed(seed)"}


def test_no_reference_body_appears_in_the_handout(handout):
    """No region body, and no line of code that only a region holds, is anywhere in the
    handout (a line the provided code also has, like a shared error call, proves nothing)."""
    text = "\n".join(_normalise(p.read_text()) for p in handout.rglob("*")
                     if p.is_file() and p.suffix in (".py", ".md", ".txt", ".toml", ".cfg"))
    provided = "\n".join(_normalise(strip_solutions(p.read_text()))
                         for p in [*REPO_ROOT.glob("problem*/*.py"),
                                   *REPO_ROOT.glob("provided/**/*.py")])
    for name in solution_files():
        for body in _region_bodies((REPO_ROOT / name).read_text()):
            assert "\n".join(body) not in text, f"{name}: a whole region body is in the handout"
            for line in body:
                if len(line) >= 30 and not line.startswith("#") and line not in provided \
                        and line not in IDIOMS:
                    assert line not in text, f"{name}: {line!r} is in the handout"


def _normalise(text: str) -> str:
    return "\n".join(line.strip() for line in text.splitlines() if line.strip())


def _region_bodies(source: str) -> list[list[str]]:
    bodies, current = [], None
    for line in source.splitlines():
        if line.strip() == "# BEGIN SOLUTION":
            current = []
        elif line.strip() == "# END SOLUTION":
            bodies.append(current)
            current = None
        elif current is not None and line.strip():
            current.append(line.strip())
    return bodies


def test_the_handout_is_for_students(handout):
    assert not (handout / "course").exists()
    assert not list(handout.glob("problem*/results/*"))
    for name in ("README.md", "problem1/REPORT.md", "Makefile", "conftest.py", ".ci/run"):
        assert (handout / name).read_bytes() == (REPO_ROOT / name).read_bytes(), name
    assert not any("# BEGIN SOLUTION" in p.read_text() for p in handout.glob("problem*/*.py"))
    lint = subprocess.run([sys.executable, "-m", "ruff", "check", "."], cwd=handout,
                          capture_output=True, text=True)
    assert lint.returncode == 0, lint.stdout[-3000:]


def test_the_student_readme_lists_every_part_with_its_points():
    """The table is generated from the rubric; the committed README holds the current one."""
    from course.tools.report_tables import README, differences

    stale = differences([README])
    assert not stale, f"{stale}: run `python -m course.tools.report_tables README`"
    readme = (REPO_ROOT / "README.md").read_text()
    for part, (_, _, _, points) in RUBRIC.PARTS.items():
        row = next((line for line in readme.splitlines() if f"-m {part}" in line), None)
        assert row is not None, f"{part} is not in the student README's table"
        assert re.search(rf"\|\s*{points}\s*\|", row), f"{part}: {points} points not in {row}"


def _fill(handout: Path, out: Path, donor_repo: Path, files: list[str]) -> Path:
    shutil.copytree(handout, out)
    for name in files:
        names = region_functions((REPO_ROOT / name).read_text())
        target = out / name
        target.write_text(splice(target.read_text(), (donor_repo / name).read_text(), names))
    return out


def _grade_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "course.grading.grade", *map(str, args)],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)


def test_one_part_graded_alone(handout, tmp_path):
    """Filled with the reference dataset of Problem 1 only, the handout earns all of p1a and
    nothing of p2a; results.json is Gradescope's format; the visible table shows only the
    public tests' points."""
    filled = _fill(handout, tmp_path / "filled", REPO_ROOT, ["problem1/dataset.py"])
    out = tmp_path / "results.json"
    done = _grade_cli(filled, "--parts", "p1a", "p2a", "--out", out)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(out.read_text())
    by_part = {part: sum(t["score"] for t in result["tests"] if part in t["tags"])
               for part in ("p1a", "p2a")}
    assert by_part == {"p1a": pytest.approx(RUBRIC.PARTS["p1a"][3]), "p2a": 0.0}
    assert {"name", "score", "max_score", "visibility", "output"} <= set(result["tests"][0])
    assert any(t["visibility"] == "after_published" for t in result["tests"])  # hidden
    code = [t for t in result["tests"] if t["tags"][0] in ("p1a", "p2a")]
    assert sum(t["max_score"] for t in code) == pytest.approx(
        RUBRIC.PARTS["p1a"][3] + RUBRIC.PARTS["p2a"][3])
    public = sum(t["max_score"] for t in code
                 if "p1a" in t["tags"] and t["visibility"] == "visible")
    assert re.search(rf"A Addition dataset \(public tests\)\s+{public:.2f}\s+{public:.2f}\n",
                     result["output"]), result["output"]
    assert "Hidden tests worth" in result["output"]
    assert re.search(r"problem2\s+A Offset dataset \(public tests\)\s+0\.00", done.stdout)


def test_every_submission_has_the_same_maximum(handout, tmp_path):
    """No problem folder, no results, a broken metrics.json: the maximum stays the same,
    and each missing piece is a 0-point entry that says what is missing."""
    nothing = tmp_path / "nothing"
    nothing.mkdir()
    (nothing / "notes.txt").write_text("hello")
    broken = _fill(handout, tmp_path / "broken", REPO_ROOT, [])
    (broken / "problem2" / "results").mkdir(parents=True, exist_ok=True)
    (broken / "problem2" / "results" / "metrics.json").write_text(
        '{"none": {"in_range": "high", "beyond": [1], "beyond_buckets": "x"}}')
    maxima = {}
    for folder in (nothing, broken, REPO_ROOT):
        out = tmp_path / f"{folder.name}.json"
        done = _grade_cli(folder, "--parts", "p2a", "--out", out)
        assert done.returncode == 0, done.stderr[-2000:]
        result = json.loads(out.read_text())
        maxima[folder.name] = round(sum(t["max_score"] for t in result["tests"]), 6)
        if folder is nothing:
            assert "no problem1/, problem2/ or problem3/" in result["output"]
            assert all(t["score"] == 0 and t["output"] for t in result["tests"])
        if folder is broken:
            entries = [t for t in result["tests"] if t["tags"] == ["problem2-results"]]
            assert entries and all(t["score"] == 0 for t in entries)
            assert sum(t["max_score"] for t in entries) == pytest.approx(RUBRIC.RESULTS["problem2"])
    assert len(set(maxima.values())) == 1, maxima


def test_a_folder_of_submissions_gives_one_csv(handout, tmp_path):
    folder = tmp_path / "submissions"
    folder.mkdir()
    shutil.copytree(handout, folder / "empty")
    _fill(handout, folder / "dataset_done", REPO_ROOT, ["problem1/dataset.py"])
    (folder / "not_a_repo").mkdir()
    done = _grade_cli(folder, "--csv", tmp_path / "scores.csv", "--parts", "p1a")
    assert done.returncode == 0, done.stderr[-2000:]
    rows = list(csv.DictReader(open(tmp_path / "scores.csv")))
    assert [r["submission"] for r in rows] == ["dataset_done", "empty", "not_a_repo"]
    assert float(rows[0]["p1a"]) == pytest.approx(RUBRIC.PARTS["p1a"][3])
    assert float(rows[1]["p1a"]) == 0.0 and float(rows[2]["p1a"]) == 0.0
    assert len({r["max_score"] for r in rows}) == 1


@pytest.mark.parametrize("args, message", [
    (["nowhere"], "is not a folder"),
    ([".", "--parts", "p9z"], "not parts of the rubric"),
    ([".", "--out", "."], "is a folder"),
    ([".", "--out", "no/such/folder/r.json"], "does not exist"),
    ([".", "--deadline", "0"], "positive number"),
    ([".", "--deadline", "nan"], "positive number"),
    ([".", "--test-seconds", "-1"], "positive number"),
])
def test_bad_flags_are_one_line(args, message):
    done = _grade_cli(*args)
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_band_limits():
    band = {"mean": 0.9, "sd": 0.01, "min": 0.88, "max": 0.92, "n_seeds": 5}
    low, high = bands_tool.band_limits(band)  # widened by 2 sd + 1% of the mean: 0.029
    assert (low, high) == (pytest.approx(0.851), pytest.approx(0.949))
    flat = {"mean": 1.0, "sd": 0.0, "min": 1.0, "max": 1.0, "n_seeds": 5}
    assert bands_tool.band_limits(flat)[0] == pytest.approx(0.99)
    assert scoring.in_band(0.9, band)[0] and not scoring.in_band(0.95, band)[0]
    assert not scoring.in_band(None, band)[0]  # no seed lacked the value
    sometimes = {**band, "n_seeds": 3, "missing": [1, 4]}  # e.g. steps_to_95 never reached
    assert scoring.in_band(None, sometimes)[0] and scoring.in_band(0.9, sometimes)[0]
    never = {"mean": None, "sd": None, "min": None, "max": None, "n_seeds": 0,
             "missing": [0, 1]}
    assert scoring.in_band(None, never)[0] and not scoring.in_band(500, never)[0]


def test_autograder_zip(tmp_path):
    """Gradescope unpacks the zip into /autograder/source: the repository's files sit at
    the zip's root, beside setup.sh and run_autograder."""
    path = tmp_path / "autograder.zip"
    gradescope.build_autograder(path)
    names = zipfile.ZipFile(path).namelist()
    assert {"setup.sh", "run_autograder", "requirements.txt", "pyproject.toml",
            "course/grading/grade.py", "course/grading/rubric.py",
            "provided/common.py"} <= set(names)
    assert any(n.startswith("course/grading/hidden/") for n in names)
    assert not any(n.startswith("source/") for n in names)
    assert not any("/results/" in n and not n.endswith("reference_bands.json") for n in names)
    assert not any(n.startswith("data/") or n.endswith(".pth") for n in names)


def test_setup_sh_installs_the_graders_pyseccomp_from_the_course_requirements(tmp_path):
    """pyseccomp is the grader's (course/requirements.txt), not the students'
    (requirements.txt): setup.sh installs the students' requirements and pyseccomp's line of
    course/requirements.txt, pinned as there, and none of the instructors' other tools."""
    def packages(path):
        return {re.match(r"[A-Za-z0-9._-]+", line).group(0).lower(): line.split("#")[0].strip()
                for line in path.read_text().splitlines() if re.match(r"[A-Za-z0-9]", line)}
    students = packages(REPO_ROOT / "requirements.txt")
    course = packages(REPO_ROOT / "course" / "requirements.txt")
    assert "pyseccomp" not in students and "pyseccomp" in course
    path = tmp_path / "autograder.zip"
    gradescope.build_autograder(path)
    setup = zipfile.ZipFile(path).read("setup.sh").decode()
    assert "pip install -r requirements.txt\n" in setup
    assert f"pip install '{course['pyseccomp']}'\n" in setup
    assert not [name for name in course if name != "pyseccomp" and name in setup]


def test_strip_then_fill_with_the_reference_gives_the_reference_functions():
    for name in solution_files():
        source = (REPO_ROOT / name).read_text()
        filled = splice(strip_solutions(source), source, region_functions(source))
        ref, got = definitions(ast.parse(source)), definitions(ast.parse(filled))
        for function in region_functions(source):
            assert ast.dump(got[function]) == ast.dump(ref[function]), (name, function)


def test_the_reference_results_lie_inside_their_own_bands(tmp_path):
    """Recomputed from the repository's own files, every result lies in its band; a result
    whose weights are not here (they are not committed) is unverified, and with no data
    folder (CI runs the tests first) a problem is not graded, saying so."""
    entries = scoring.grade_results(trusted.Kit({}, {}, trusted.read_bands(), {}), REPO_ROOT,
                                  tmp_path)
    if not entries:
        pytest.skip("no reference_bands.json yet (make seeds)")
    outside = [e["name"] + ": " + e["output"] for e in entries if e["score"] < e["max_score"]
               and not e["output"].startswith(("unverified", "not graded: the grader's data"))]
    assert not outside, outside
    unverified = [e["output"] for e in entries if e["output"].startswith("unverified")]
    assert all("model_" in o or "n1000 test scores" in o for o in unverified), unverified


def test_a_helper_module_of_the_submission_comes_along(handout, tmp_path):
    """A student's own module in a problem folder is copied into every part's tree; a
    conftest.py or test file of the submission never is."""
    sub = _fill(handout, tmp_path / "sub", REPO_ROOT, [])
    (sub / "problem1" / "my_helpers.py").write_text("def half(x):\n    return x / 2\n")
    (sub / "problem1" / "conftest.py").write_text("raise SystemExit\n")
    (sub / "problem1" / "test_mine.py").write_text("def test_x():\n    pass\n")
    kit = trusted.Kit(trusted.tree_files(), {}, {}, {})
    files, reasons = intake.submission_code(kit, sub)
    assert reasons == {} and files["problem1/my_helpers.py"].startswith(b"def half")
    assert "problem1/conftest.py" not in files and "problem1/test_mine.py" not in files


def test_a_file_that_does_not_compile_is_named_with_its_line(handout, tmp_path):
    sub = _fill(handout, tmp_path / "sub", REPO_ROOT, [])
    path = sub / "problem1" / "attention.py"
    path.write_text(path.read_text() + "\ndef broken(:\n")
    kit = trusted.Kit(trusted.tree_files(), {}, {}, {})
    _, reasons = intake.submission_code(kit, sub)
    lines = len(path.read_text().splitlines())
    assert reasons["p1b"].startswith(f"problem1/attention.py, line {lines}:"), reasons
    assert set(reasons) == {"p1b"}, reasons


def test_no_reference_value_reaches_a_student(tmp_path):
    """A student sees no band, mean or range: the entries that carry the points are shown
    after publication only and say inside or outside, never the band; the status entries,
    visible at once, say neither."""
    entries = scoring.grade_results(trusted.Kit({}, {}, trusted.read_bands(), {}), REPO_ROOT,
                                  tmp_path)
    if not entries:
        pytest.skip("no reference_bands.json yet (make seeds)")
    scored = [e for e in entries if e["visibility"] == "after_published"]
    status = [e for e in entries if e["visibility"] == "visible"]
    assert len(scored) + len(status) == len(entries) and len(status) == len(trusted.read_bands())
    assert all(re.match(r"(recomputed from your files .*: (inside|outside) the reference "
                        r"range|unverified, no points: |not graded: the grader's data)",
                        e["output"]) for e in scored), scored[0]["output"]
    assert not any(re.search(r"mean|sd |range \[|accepted|inside|outside", e["output"])
                   for e in status)
    assert not any(re.search(r"mean|sd |range \[|accepted", e["output"]) for e in entries)


def _results_kit() -> trusted.Kit:
    kit = trusted.Kit({}, {}, trusted.read_bands(), {})
    if set(kit.bands) != set(RUBRIC.RESULTS):
        pytest.skip("no reference_bands.json yet (make seeds)")
    return kit


def _by_problem(entries: list[dict]) -> dict:
    """{problem: (its status entry, its scored entries)}."""
    out = {}
    for problem in RUBRIC.RESULTS:
        mine = [e for e in entries if e["tags"] == [f"{problem}-results"]]
        status = [e for e in mine if e["visibility"] == "visible"]
        assert len(status) == 1, [e["name"] for e in status]
        out[problem] = (status[0], [e for e in mine if e is not status[0]])
    return out


def test_the_results_status_is_visible_and_the_points_are_hidden(tmp_path):
    """Problem 1's logs and metrics without its weights, Problem 2 without metrics.json:
    each problem's status entry is visible at once, worth 0 points, and names what is
    missing; the entries that carry the points are hidden until publication and add up to
    the rubric's RESULTS."""
    kit = _results_kit()
    sub = tmp_path / "sub"
    (sub / "problem1" / "results").mkdir(parents=True)
    for path in (REPO_ROOT / "problem1" / "results").glob("*.json"):
        if path.name != "reference_bands.json":
            shutil.copy(path, sub / "problem1" / "results" / path.name)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    found = _by_problem(scoring.grade_results(kit, sub, scratch))
    for problem, (status, scored) in found.items():
        assert status["score"] == status["max_score"] == 0.0 and status["status"] == "failed"
        assert {e["visibility"] for e in scored} == {"after_published"}
        assert sum(e["max_score"] for e in scored) == pytest.approx(RUBRIC.RESULTS[problem])
        assert all(e["score"] == 0 for e in scored)
    p1 = found["problem1"][0]["output"]
    if "not graded: the grader's data" not in p1:  # with the homework's data
        assert re.search(r"^missing from problem1/results/: model_forward_n1000\.pth, ", p1,
                         re.M), p1
        assert "forward_n1000 test_exact_match: unverified: there is no model_forward_n1000.pth" \
            in p1
    p2 = found["problem2"][0]["output"]
    assert p2.startswith("your submission has no problem2/results/metrics.json"), p2
    assert "missing from problem2/results/: metrics.json" in p2
    codeless = _by_problem(scoring.grade_results(kit, sub, scratch, scoring.CODE_ONLY))
    for status, scored in codeless.values():
        assert status["output"].startswith("not graded: --code-only")
        assert all(e["output"].startswith("not graded: --code-only") and e["score"] == 0
                   for e in scored)


def _no_data(tmp_path, monkeypatch) -> Path:
    """The grader as in a clone without data/: an empty data folder, and a submission that
    must never be read."""
    monkeypatch.setattr(grade, "DATA_DIR", tmp_path / "data")

    def read(*args, **kwargs):
        raise AssertionError("the grader read a submission")
    monkeypatch.setattr(grade, "take_in", read)
    monkeypatch.setattr(grade, "Zygote", read)
    folder = tmp_path / "class" / "a"
    folder.mkdir(parents=True)
    return folder


def test_a_clone_without_data_refuses_before_reading_a_submission(tmp_path, monkeypatch,
                                                                  capsys):
    """One line naming the command that makes the data (and --code-only), exit 2, before
    any submission is read or any sandbox started: for one submission and for --csv."""
    submission = _no_data(tmp_path, monkeypatch)
    for args in ([submission, "--out", tmp_path / "r.json"],
                 [submission.parent, "--csv", tmp_path / "scores.csv"]):
        with pytest.raises(SystemExit) as stop:
            grade.main(list(map(str, args)))
        err = capsys.readouterr().err
        assert stop.value.code == 2, err
        assert len(err.strip().splitlines()) == 1 and err.startswith("error: "), err
        assert "python generate_datasets.py" in err and "--code-only" in err, err
    assert not (tmp_path / "r.json").exists() and not (tmp_path / "scores.csv").exists()


def test_data_that_is_not_the_homeworks_refuses_with_its_file(tmp_path, monkeypatch, capsys):
    """A data file that fails its SHA-1: one line naming the file and the command, exit 2."""
    if grade.data_fault(grade.DATA_DIR):
        pytest.skip("no data folder here (python generate_datasets.py)")
    data = tmp_path / "data"
    for name in DATA_SHA1:
        (data / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(grade.DATA_DIR / name, data / name)
    with open(data / "smiles" / "train.txt", "a") as f:
        f.write("CCO\n")
    submission = _no_data(tmp_path, monkeypatch)
    monkeypatch.setattr(grade, "DATA_DIR", data)
    with pytest.raises(SystemExit) as stop:
        grade.main([str(submission), "--out", str(tmp_path / "r.json")])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and len(err.strip().splitlines()) == 1, err
    assert "smiles/train.txt has SHA-1" in err and "generate_datasets.py --force" in err, err


def test_code_only_grades_the_code_in_a_clone_without_data(handout, tmp_path, monkeypatch,
                                                          capsys):
    """--code-only: the code is graded, every results entry says "not graded: --code-only"
    and earns nothing, and the maximum is the rubric's."""
    monkeypatch.setattr(grade, "DATA_DIR", tmp_path / "no_data")
    filled = _fill(handout, tmp_path / "filled", REPO_ROOT, ["problem1/dataset.py"])
    out = tmp_path / "results.json"
    assert grade.main([str(filled), "--parts", "p1a", "--code-only", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    p1a = [t for t in result["tests"] if t["tags"] == ["p1a"]]
    assert sum(t["score"] for t in p1a) == pytest.approx(RUBRIC.PARTS["p1a"][3])
    results = [t for t in result["tests"] if t["tags"][0].endswith("-results")]
    assert results and all(t["output"].startswith("not graded: --code-only") and
                           t["score"] == 0 for t in results)
    assert sum(t["max_score"] for t in results) == pytest.approx(sum(RUBRIC.RESULTS.values()))
    assert "results: not graded: --code-only" in capsys.readouterr().out


def test_run_names_cannot_reach_other_files(tmp_path):
    """A run name in metrics.json is not a path: traversal to a file outside the results
    folder reads nothing (the grader reads only the registry's file names)."""
    secret = tmp_path / "secret.json"
    secret.write_text('{"log": [{"step": 100, "head_grad_norm": 123.0}]}')
    sub = tmp_path / "sub"
    results = sub / "problem3" / "results"
    (results / "training_log_x").mkdir(parents=True)
    (results / "metrics.json").write_text(json.dumps({"sweep": [
        {"run": "x/../../../secret", "norm": "pre", "lr": 0.001, "warmup": 500,
         "final_val_loss": 1.0, "trains": True}]}))
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    entries = scoring.grade_results(trusted.Kit({}, {}, trusted.read_bands(), {}), sub, scratch)
    assert not any("123" in e["output"] for e in entries)


def test_a_huge_number_is_not_a_result():
    band = {"n_seeds": 5, "mean": 0.5, "sd": 0.1, "min": 0.4, "max": 0.6}
    assert scoring.in_band(10**400, band)[0] is False


def test_copied_numbers_without_runs_earn_no_results_points(tmp_path):
    """The reference's own metrics.json files, copied without a single weight, log or sample
    file (or with logs of other runs renamed), earn no results point: every value judged is
    recomputed from the submission's files."""
    sub = tmp_path / "sub"
    for problem in ("problem1", "problem2", "problem3"):
        (sub / problem / "results").mkdir(parents=True)
        shutil.copy(REPO_ROOT / problem / "results" / "metrics.json",
                    sub / problem / "results" / "metrics.json")
    logs = sorted((REPO_ROOT / "problem3" / "results").glob("training_log_*_s1500.json"))
    for log, other in zip(logs, logs[1:] + logs[:1]):  # every sweep log under another's name
        shutil.copy(log, sub / "problem3" / "results" / other.name)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    entries = scoring.grade_results(trusted.Kit({}, {}, trusted.read_bands(), {}), sub, scratch)
    if not entries:
        pytest.skip("no reference_bands.json yet (make seeds)")
    if any(e["output"].startswith("not graded: the grader's data") for e in entries):
        pytest.skip("no data folder here (python generate_datasets.py)")
    earned = [e["name"] for e in entries if e["score"] > 0]
    assert not earned, earned
    scored = [e for e in entries if e["visibility"] == "after_published"]
    assert all(e["output"].startswith("unverified") for e in scored), scored[0]["output"]


@pytest.mark.parametrize("extra", [
    "\nX = " + " + ".join(["1"] * 100_000) + "\n",  # RecursionError in compile()
    "\nY = " + "-" * 100_000 + "1\n",  # MemoryError or RecursionError
])
def test_a_file_that_breaks_the_compiler_fails_its_parts_only(handout, tmp_path, extra):
    sub = _fill(handout, tmp_path / "sub", REPO_ROOT, ["problem1/attention.py"])
    path = sub / "problem1" / "attention.py"
    path.write_text(path.read_text() + extra)
    kit = trusted.Kit(trusted.tree_files(), {}, {}, {})
    _, reasons = intake.submission_code(kit, sub)
    assert set(reasons) == {"p1b"} and "problem1/attention.py" in reasons["p1b"], reasons


def test_the_splice_splits_lines_as_python_does(handout, tmp_path):
    """A U+2028 or a form feed in a comment, and an import the handout lacks: the file is
    taken whole, and the spliced code compiles."""
    sub = _fill(handout, tmp_path / "sub", REPO_ROOT, ["problem1/attention.py"])
    path = sub / "problem1" / "attention.py"
    path.write_text("# a comment\u2028with a separator\f and a form feed\nimport math\n"
                    + path.read_text())
    kit = trusted.Kit(trusted.tree_files(), {}, {}, {})
    code, reasons = intake.submission_code(kit, sub)
    assert reasons == {}, reasons
    compile(code["problem1/attention.py"], "attention.py", "exec")
    assert b"import math" in code["problem1/attention.py"]


def test_copy_submission_takes_regular_files_only_and_says_what_it_left_out(tmp_path,
                                                                            monkeypatch):
    """Links, FIFOs and devices are never read (a FIFO would block the grader); a problem
    file over the size limit, or with a path too long for the grader's copy, is left out
    with a note naming it."""
    import os

    monkeypatch.setattr(intake, "SUBMISSION_FILE_BYTES", 1000)
    source = tmp_path / "s"
    (source / "problem1" / "results").mkdir(parents=True)
    (source / "problem1" / "attention.py").write_text("x = 1\n")
    secret = tmp_path / "secret.txt"
    secret.write_text("the reference")
    (source / "problem1" / "link.py").symlink_to(secret)
    os.mkfifo(source / "problem1" / "results" / "metrics.json")
    (source / "problem1" / "results" / "huge.json").write_text("0" * 2000)
    (source / "notes.bin").write_text("0" * 2000)  # outside the problem folders: no note
    deep = source / "problem2"
    for _ in range(15):  # 15 x 250 characters fit here (PATH_MAX 4096) but not one level down
        deep = deep / ("d" * 249)
    os.makedirs(deep)
    (deep / "model.py").write_text("y = 2\n")
    out = tmp_path / ("o" * 250) / ("o" * 250) / "copy"
    out.mkdir(parents=True)
    notes = intake.copy_submission(source, out)
    assert (out / "problem1" / "attention.py").read_text() == "x = 1\n"
    assert not (out / "problem1" / "link.py").exists()
    assert not (out / "problem1" / "results" / "metrics.json").exists()
    joined = "\n".join(notes)
    assert "problem1/results/huge.json: left out, over the size limits" in joined, notes
    assert "model.py: left out, it could not be copied" in joined, notes
    assert "notes.bin" not in joined and len(notes) == 2, notes


def test_read_regular_refuses_links_fifos_devices_and_files_over_the_limit(tmp_path):
    import os

    plain = tmp_path / "plain"
    plain.write_bytes(b"12345")
    (tmp_path / "link").symlink_to(plain)
    os.mkfifo(tmp_path / "fifo")
    assert intake.read_regular(plain, 5) == b"12345"
    assert intake.read_regular(plain, 4) is None
    for name in ("link", "fifo", "missing"):
        assert intake.read_regular(tmp_path / name, 100) is None, name
    assert intake.read_regular(Path("/dev/zero"), 100) is None


def test_a_submission_the_grader_fails_on_is_a_csv_row_and_the_others_go_on(tmp_path,
                                                                           monkeypatch, capsys):
    """--csv: the grader failing on the middle submission of three writes that row with the
    reason, grades the other two, and leaves a complete CSV; a stray zip beside them is
    named, not skipped without a word."""
    folder = tmp_path / "class"
    for name in ("a", "b", "c"):
        (folder / name).mkdir(parents=True)
    (folder / "d.zip").write_bytes(b"PK")

    def fake_grade(path, grader, parts, out, budget, keep=None):
        if path.name == "b":
            raise OverflowError("int too large to convert to float")
        return {"score": 4.0, "tests": [{"tags": ["p1a"], "score": 4.0, "max_score": 4.0}]}
    monkeypatch.setattr(grade, "grade", fake_grade)
    csv_path = tmp_path / "scores.csv"
    grader = grade.Grader(kit=None, sandboxes=[], zygote=None, test_seconds=1.0, judges=[],
                          reader=None)
    grade.grade_folder(folder, csv_path, grader, ["p1a"], deadline=60)
    rows = list(csv.DictReader(open(csv_path)))
    assert [r["submission"] for r in rows] == ["a", "b", "c"]
    assert float(rows[0]["score"]) == 4.0 and float(rows[2]["p1a"]) == 4.0
    assert float(rows[1]["score"]) == 0.0
    assert rows[1]["note"].startswith("not graded: the grader failed (OverflowError"), rows[1]
    assert not list(tmp_path.glob("*.tmp"))
    assert "d.zip: skipped, not a submission folder" in capsys.readouterr().out
