"""What the grader takes from a problem folder (code at any depth of packages, small data
files), packed by `make submission` exactly, the rest named; the given code put back as the
grader puts it (provided/given.py's, which the grader imports too), named where it
differs; and `python -m provided.submission --check`, the public tests on the files
of a zip that the grader takes."""

import ast
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from course.grading import handout as grader_handout
from course.grading.handout import make_handout
from course.grading.rubric import REGIONS
from provided import given, submission
from provided.common import REPO_ROOT

pytestmark = [pytest.mark.kit, pytest.mark.timeout(600)]

POSITIONAL = "problem2/positional.py"
OMEGA_EDITED = ("def _omega(d_model: int, base: float) -> torch.Tensor:",
                "return base ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)")


def filled(name: str) -> str:
    """The reference's file as a student's: the solutions written, no region markers."""
    return "".join(line for line in (REPO_ROOT / name).read_text().splitlines(keepends=True)
                   if not given.BEGIN.match(line) and not given.END.match(line))


def with_omega_edited(text: str) -> str:
    """problem2/positional.py with the given _omega taking its base as an argument, and every
    call passing it: correct locally, a TypeError where the handout's _omega is put back."""
    text = text.replace("def _omega(d_model: int) -> torch.Tensor:", OMEGA_EDITED[0], 1)
    text = text.replace(
        "return 10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)",
        OMEGA_EDITED[1], 1)
    assert OMEGA_EDITED[0] in text and OMEGA_EDITED[1] in text
    return text.replace("_omega(d_model)", "_omega(d_model, 10000.0)")


# ---------------------------------------------------------------- the handout's given code
def test_the_snapshot_of_the_handouts_code_is_up_to_date():
    data = json.loads((REPO_ROOT / given.SNAPSHOT).read_text(encoding="utf-8"))
    assert given.snapshot_text(given.derived(REPO_ROOT)) == (
        REPO_ROOT / given.SNAPSHOT).read_text(encoding="utf-8"), (
        f"{given.SNAPSHOT} is not the handout's code of this copy: run `python -m "
        "provided.given --update` and commit it")
    assert set(data["regions"]) == set(REGIONS)


def test_the_handout_reads_its_snapshot(tmp_path):
    make_handout(tmp_path / "handout")
    code = given.handout_code(tmp_path / "handout")
    assert code == given.derived(REPO_ROOT)
    (tmp_path / "handout" / given.SNAPSHOT).write_text("{")
    assert given.handout_code(tmp_path / "handout") is None


