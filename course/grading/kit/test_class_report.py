"""The class report (course/grading/class_report.py) on a class of planted mistakes, really graded.

Five submissions are the reference with planted mistakes of course/grading/mutants.py (one with
two, in two parts; one without its problem2/dataset.py; one without any), graded on p1b and
p2a by course.grading.grade's own grade_folder, and a sixth that the grader fails on (a "not
graded" row). grade_folder keeps each submission's results.json in
graded_code/<submission>/, where the report looks for it. The report then builds its
catalogue of p1b's and p2a's mistakes (each planted alone and graded) and must name each
planted mistake with its count. About 40 s on 2 cores.
"""

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from course.grading import class_report, grade, mutants
from provided.common import REPO_ROOT

pytestmark = [pytest.mark.kit, pytest.mark.timeout(400)]
PARTS = ["p1b", "p2a"]
PLANTED = {"a_no_scale": ["p1b_no_scale"],
           "b_no_scale_and_targets_forward": ["p1b_no_scale", "p2a_targets_forward"],
           "c_mask_flipped": ["p1b_mask_flipped"],
           "d_reference": [],
           "e_no_problem2_dataset": [],
           "f_grader_fails": []}
BY_NAME = {m.name: m for m in mutants.MUTANTS}


def planted(folder: Path, names: list[str]) -> Path:
    """The reference problem folders with the named mistakes planted."""
    for path in REPO_ROOT.glob("problem*/*.py"):
        name = path.relative_to(REPO_ROOT).as_posix()
        text = path.read_text()
        for mistake in names:
            if BY_NAME[mistake].file == name:
                text = BY_NAME[mistake].apply(text)
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    return folder


def report_cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "course.grading.class_report", *map(str, args)],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def graded_class(tmp_path_factory):
    """(the CSV, the report's folder, the report command's completed process)."""
    root = tmp_path_factory.mktemp("class")
    submissions = root / "submissions"
    for name, mistakes in PLANTED.items():
        planted(submissions / name, mistakes)
    (submissions / "e_no_problem2_dataset" / "problem2" / "dataset.py").unlink()
    csv_path = root / "graded" / "scores.csv"
    csv_path.parent.mkdir()
    real = grade.grade

    def grade_or_fail(path, grader, parts, out, budget, keep=None):
        if path.name == "f_grader_fails":
            raise RuntimeError("a planted grader failure")
        return real(path, grader, parts, out, budget, keep=keep)

    grader = grade.setup(PARTS)
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(grade, "grade", grade_or_fail)
            grade.grade_folder(submissions, csv_path, grader, PARTS, 300)
    finally:
        grader.close()
    done = report_cli(csv_path)  # builds the catalogue of p1b's and p2a's mistakes
    return csv_path, csv_path.parent / "class_report", done


def rows_naming(text: str, needle: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("|") and needle in line]


def count_of(row: str) -> str:
    return next(cell.strip() for cell in row.split("|") if re.fullmatch(r"\s*\d+ \(\d+ %\)\s*",
                                                                         cell))


def test_the_page_names_each_planted_mistake_with_its_count(graded_class):
    csv_path, out, done = graded_class
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    text = (out / "class_report.md").read_text()
    catalogue = json.loads((out / "mistakes.json").read_text())
    assert {m.name for m in mutants.MUTANTS if m.part in PARTS} <= set(catalogue)
    assert "6 submissions in the CSV: 5 graded, 1 not graded" in text
    assert "the grader failed (RuntimeError: a planted grader failure) (f_grader_fails)" in text
    part_b = text.split("### p1b")[1].split("###")[0]
    part_a = text.split("### p2a")[1].split("###")[0]
    expected = {("p1b_no_scale", part_b): "2 (40 %)", ("p1b_mask_flipped", part_b): "1 (20 %)",
                ("p2a_targets_forward", part_a): "1 (20 %)"}
    for (mistake, section), count in expected.items():
        found = rows_naming(section, f"`{mistake}`")
        assert len(found) == 1 and count_of(found[0]) == count, (mistake, section)
        assert BY_NAME[mistake].mistake in found[0]
    missing = rows_naming(part_a, "every test fails: file or folder missing")
    assert len(missing) == 1 and count_of(missing[0]) == "1 (20 %)"
    assert "3 (60 %) lose points" in part_b and "2 (40 %) lose points" in part_a
    assert not rows_naming(part_b, "| other |") and not rows_naming(part_a, "| other |"), \
        "a planted mistake's failing tests are all explained by it"
    top = text.split("## Most common mistakes")[1].split("##")[0]
    assert "`p1b_no_scale`" in rows_naming(top, "| p1b |")[0]
    assert "| p1b Attention | 8 |" in text


