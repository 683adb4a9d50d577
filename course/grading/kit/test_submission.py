"""`make submission` (provided/submission.py): the zip holds exactly what the grader reads
and the staff grade, the limits and result files it checks against are the grader's own
(one definition, imported by intake and recompute), the zip is written atomically, and a
bad flag or folder ends in one line."""

import errno
import io
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch

from course.grading import intake, recompute
from course.grading.handout import EXCLUDED, make_handout, tracked_files
from course.grading.rubric import REGIONS
from problem3.config import MAIN_RUN
from provided import submission
from provided.common import REPO_ROOT

pytestmark = pytest.mark.kit

PROBLEMS = ("problem1", "problem2", "problem3")


def fake_weights() -> bytes:
    """A tiny checkpoint as torch.save writes it (uncompressed entries)."""
    buffer = io.BytesIO()
    torch.save({"config": {}, "model": {"w": torch.zeros(2)}}, buffer)
    return buffer.getvalue()


def write(path: Path, data: bytes | str = b"x") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode() if isinstance(data, str) else data)


@pytest.fixture
def tree(tmp_path):
    """(a student's homework folder with every graded file and much that is not, the names
    the zip must hold)."""
    root = tmp_path / "hw"
    expected = set()
    for problem in PROBLEMS:
        for path in sorted((REPO_ROOT / problem).glob("*.py")):
            name = f"{problem}/{path.name}"
            write(root / name, path.read_bytes())
            expected.add(name)
        report = (REPO_ROOT / problem / "REPORT.md").read_text()
        write(root / problem / "REPORT.md", report)
        expected.add(f"{problem}/REPORT.md")
        for link in submission.FIGURE_LINK.findall(report):
            write(root / problem / link, b"\x89PNG")
            expected.add(f"{problem}/{link}")
        for name in submission.graded_results(problem):
            data = fake_weights() if name.endswith(".pth") else (
                "{}" if name.endswith(".json") else "C\nCC\n")
            write(root / problem / "results" / name, data)
            expected.add(f"{problem}/results/{name}")
        write(root / problem / "results" / "attention_maps.json", "{}")
        expected.add(f"{problem}/results/attention_maps.json")
        # not graded, and nothing to say about: never in the zip (a try's files and files of
        # kinds the grader does not take are left out with a warning: test_try_folders.py)
        write(root / problem / "results" / "training_log_extra.partial.json", "{")
        write(root / problem / "results" / "reference_bands.json", "{}")
        write(root / problem / "__pycache__" / "model.cpython-312.pyc")
        write(root / problem / "test_mine.py", "def test_x():\n    pass\n")
        write(root / problem / "helpers" / "test_helpers.py", "def test_y():\n    pass\n")
    results3 = root / "problem3" / "results"
    write(results3 / f"model_{MAIN_RUN}.pth", fake_weights())  # the grader samples it
    expected.add(f"problem3/results/model_{MAIN_RUN}.pth")
    write(results3 / f"resume_{MAIN_RUN}.pth", fake_weights())
    write(results3 / "cache" / "tokens.npy")
    write(results3 / "checkpoints" / "step_1000.pth", fake_weights())
    write(root / ".venv" / "lib" / "site.py", "import os\n")
    write(root / ".git" / "HEAD", "ref: refs/heads/main\n")
    write(root / "data" / "addition" / "train.csv", "a,b\n1,2\n")
    write(root / "provided" / "common.py", "")
    write(root / "provided" / "handout_code.json",  # the handout's given code, as the handout's
          (REPO_ROOT / "provided" / "handout_code.json").read_bytes())
    write(root / "tests" / "test_public.py", "")
    write(root / "README.md", "# hw\n")
    return root, expected