def test_the_given_code_is_put_back_as_the_grader_puts_it():
    """`--check` and the grader read regions and put given code back with one
    implementation, provided/given.py's (the handout has it), never two copies that could
    drift apart: course.grading.handout uses given's own, and every module of course/
    imports given's names from provided.given, none through another module (handout once
    re-exported them)."""
    names = {name for name, value in vars(given).items()
             if getattr(value, "__module__", None) == given.__name__} - {"main"} | {"BEGIN", "END"}
    for name in ("source_lines", "strip_solutions", "definitions", "region_functions"):
        assert getattr(grader_handout, name) is getattr(given, name), (
            f"course.grading.handout.{name} is a copy of provided.given.{name}: import it")
    for path in sorted((REPO_ROOT / "course").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("course."):
                through = sorted(names & {alias.name for alias in node.names})
                assert not through, (f"{path.relative_to(REPO_ROOT)}: import {through} from "
                                     f"provided.given, not from {node.module}")


def test_given_changes_names_what_the_grader_puts_back():
    reference = (REPO_ROOT / POSITIONAL).read_text()
    handout, regions = given.strip_solutions(reference), given.region_functions(reference)
    assert given.given_changes(reference, handout, regions) == ([], [])
    assert given.given_changes(with_omega_edited(reference), handout, regions) == (
        ["_omega"], [])
    commented = reference.replace('    """[d_model / 2] float64', '    # a note\n'
                                  '    """[d_model / 2] float64', 1)
    assert given.given_changes(commented, handout, regions) == ([], [])  # no change to Python
    without = reference.replace("def sinusoidal_table(", "def _renamed(", 1)
    assert given.given_changes(without, handout, regions) == ([], ["sinusoidal_table"])


# --------------------------------------------------------------- what a problem folder gives
@pytest.mark.parametrize("name, kind", [
    ("problem1/attention.py", "code"),
    ("problem1/attn_utils/__init__.py", "code"),
    ("problem1/attn_utils/masks/causal.py", "code"),
    ("problem2/constants.json", "data"),
    ("problem2/tables/omega.NPY", "data"),
    ("problem3/vocab/extra.txt", "data"),
    ("problem1/data.csv", "data"),
    ("problem1/REPORT.md", "report"),
    ("problem1/results/metrics.json", "results"),
    ("problem1/my-utils/x.py", "other"),
    ("problem1/2fast.py", "other"),
    ("problem1/notes.md", "other"),
    ("problem2/table.pkl", "other"),
    ("problem1/test_mine.py", "skipped"),
    ("problem1/attn_utils/conftest.py", "skipped"),
    ("problem1/__pycache__/x.cpython-312.pyc", "skipped"),
    ("problem1/.ipynb_checkpoints/x.json", "skipped"),
    ("provided/common.py", None),
    ("problem1/../provided/x.py", None),
    ("problem4/x.py", None),
])
def test_what_the_grader_takes_from_a_problem_folder(name, kind):
    assert submission.problem_file_kind(name) == kind


def test_data_files_are_taken_up_to_their_limit(monkeypatch):
    monkeypatch.setattr(submission, "DATA_BYTES", 100)
    taken, left_out = submission.taken_problem_files({
        "problem1/a.json": 60, "problem1/b.npy": 50, "problem2/c.csv": 40, "problem1/m.py": 10**6,
        "problem1/n.md": 3, "problem1/test_x.py": 5})
    assert taken == ["problem1/a.json", "problem1/m.py", "problem2/c.csv"]
    assert set(left_out) == {"problem1/b.npy", "problem1/n.md"}
    assert left_out["problem1/b.npy"].startswith("over the 100 bytes the grader takes of data")


def test_packages_and_data_files_are_packed_the_rest_named(tmp_path, capsys, monkeypatch):
    """A helper package and a data file beside the solution (the issue's two lost kinds) go
    in; a file of another kind, a link and data over the limit are each said, the last an
    error (code that reads it would fail in the grader)."""
    root = tmp_path / "handout"
    make_handout(root)
    helpers = {"problem1/attn_utils/__init__.py": "from .masks import lower\n",
               "problem1/attn_utils/masks.py": "def lower(n):\n    return n\n",
               "problem2/constants.json": '{"base": 10000.0}',
               "problem3/tables/extra.txt": "C\n"}
    for name, text in helpers.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    (root / "problem2" / "table.pkl").write_bytes(b"\x80\x04N.")
    (root / "problem3" / "big.npy").write_bytes(b"\x00" * 2000)
    (root / "problem3" / "linked.py").symlink_to(root / "problem3" / "model.py")
    monkeypatch.setattr(submission, "DATA_BYTES", 1000)
    out = tmp_path / "s.zip"
    code = submission.main(["--root", str(root), "--out", str(out)])
    err = capsys.readouterr().err.splitlines()
    with zipfile.ZipFile(out) as archive:
        names = set(archive.namelist())
    assert set(helpers) <= names
    assert not {"problem2/table.pkl", "problem3/big.npy", "problem3/linked.py"} & names
    assert code == 1
    assert [line for line in err if line.startswith("error")] == [
        "error: problem3/big.npy is left out, over the 1000 bytes the grader takes of data "
        "files in all (2.0 KiB with it): code that reads it fails in the grader"]
    assert ("warning: problem2: 1 file(s) not packed, not a kind the grader takes (Python "
            "modules and packages, REPORT.md, data files .json .csv .txt .npy): "
            "problem2/table.pkl") in err
    assert ("warning: problem3/linked.py is a link: not packed, the grader takes regular "
            "files only") in err


def test_given_code_that_differs_from_the_handouts_is_named(tmp_path, capsys):
    """The issue's two silent cases: a given function edited (the handout's runs, named) and
    a helper written into the given, empty problem1/__init__.py (the student's own: packed
    and graded as it is, never named); a given file edited (config.py: the handout's)."""
    root = tmp_path / "handout"
    make_handout(root)
    path = root / POSITIONAL
    path.write_text(with_omega_edited(filled(POSITIONAL)))
    (root / "problem1" / "__init__.py").write_text("def helper():\n    return 1\n")
    with open(root / "problem3" / "config.py", "a") as config:
        config.write("EDITED = 1\n")
    submission.main(["--root", str(root), "--out", str(tmp_path / "s.zip")])
    err = capsys.readouterr().err.splitlines()
    assert not [line for line in err if "__init__.py" in line], err
    with zipfile.ZipFile(tmp_path / "s.zip") as archive:
        assert archive.read("problem1/__init__.py") == b"def helper():\n    return 1\n"
    assert ("warning: problem3/config.py differs from the handout's, which the grader uses "
            "instead: move what you added into a module of your own") in err
    assert ("warning: problem2/positional.py: given code you changed, _omega: the grader runs "
            "the handout's version (put your change in a function of your own)") in err


# -------------------------------------------------------------------------------- --check
def test_the_checked_tree_takes_the_graders_tree_files():
    from course.grading.trusted import TREE_FILES

    assert set(submission.CHECK_TREE) == (set(TREE_FILES) - {"problem*/*.py"}) | {given.SNAPSHOT}


def test_the_checked_tree_is_what_the_grader_takes(tmp_path):
    """One level down in the zip (a folder zipped whole), a solution file with given code
    edited, a package, a data file, a given file with a helper, a test file, a .pkl."""
    handout = given.derived(REPO_ROOT)
    student = with_omega_edited((REPO_ROOT / POSITIONAL).read_text())
    members = {POSITIONAL: student, "problem1/__init__.py": "def helper():\n    pass\n",
               "problem3/config.py": "EDITED = 1\n",
               "problem1/attn_utils/__init__.py": "X = 1\n", "problem2/constants.json": "{}",
               "problem2/test_mine.py": "def test_x():\n    pass\n", "problem2/t.pkl": "x",
               "problem3/results/metrics.json": "{}", "problem3/REPORT.md": "# r\n"}
    zip_path = tmp_path / "hw.zip"
    with zipfile.ZipFile(zip_path, "w") as archive:
        for name, text in members.items():
            archive.writestr(f"hw/{name}", text)
    out = tmp_path / "tree"
    with zipfile.ZipFile(zip_path) as archive:
        notes = submission.checked_tree(archive, REPO_ROOT, handout, out)
    assert (out / POSITIONAL).read_text() == given.graded_source(
        student, handout.files[POSITIONAL], handout.regions[POSITIONAL])
    assert "def _omega(d_model: int) -> torch.Tensor:" in (out / POSITIONAL).read_text()
    assert (out / "problem1" / "attn_utils" / "__init__.py").read_text() == "X = 1\n"
    assert (out / "problem2" / "constants.json").read_text() == "{}"
    assert (out / "problem1" / "__init__.py").read_text() == "def helper():\n    pass\n"
    assert (out / "problem3" / "config.py").read_text() == handout.files["problem3/config.py"]
    assert (out / "problem1" / "attention.py").read_text() == (
        handout.files["problem1/attention.py"])  # not in the zip: the handout's stubs
    assert not (out / "problem2" / "test_mine.py").exists()
    assert not (out / "problem2" / "t.pkl").exists()
    assert not (out / "problem3" / "results").exists()
    assert (out / "tests" / "parts.py").is_file() and (out / "conftest.py").is_file()
    assert not (out / "course").exists()
    assert f"{POSITIONAL}: _omega is given code you changed: the handout's version is used" \
        in notes
    assert "problem3/config.py: a given file: the handout's is used, not yours" in notes
    assert not [note for note in notes if note.startswith("problem1/__init__.py")]
    assert any(n.startswith("problem2/t.pkl: not taken") for n in notes)
    assert ("problem1/attention.py: not in the zip: every part it holds runs the handout's "
            "stubs") in notes


def check_in(root: Path, *argv: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(root), "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "provided.submission", *argv], cwd=root,
                          env=env, capture_output=True, text=True, timeout=600)


def test_check_gives_the_graders_verdict_on_a_given_function_edited(tmp_path):
    """The handout as it comes: --check runs every public test, which fails. With Part 2B and
    2C written: the zip passes p2b in --check; with the
    given _omega edited (local pytest passes) --check fails p2b, as the grader does, and
    names _omega."""
    root = tmp_path / "handout"
    make_handout(root)
    assert check_in(root).returncode == 0  # the README's commands as written: submission.zip
    done = check_in(root, "--check")  # every public test, on the handout's stubs: all fail
    assert done.returncode == 1 and "NotImplementedError" in done.stdout, done.stderr
    assert done.stdout.splitlines()[-1].startswith("--check of submission.zip: pytest exit "
                                                   "status 1")
    reference = filled(POSITIONAL)
    (root / POSITIONAL).write_text(reference)
    assert check_in(root, "--out", "a.zip").returncode == 0
    done = check_in(root, "--check", "a.zip", "--part", "p2b")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    assert done.stdout.splitlines()[0] == (
        "checking a.zip as the grader takes it: the public tests of p2b, on your files with "
        "the handout's given code")
    assert done.stdout.splitlines()[-1] == "--check of a.zip: every public test passed"
    (root / POSITIONAL).write_text(with_omega_edited(reference))
    local = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                            "-m", "p2b"], cwd=root, capture_output=True, text=True,
                           env={**os.environ, "PYTHONPATH": str(root)}, timeout=600)
    assert local.returncode == 0, local.stdout[-2000:]
    assert check_in(root, "--out", "b.zip").returncode == 0
    done = check_in(root, "--check", "b.zip", "--part", "p2b")
    assert done.returncode == 1, done.stdout[-3000:]
    assert (f"note: {POSITIONAL}: _omega is given code you changed: the handout's version is "
            "used") in done.stdout
    assert "TypeError" in done.stdout