def test_no_test_output_reaches_the_page(graded_class):
    """Test names only: an assertion's message (which may hold a reference value) never."""
    csv_path, out, _ = graded_class
    text = (out / "class_report.md").read_text()
    outputs = {line.strip() for path in (csv_path.parent / "graded_code").glob("*/results.json")
               for t in json.loads(path.read_text())["tests"]
               for line in t["output"].splitlines() if len(line.strip()) > 25}
    assert outputs and not [line for line in outputs if line in text]
    assert "Expected" not in text and "Traceback" not in text


def test_the_distribution_figure_is_written(graded_class):
    _, out, done = graded_class
    figure = out / "figures" / "scores_per_part.png"
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and figure.stat().st_size > 10_000
    assert "](figures/scores_per_part.png)" in (out / "class_report.md").read_text()
    assert not list(out.rglob("*.tmp*")), "every write is renamed into place"
    assert str(out / "class_report.md") in done.stdout


def test_a_row_not_graded_is_one_warning_line(graded_class):
    _, _, done = graded_class
    lines = [line for line in done.stderr.splitlines() if "f_grader_fails" in line]
    assert len(lines) == 1 and lines[0].startswith("warning:") and "grade it again" in lines[0]
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_a_results_file_that_is_not_json_is_one_line_and_left_out(graded_class, tmp_path,
                                                                   capsys):
    csv_path, out, _ = graded_class
    copy = tmp_path / "graded"
    shutil.copytree(csv_path.parent, copy)
    broken = copy / "graded_code" / "a_no_scale" / "results.json"
    broken.write_text('{"score": 3, "tests": [')
    code = class_report.main([str(copy / "scores.csv"), "--catalogue",
                              str(out / "mistakes.json"), "--out", str(tmp_path / "report")])
    err = capsys.readouterr().err
    assert code == 0 and "Traceback" not in err
    lines = [line for line in err.splitlines() if str(broken) in line]
    assert len(lines) == 1 and "not JSON" in lines[0] and "grade a_no_scale again" in lines[0]
    text = (tmp_path / "report" / "class_report.md").read_text()
    assert re.search(r"left out: 1 whose results.json is not JSON \(.*\) \(a_no_scale\)", text)
    part_b = text.split("### p1b")[1].split("###")[0]
    assert count_of(rows_naming(part_b, "`p1b_no_scale`")[0]) == "1 (25 %)"


@pytest.mark.parametrize("case", ["no csv", "not a grading csv", "bad catalogue"])
def test_bad_input_is_one_line(graded_class, tmp_path, capsys, case):
    csv_path, out, _ = graded_class
    args, needle = [str(csv_path), "--out", str(tmp_path / "report")], str(csv_path)
    if case == "no csv":
        args[0] = needle = str(tmp_path / "nowhere.csv")
    elif case == "not a grading csv":
        args[0] = needle = str(tmp_path / "other.csv")
        Path(needle).write_text("name,points\nx,1\n")
    else:
        needle = str(tmp_path / "mistakes.json")
        Path(needle).write_text("{not json")
        args += ["--catalogue", needle]
    with pytest.raises(SystemExit) as stop:
        class_report.main(args)
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1 and err.startswith("error:") and needle in err
    assert not (tmp_path / "report" / "class_report.md").exists()