def run(root: Path, out: Path, capsys, *more) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of `python -m provided.submission`, run in-process."""
    try:
        code = submission.main(["--root", str(root), "--out", str(out), *more])
    except SystemExit as stop:
        code = stop.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def names(zip_path: Path) -> set[str]:
    with zipfile.ZipFile(zip_path) as archive:
        return set(archive.namelist())


# ----------------------------------------------------------------- one definition, shared
def test_the_grader_reads_the_limits_that_make_submission_checks():
    for name in ("SUBMISSION_LIMIT_BYTES", "SUBMISSION_FILE_BYTES", "SUBMISSION_FILES"):
        assert getattr(intake, name) == getattr(submission, name), name
    for name in ("WEIGHTS_BYTES", "LOG_BYTES", "METRICS_BYTES", "SAMPLES_BYTES"):
        assert getattr(recompute, name) == getattr(submission, name), name
    assert set(submission.SOLUTION_FILES) == set(REGIONS), (
        "provided/submission.py's SOLUTION_FILES must be the rubric's files with regions")


def test_the_grader_takes_exactly_the_result_files_make_submission_packs(tree, tmp_path):
    root, expected = tree
    for problem in PROBLEMS:
        out = intake.results_files(root / problem / "results", problem, tmp_path / problem)
        taken = {f"{problem}/results/{p.name}" for p in out.iterdir()}
        graded = {f"{problem}/results/{n}" for n in submission.graded_results(problem)}
        assert taken == graded
        assert graded <= expected


def test_the_handout_ships_the_script():
    name = "provided/submission.py"
    assert name in tracked_files(REPO_ROOT) and not EXCLUDED.match(name)


# ----------------------------------------------------------------------------- the zip
def test_the_zip_holds_exactly_the_graded_files(tree, tmp_path, capsys):
    root, expected = tree
    out = tmp_path / "submission.zip"
    code, stdout, stderr = run(root, out, capsys)
    assert code == 0, stderr
    assert stderr == ""
    assert names(out) == expected
    assert f"wrote {out}: {len(expected)} files, " in stdout
    assert "unpacked" in stdout and len(stdout.splitlines()) == 1
    with zipfile.ZipFile(out) as archive:  # each file's bytes, at its path in the folder
        for name in expected:
            assert archive.read(name) == (root / name).read_bytes(), name


def test_the_zip_of_the_handout_is_partial_work_not_a_failure(tmp_path, capsys):
    """The handout as students get it: no results yet. The code and reports are packed,
    each problem's missing results are one warning, the exit status 0."""
    make_handout(tmp_path / "handout")
    out = tmp_path / "submission.zip"
    code, _, stderr = run(tmp_path / "handout", out, capsys)
    assert code == 0, stderr
    lines = stderr.splitlines()
    assert [line for line in lines if "no results" in line] == [
        f"warning: {p}/results: no results (metrics.json, logs, weights): partial work, its "
        "results points are not earned" for p in PROBLEMS]
    assert all(line.startswith("warning: ") for line in lines)
    assert set(REGIONS) <= names(out)


@pytest.mark.parametrize("remove, says", [
    ("problem1/results/model_forward_n1000.pth",
     "model_forward_n1000.pth is missing beside its training log"),
    ("problem2/results/training_log_rotary.json",
     "training_log_rotary.json is missing beside model_rotary.pth"),
    ("problem1/results/metrics.json", "problem1/results/metrics.json is missing"),
    (f"problem3/results/model_{MAIN_RUN}.pth",
     "the grader draws the samples it scores from these weights"),
    ("problem3/results/training_log_post_lr0.03_w0_s1500.json",
     "run post_lr0.03_w0_s1500 is unverified"),
    ("problem2/positional.py", "problem2/positional.py is missing: every part it holds"),
    ("problem3/REPORT.md", "problem3/REPORT.md is missing"),
])
def test_a_missing_graded_file_is_one_error_and_the_zip_is_still_written(
        tree, tmp_path, capsys, remove, says):
    root, expected = tree
    (root / remove).unlink()
    out = tmp_path / "submission.zip"
    code, stdout, stderr = run(root, out, capsys)
    errors = [line for line in stderr.splitlines() if line.startswith("error: ")]
    assert code == 1
    assert len(errors) == 1 and says in errors[0], stderr
    assert "Traceback" not in stderr
    assert "1 error(s) above" in stdout
    assert names(out) == expected - {remove}


