"""The final grade sheet (course/grading/sheet.py) on a class of two, written by hand: the
grading CSV and each submission's results.json as `grade --csv` leaves them, the written
files made by --template and filled in as a TA would, and the sheet's totals checked against
sums done here with fractions (the 168-point total exact, never a float sum)."""

import csv
import json
from fractions import Fraction

import pytest

from course.grading import rubric, sheet
from provided.common import REPO_ROOT

pytestmark = pytest.mark.kit
TESTS_PER_PART = 7  # every part's points over 7 tests: shares that no float adds up exactly
QUANTITIES = {"problem1": 7, "problem2": 5, "problem3": 4}


def results_json(failing_parts: dict, failing_results: dict) -> dict:
    """A results.json: each part's 7 tests and each problem's results entries, the first
    failing_parts[part] (failing_results[problem]) of them failed."""
    tests = []
    for part, (*_, points) in rubric.PARTS.items():
        share = points / TESTS_PER_PART
        tests += [{"name": f"{part}: test_{i}", "score": 0.0 if i < failing_parts.get(part, 0)
                   else share, "max_score": share, "tags": [part], "output": ""}
                  for i in range(TESTS_PER_PART)]
    for problem, points in rubric.RESULTS.items():
        share = points / QUANTITIES[problem]
        tests.append({"name": f"{problem} results: status", "score": 0.0, "max_score": 0.0,
                      "tags": [f"{problem}-results"], "output": ""})
        tests += [{"name": f"{problem} results: q{i}", "score": 0.0 if i < failing_results.get(
                   problem, 0) else share, "max_score": share, "tags": [f"{problem}-results"],
                   "output": ""} for i in range(QUANTITIES[problem])]
    return {"score": round(sum(t["score"] for t in tests), 4), "tests": tests}


CLASS = {"ada": ({"p1b": 3, "p3d": 1}, {"problem1": 2, "problem3": 1}),
         "bob": ({}, {"problem2": 5})}
WRITTEN = {("ada", "problem1_q1"): "2.5", ("ada", "problem3_q6"): "3",
           ("bob", "problem1_q1"): "3", ("bob", "problem2_q8"): "1.5"}


def expected(name: str) -> tuple[Fraction, Fraction]:
    """(autograded, written) points of a CLASS submission, with fractions."""
    parts, results = CLASS[name]
    auto = sum(Fraction(points * (TESTS_PER_PART - parts.get(part, 0)), TESTS_PER_PART)
               for part, (*_, points) in rubric.PARTS.items())
    auto += sum(Fraction(points * (QUANTITIES[p] - results.get(p, 0)), QUANTITIES[p])
                for p, points in rubric.RESULTS.items())
    questions = sheet.written_questions()
    written = sum((Fraction(WRITTEN[name, q.key]) if (name, q.key) in WRITTEN else q.points)
                  for q in questions)
    return auto, written


@pytest.fixture
def graded(tmp_path):
    """scores.csv and graded_code/<name>/results.json of CLASS, as grade --csv writes them."""
    lines = ["submission,score,max_score," + ",".join(rubric.PARTS) + ",results,note"]
    for name, (parts, results) in CLASS.items():
        data = results_json(parts, results)
        (tmp_path / "graded_code" / name).mkdir(parents=True)
        (tmp_path / "graded_code" / name / "results.json").write_text(json.dumps(data))
        by_part = [round(sum(t["score"] for t in data["tests"] if t["tags"] == [p]), 4)
                   for p in rubric.PARTS]
        res = round(sum(t["score"] for t in data["tests"] if t["tags"][0].endswith("results")),
                    4)
        lines.append(f"{name},{data['score']},108.0," + ",".join(map(str, by_part))
                     + f",{res},")
    (tmp_path / "scores.csv").write_text("\n".join(lines) + "\n")
    return tmp_path


def fill(folder, values: dict) -> None:
    """The TA's work: every blank of every template filled with the question's full points,
    except the points of values ({(submission, question key): text})."""
    for question in sheet.written_questions():
        path = folder / f"{question.key}.csv"
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
        for row in rows:
            row["points"] = values.get((row["submission"], question.key),
                                       sheet.shown(question.points))
        sheet.write_rows(path, sheet.WRITTEN_COLUMNS, rows)