@pytest.mark.parametrize("argv, says", [
    (["--check", "{tmp}/none.zip"], "none.zip not found: write it first with `make submission`"),
    (["--check", "{tmp}/bad.zip"], "is not a zip that can be read"),
    (["--check", "{tmp}/bad.zip", "--part", "p9z"], "--part p9z: a part is p1a .. p3e"),
    (["--part", "p1a"], "--part is for --check"),
])
def test_check_bad_input_is_one_line(tmp_path, capsys, argv, says):
    (tmp_path / "bad.zip").write_bytes(b"not a zip")
    with pytest.raises(SystemExit) as stop:
        submission.main([a.format(tmp=tmp_path) for a in argv])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.startswith("error: ") and says in err, err
    assert len(err.splitlines()) == 1


def test_the_smoke_run_names_what_the_grader_will_not_take(tmp_path, monkeypatch, capsys):
    """The smoke run says it as make submission does: a .pkl is a warning, data over the
    grader's limit fails its problem."""
    from provided import smoke

    for name, data in (("problem1/__init__.py", b""), ("problem1/table.pkl", b"x"),
                       ("problem2/__init__.py", b""), ("problem2/big.json", b"[0]" * 400)):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(data)
    monkeypatch.setattr(submission, "DATA_BYTES", 1000)
    monkeypatch.setattr(smoke, "REPO_ROOT", tmp_path)
    monkeypatch.setattr(smoke, "missing_data", lambda problem, source: None)
    monkeypatch.setattr(smoke, "tiny_data", lambda problem, source, out: None)
    monkeypatch.setattr(smoke, "steps", lambda problem, data, results: [])
    assert smoke.main(["--problem", "1", "--problem", "2"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0] == ("warning: problem1: 1 file(s) not packed, not a kind the grader takes "
                      "(Python modules and packages, REPORT.md, data files .json .csv .txt "
                      ".npy): problem1/table.pkl")
    assert err[1] == ("FAILED problem 2: problem2/big.json is left out, over the 1000 bytes "
                      "the grader takes of data files in all (1.2 KiB with it): code that "
                      "reads it fails in the grader")
    assert err[-1].startswith("smoke run failed: problem 2 failed, problem 1 passed")


# ------------------------------------------------------- --check under the grader's limits
def test_the_checks_limits_are_the_graders():
    """provided/limits.py, which --check applies, holds the grader's own numbers (the
    grader imports its time limits and largest file from it), and the environment of a
    sandbox's code (warden.sandbox_env) sets what --check sets."""
    from course.grading import warden
    from provided import limits

    environment = warden.sandbox_env("/tree")
    assert all(environment.get(name, value) == value
               for name, value in limits.ENVIRONMENT.items()), environment


CPU_TESTS = '''
import asyncio, multiprocessing, socket, time
import pytest


def spin(seconds):
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


@pytest.mark.p1a
def test_an_endless_loop():
    spin(60)


@pytest.mark.p1b
def test_a_worker_process_that_computes_too_long():
    worker = multiprocessing.get_context("fork").Process(target=spin, args=(3,))
    worker.start()
    worker.join()


def test_the_network_is_refused():
    with pytest.raises(PermissionError):
        socket.socket(socket.AF_INET)


def test_asyncio_works():
    assert asyncio.run(asyncio.to_thread(sum, [1, 2])) == 3
'''


def test_check_applies_the_graders_time_limits_and_policy(tmp_path):
    """--check's plugin (provided/check_limits.py), its CPU limit set to 2 s: an endless
    loop and a worker process that computes 3 s fail in the grader's words (a worker's time
    counts once it ends); the network is refused, asyncio works."""
    from provided import limits

    (tmp_path / "test_cpu.py").write_text(CPU_TESTS)
    ran = subprocess.run(
        [sys.executable, "-c", "import sys, pytest; from provided import limits; "
         "limits.TEST_CPU_S = 2; sys.exit(pytest.main(sys.argv[1:]))", "-q", "-p",
         "no:cacheprovider", "-p", "provided.check_limits", "-W", "ignore", "test_cpu.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    over = limits.OVER_TEST_CPU.format(seconds=2)
    assert "2 failed, 2 passed" in ran.stdout, ran.stdout[-3000:]
    assert ran.stdout.count(over) >= 2, ran.stdout[-3000:]