def test_a_metrics_file_whose_weights_are_absent_names_every_run(tree, tmp_path, capsys):
    root, _ = tree
    for path in (root / "problem2" / "results").glob("model_*.pth"):
        path.unlink()
    for path in (root / "problem2" / "results").glob("training_log_*.json"):
        path.unlink()
    code, _, stderr = run(root, tmp_path / "s.zip", capsys)
    errors = stderr.splitlines()
    assert code == 1
    assert len(errors) == 4 and all("has neither model_" in line and "unverified" in line
                                    for line in errors), stderr


def test_files_the_grader_cannot_use_are_errors(tree, tmp_path, capsys):
    root, _ = tree
    write(root / "problem1" / "results" / "training_log_forward_n2000.json", '{"steps": [')
    write(root / "problem2" / "results" / "model_none.pth", fake_weights()[:100])
    write(root / "problem3" / "model.py", "def broken(:\n")
    code, _, stderr = run(root, tmp_path / "s.zip", capsys)
    errors = stderr.splitlines()
    assert code == 1
    assert len(errors) == 3, stderr
    assert errors[0].startswith("error: problem3/model.py, line 1: ")
    assert "does not compile: every part it holds scores 0" in errors[0]
    assert errors[1] == ("error: problem1/results/training_log_forward_n2000.json is not valid "
                         "JSON: the grader cannot read it (re-run the step that writes it)")
    assert errors[2].startswith("error: problem2/results/model_none.pth is not a torch.save "
                                "archive")


def test_files_over_the_graders_limits_are_errors(tree, tmp_path, capsys, monkeypatch):
    """With the limits made small: a weights file over WEIGHTS_BYTES is unverified, a file
    over SUBMISSION_FILE_BYTES is left out, and so is what comes over SUBMISSION_LIMIT_BYTES."""
    root, _ = tree
    monkeypatch.setattr(submission, "WEIGHTS_BYTES", 1000)
    write(root / "problem1" / "results" / "attention_maps.json", "[" + "0," * 1500 + "0]")
    monkeypatch.setattr(submission, "SUBMISSION_FILE_BYTES", 2048)
    monkeypatch.setattr(submission, "SUBMISSION_LIMIT_BYTES", 4096)
    code, _, stderr = run(root, tmp_path / "s.zip", capsys)
    errors = stderr.splitlines()
    assert code == 1
    assert "error: problem1/results/attention_maps.json: 2.9 KiB, over the grader's 2.0 KiB " \
           "a file: it is left out" in errors
    assert any(line.startswith("error: the files come to ") and "over the grader's 4.0 KiB"
               in line for line in errors)
    assert "error: problem2/results/model_none.pth: 1.6 KiB, over the 1000 bytes the grader " \
           "reads: it is unverified" in errors
    assert sum("the grader reads: it is unverified" in line for line in errors) == 11
    assert all(line.startswith("error: ") for line in errors)


def test_a_missing_figure_of_the_report_is_a_warning(tree, tmp_path, capsys):
    root, _ = tree
    (root / "problem2" / "results" / "figures" / "attention_maps.png").unlink()
    code, _, stderr = run(root, tmp_path / "s.zip", capsys)
    assert code == 0
    assert stderr == ("warning: problem2/REPORT.md shows 1 figure(s) that are missing: "
                      "problem2/results/figures/attention_maps.png\n")


# --------------------------------------------------------------------- atomic and bad input
def test_a_failed_write_leaves_no_partial_zip_and_the_previous_one_untouched(
        tree, tmp_path, capsys, monkeypatch):
    root, _ = tree
    out = tmp_path / "submission.zip"
    out.write_bytes(b"the previous zip")
    real_write = zipfile.ZipFile.write
    calls = []

    def full_disk(self, filename, arcname=None, *args, **kwargs):
        calls.append(arcname)
        if len(calls) == 5:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(self, filename, arcname, *args, **kwargs)

    monkeypatch.setattr(zipfile.ZipFile, "write", full_disk)
    code, stdout, stderr = run(root, out, capsys)
    assert code == 1
    assert stderr.startswith("error: the disk is full while writing ") and str(out) in stderr
    assert len(stderr.splitlines()) == 1 and stdout == ""
    assert out.read_bytes() == b"the previous zip"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hw", "submission.zip"]