def test_the_sheet_joins_autograded_and_written_points_exactly(graded, capsys):
    written = graded / "written"
    assert sheet.main([str(graded / "scores.csv"), "--written", str(written), "--template"]) == 0
    assert len(list(written.glob("problem*_q*.csv"))) == 26
    fill(written, WRITTEN)
    assert sheet.main([str(graded / "scores.csv"), "--written", str(written)]) == 0
    out = capsys.readouterr()
    assert "wrote" in out.out and "out of 168" in out.out and not out.err.strip()
    with open(graded / "grade_sheet.csv", newline="") as f:
        rows = {row["submission"]: row for row in csv.DictReader(f)}
    assert set(rows) == set(CLASS)
    for name, row in rows.items():
        auto, written_points = expected(name)
        assert row["max"] == "168" and row["missing"] == ""
        assert row["written"] == sheet.shown(written_points)
        assert row["total"] == sheet.shown(auto + written_points), name
        assert Fraction(row["code"]) + Fraction(row["results"]) == pytest.approx(auto, abs=0.01)
    assert rows["bob"]["code"] == "100" and rows["bob"]["results"] == "6"
    assert rows["bob"]["written_problem2"] == "14.5" and rows["ada"]["problem1_q1"] == "2.5"
    # ada: code 100 - 8 * 3/7 - 12 * 1/7 = 94.857..., results 3 * 5/7 + 2 + 3 * 3/4 =
    # 6.392..., written 58.5: 159.75 exactly (the float shares add up to 101.24999999999999)
    assert (rows["ada"]["code"], rows["ada"]["results"]) == ("94.86", "6.39")
    assert rows["ada"]["total"] == "159.75"


def test_a_blank_is_named_missing_and_counts_nothing(graded, capsys):
    written = graded / "written"
    sheet.main([str(graded / "scores.csv"), "--written", str(written), "--template"])
    fill(written, {("bob", "problem3_q2"): ""})
    sheet.main([str(graded / "scores.csv"), "--written", str(written)])
    assert "1 with written questions missing" in capsys.readouterr().out
    with open(graded / "grade_sheet.csv", newline="") as f:
        rows = {row["submission"]: row for row in csv.DictReader(f)}
    assert rows["bob"]["missing"] == "problem3_q2" and rows["bob"]["written"] == "57"


@pytest.mark.parametrize("case", ["stranger", "too many points", "not a number", "no csv"])
def test_bad_input_is_one_line_naming_the_file(graded, capsys, case):
    written = graded / "written"
    sheet.main([str(graded / "scores.csv"), "--written", str(written), "--template"])
    capsys.readouterr()
    path = written / "problem2_q3.csv"
    args = [str(graded / "scores.csv"), "--written", str(written)]
    if case == "stranger":
        path.write_text("submission,points,comment\nzoe,1,\n")
    elif case == "too many points":
        path.write_text("submission,points,comment\nada,2.5,\n")
    elif case == "not a number":
        path.write_text("submission,points,comment\nada,two,\n")
    else:
        path = graded / "nowhere.csv"
        args[0] = str(path)
    with pytest.raises(SystemExit) as stop:
        sheet.main(args)
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1 and err.startswith("error:") and str(path) in err


def test_the_rubric_has_26_questions_adding_up_to_written():
    questions = sheet.written_questions()
    assert len(questions) == 26
    for problem, points in rubric.WRITTEN.items():
        assert sum(q.points for q in questions if q.problem == problem) == points


# ------------------------------------------------------------------ Gradescope's export
def export_text(columns: list[str], rows: list[list[str]]) -> str:
    """A CSV as Gradescope's Download Grades writes one (a byte order mark first)."""
    lines = [",".join(f'"{c}"' for c in columns)] + [",".join(row) for row in rows]
    return "\ufeff" + "\n".join(lines) + "\n"


STUDENT_COLUMNS = ["Name", "SID", "Email", "Total Score", "Max Points", "Status",
                   "Submission ID", "Submission Time", "Lateness (H:M:S)", "View Count",
                   "Submission Count"]


def gradescope_export(ada: list[str], bob: list[str], by: str = "number") -> str:
    """An export of the 26 questions, as numbered in a Gradescope outline of three
    questions (the problems) of 7, 8 and 11 sub-questions (by="number"), as 26 questions in
    order with other titles (by="place") or titled as outline.csv (by="title"); ada matched
    by her email's name, bob through --students, and cy, a roster row without a submission."""
    questions = sheet.written_questions()
    columns = list(STUDENT_COLUMNS)
    if by == "number":
        columns += [f"{p}: Problem {p} ({points}.0 pts)" for p, points in
                    enumerate(rubric.WRITTEN.values(), start=1)]
    for place, q in enumerate(questions, start=1):
        points = f"{float(q.points)} pts"
        columns.append({"number": f"{q.problem[-1]}.{q.number}: {q.title} ({points})",
                        "place": f"{place + 1}: Question {place} ({points})",
                        "title": f"{place}: {q.title} ({points})"}[by])
    if by == "place":
        columns.insert(len(STUDENT_COLUMNS), "1: Cover (0.0 pts)")
    parents = ["", "", ""] if by == "number" else []
    cover = [""] if by == "place" else []
    start = ["Ada Lovelace", "1001", "Ada@uni.edu", "59.5", "60.0", "Graded", "11", "", "0:00:00",
             "1", "1"]
    rows = [start + parents + cover + ada,
            ["Bob Babbage", "1002", "bb7@uni.edu", "", "60.0", "Graded", "12", "", "0:00:00",
             "1", "1"] + parents + cover + bob,
            ["Cy Young", "1003", "cy@uni.edu", "", "60.0", "Missing", "", "", "", "", ""]
            + parents + cover + [""] * len(questions)]
    return export_text(columns, rows)


