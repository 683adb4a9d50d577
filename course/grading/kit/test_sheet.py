"""The final grade sheet (course/grading/sheet.py) on a class of two, written by hand: the
grading CSV and each submission's results.json as `grade --csv` leaves them, the written
files made by --template and filled in as a TA would, and the sheet's totals checked against
sums done here with fractions (the 168-point total exact, never a float sum)."""

import csv
import json
from fractions import Fraction

import pytest

from course.grading import rubric, sheet

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