@pytest.mark.parametrize("flags, says", [
    (["--out", "{tmp}/submission.tar"], "must end in .zip"),
    (["--out", "{tmp}/folder.zip"], "is a folder"),
    (["--out", "{tmp}/nowhere/submission.zip"], "does not exist"),
    (["--root", "{tmp}/data"], "holds no problem1/, problem2/ or problem3/ folder"),
    (["--root", "{tmp}/none"], "holds no problem1/"),
    (["--outt", "x.zip"], "unrecognized arguments"),
])
def test_bad_input_is_one_line_and_writes_nothing(tree, tmp_path, capsys, flags, says):
    root, _ = tree
    (tmp_path / "folder.zip").mkdir()
    (tmp_path / "data").mkdir()
    before = sorted(tmp_path.iterdir())
    argv = ["--root", str(root), "--out", str(tmp_path / "s.zip")]
    argv += [flag.format(tmp=tmp_path) for flag in flags]
    with pytest.raises(SystemExit) as stop:
        submission.main(argv)
    captured = capsys.readouterr()
    assert stop.value.code == 2
    assert captured.err.startswith("error: ") and says in captured.err
    assert len(captured.err.splitlines()) == 1 and captured.out == ""
    assert sorted(tmp_path.iterdir()) == before


def test_a_run_registry_that_cannot_be_imported_is_one_error(tree, tmp_path, capsys,
                                                             monkeypatch):
    """problemN/config.py imports the student's model code: where that fails, one error
    says so, and the problem's results go in by their file patterns, unchecked."""
    root, expected = tree
    real = submission.graded_results

    def broken(problem):
        if problem == "problem2":
            raise SyntaxError("invalid syntax (model.py, line 3)")
        return real(problem)

    monkeypatch.setattr(submission, "graded_results", broken)
    write(root / "problem2" / "results" / "model_not_prescribed.pth", fake_weights())
    out = tmp_path / "s.zip"
    code, _, stderr = run(root, out, capsys)
    assert code == 1
    assert stderr == ("error: problem2/config.py cannot be imported (SyntaxError: invalid "
                      "syntax (model.py, line 3)): its runs' files are not checked, fix that "
                      "first\n")
    assert names(out) == expected | {"problem2/results/model_not_prescribed.pth"}


def test_the_command_line_ends_without_a_traceback(tree, tmp_path):
    root, expected = tree
    command = [sys.executable, "-m", "provided.submission", "--root", str(root)]
    done = subprocess.run([*command, "--out", str(tmp_path / "s.zip")], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert names(tmp_path / "s.zip") == expected
    bad = subprocess.run([*command, "--out", str(tmp_path)], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr.startswith("error: --out ") and len(bad.stderr.splitlines()) == 1


def test_a_missing_samples_file_is_a_warning(tree, tmp_path, capsys):
    """The grader scores its own samples of the long run's weights; the file is compared."""
    root, expected = tree
    (root / "problem3" / "results" / f"samples_{MAIN_RUN}.txt").unlink()
    code, stdout, stderr = run(root, tmp_path / "submission.zip", capsys)
    assert code == 0, stderr
    assert any(line.startswith("warning: ") and f"samples_{MAIN_RUN}.txt is missing" in line
               for line in stderr.splitlines()), stderr


@pytest.mark.parametrize("status, make_fails", [(0, False), (1, False), (2, True)])
def test_make_submission_fails_only_when_no_zip_is_written(tmp_path, status, make_fails):
    """Exit status 1 (the zip written, with errors named) ends in one line saying so, not
    make's 'Error 1'; any other failure (a bad flag: 2) is make's failure. A python first on
    PATH stands in for provided.submission's status and runs the rest (the run registry)."""
    stand_in = tmp_path / "python"
    stand_in.write_text(f'#!/bin/sh\n[ "$2" = provided.submission ] && exit {status}\n'
                        f'exec {sys.executable} "$@"\n')
    stand_in.chmod(0o755)
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"}
    done = subprocess.run(["make", "-s", "submission", "PY=python"], cwd=REPO_ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert (done.returncode != 0) == make_fails, done.stderr
    assert ("the zip is written" in done.stderr) == (status == 1), done.stderr
    assert ("Error 1" in done.stderr) == make_fails, done.stderr