def full_points(changes: dict) -> list[str]:
    """Every question's full points as Gradescope writes them (2.0), but changes {key: text}."""
    return [changes.get(q.key, f"{float(q.points)}") for q in sheet.written_questions()]


@pytest.mark.parametrize("by", ["number", "place", "title"])
def test_gradescopes_export_fills_the_written_files_and_the_sheet(graded, capsys, by):
    """Each question's column lands in its file and the sheet's sums are exact: ada loses
    0.5 on problem1_q1 and 2 on problem3_q6; bob 1.5 on problem2_q8 and 0.25 on
    problem3_q11; bob's problem1_q3 is blank on Gradescope and keeps the file's 3.5."""
    export, students, written = (graded / "written_scores.csv", graded / "students.csv",
                                 graded / "written")
    export.write_text(gradescope_export(
        full_points({"problem1_q1": "2.5", "problem3_q6": "2.0"}),
        full_points({"problem2_q8": "0.5", "problem3_q11": "1.75", "problem1_q3": ""}), by))
    students.write_text("submission,email,sid\nbob,,1002\n")
    written.mkdir()
    (written / "problem1_q3.csv").write_text("submission,points,comment\nbob,3.5,see p. 4\n")
    args = [str(graded / "scores.csv"), "--written", str(written), "--gradescope", str(export),
            "--students", str(students)]
    documented = ("python -m course.grading.sheet scores.csv --written written/ "
                  "--gradescope written_scores.csv")
    assert documented in (REPO_ROOT / "course" / "INSTRUCTORS.md").read_text()
    assert documented in sheet.__doc__
    assert sheet.main(args) == 0
    out = capsys.readouterr()
    assert not out.err.strip()
    assert (f"read {export}: 2 students' points of 26 questions into {written}; 1 roster rows "
            "without a submission left out") in out.out
    with open(written / "problem1_q3.csv", newline="") as f:
        assert list(csv.DictReader(f)) == [
            {"submission": "bob", "points": "3.5", "comment": "see p. 4"},
            {"submission": "ada", "points": "4", "comment": ""}]
    with open(graded / "grade_sheet.csv", newline="") as f:
        rows = {row["submission"]: row for row in csv.DictReader(f)}
    assert (rows["ada"]["problem1_q1"], rows["ada"]["problem3_q6"]) == ("2.5", "2")
    assert (rows["bob"]["problem2_q8"], rows["bob"]["problem3_q11"]) == ("0.5", "1.75")
    assert [rows[n]["written_problem1"] for n in ("ada", "bob")] == ["19.5", "19.5"]
    assert [rows[n]["written"] for n in ("ada", "bob")] == ["57.5", "57.75"]
    assert rows["ada"]["total"] == "158.75" and rows["bob"]["total"] == "163.75"
    assert rows["ada"]["missing"] == rows["bob"]["missing"] == ""


@pytest.mark.parametrize("case", ["no id column", "unknown question", "points differ",
                                  "stranger", "absent", "too many points"])
def test_a_bad_export_is_one_line_naming_it(graded, capsys, case):
    export = graded / "written_scores.csv"
    text = gradescope_export(full_points({}), full_points({}))
    if case == "no id column":
        text = text.replace('"SID"', '"Student"').replace('"Email"', '"Mail"')
    elif case == "unknown question":
        text = text.replace('"Submission Count"', '"Submission Count","4.1: Bonus (1.0 pts)"')
    elif case == "points differ":
        text = text.replace('(3.0 pts)"', '(2.0 pts)"', 1)
    elif case == "too many points":
        text = text.replace("Ada@uni.edu,59.5,60.0,Graded,11,,0:00:00,1,1,,,,3.0",
                            "Ada@uni.edu,59.5,60.0,Graded,11,,0:00:00,1,1,,,,3.5")
    elif case == "absent":
        text = "\n".join(line for line in text.splitlines() if "Ada" not in line) + "\n"
    export.write_text(text)
    args = [str(graded / "scores.csv"), "--written", str(graded / "written"),
            "--gradescope", str(export)]
    if case != "stranger":
        (graded / "students.csv").write_text("submission,email,sid\nbob,bb7@uni.edu,\n")
        args += ["--students", str(graded / "students.csv")]
    with pytest.raises(SystemExit) as stop:
        sheet.main(args)
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1 and err.startswith(f"error: {export}")
    assert {"no id column": "no column Email or SID",
            "unknown question": "question column '4.1: Bonus (1.0 pts)' is none of the rubric's",
            "points differ": "is worth 2 points, the rubric's problem1_q1 3",
            "stranger": "line 3: Bob Babbage (1002, bb7, bb7@uni.edu) matches no submission",
            "absent": "has no student for the submission ada",
            "too many points": "line 2 (ada), column '1.1: "}[case] in err
    assert not (graded / "grade_sheet.csv").exists()
