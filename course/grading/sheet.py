"""The course's final grade sheet: the autograder's points joined with the written points a
TA enters, one row per submission, the total out of 168 exact.

    python -m course.grading.sheet scores.csv --written written/ --template   # the TA's files
    python -m course.grading.sheet scores.csv --written written/              # -> grade_sheet.csv
    python -m course.grading.sheet scores.csv --written written/ --gradescope written_scores.csv

Instructors only. scores.csv is what `python -m course.grading.grade SUBMISSIONS --csv
scores.csv` wrote. The written answers are graded by hand with course/grading/RUBRIC.md,
whose tables split each problem's WRITTEN points (course/grading/rubric.py) over its
questions (written_questions: 26 questions). The TA enters them in one CSV per question,
written/problemN_qK.csv, with the columns submission, points, comment; `--template` writes
those files, one row per submission of scores.csv and the points left blank (a file that
exists is kept). Points are decimals (half points are allowed), from 0 to the question's
points; a blank is a question not graded yet: it counts 0 and the sheet's `missing` column
names it.

The sheet (--out, default grade_sheet.csv beside scores.csv) has per submission: the code
points, the results points, each question's written points, each problem's written sum,
the total and the maximum (168), the questions still missing and the grader's note. Every
sum is exact (fractions.Fraction): the autograder's points are recomputed from each
submission's results.json (graded_code/<submission>/results.json beside the CSV, or
--results), where each test is worth its part's points over the part's number of tests and
scores all or nothing, so a part's points are points x passed / tests exactly; where
results.json is missing the CSV's 4-decimal values are taken, with a warning. Each number
is written once, rounded half up to two decimals only where it is not exact in hundredths.

--gradescope EXPORT reads the written points from Gradescope instead: the CSV of the "Exam /
Quiz" assignment the PDFs of course.grading.written were graded in (Review Grades ->
Download Grades -> CSV: the columns Name, SID, Email, ..., Status, ..., then one per
question, "7: title (3.0 pts)" or "2.7: title (3.0 pts)"). Its question columns are mapped
to the rubric's questions by title (outline.csv's, or the key problem1_q7), else by number
N.K (problem N, question K), else in order when it has exactly the 26 questions with
points; a question that has sub-questions and a 0-point question (a cover, say) are left
out, and a question worth other points than the rubric's is refused. Each row is matched
to a submission of scores.csv whose name is the student's email, the email before its @ or
the SID (case ignored), or through --students FILE (columns submission and email or sid).
Its points are merged into written/problemN_qK.csv (a blank on Gradescope keeps the file's
points, a comment is kept) and the sheet is made from those files as usual. A roster row
with no submission on Gradescope (blank points, Status "Missing") that matches no
submission is left out and counted.

Bad input is one line naming the file or flag (error:, exit 2): a missing or malformed
CSV, a written file with an unknown submission, a repeated row, or points that are not a
number from 0 to the question's points; in an export, no Email or SID column, a question
column that is none of the rubric's, a question twice, a student who matches no
submission or two, a submission no student matches.
"""

import csv
import json
import math
import re
import sys
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

from course.grading import rubric as RUBRIC
from course.grading.intake import GRADED_FOLDER
from provided.common import REPO_ROOT, ArgumentParser, fail, script
from provided.results import atomic_write_text

RUBRIC_MD = REPO_ROOT / "course" / "grading" / "RUBRIC.md"
SHEET_NAME = "grade_sheet.csv"
WRITTEN_COLUMNS = ["submission", "points", "comment"]
PROBLEM_HEADING = re.compile(r"^## Problem (\d+) \((\d+) points\)\s*$")
QUESTION_ROW = re.compile(r"^\| (\d+)\. (.+?) \| (\d+(?:\.\d+)?) \|\s*$")


def warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------- the rubric's questions
@dataclass(frozen=True)
class Question:
    problem: str  # "problem1"
    number: int  # 1-based, as RUBRIC.md and the report template number it
    title: str  # the template's heading without its number
    points: Fraction

    @property
    def key(self) -> str:
        """The question's name in file names and columns: problem1_q3."""
        return f"{self.problem}_q{self.number}"


def written_questions(path: Path = RUBRIC_MD) -> list[Question]:
    """The written questions of RUBRIC.md's per-problem tables ("| K. title | points |"
    under "## Problem N (P points)"), in order; their points must add up to each problem's
    WRITTEN in course/grading/rubric.py (ValueError otherwise)."""
    questions, problem = [], None
    for line in path.read_text().splitlines():
        heading = PROBLEM_HEADING.match(line)
        if heading:
            problem = f"problem{heading.group(1)}"
            continue
        if line.startswith("### ") or line.startswith("## "):
            problem = None if line.startswith("## ") else problem
        row = QUESTION_ROW.match(line)
        if problem and row:
            questions.append(Question(problem, int(row.group(1)), row.group(2),
                                      Fraction(row.group(3))))
    for problem, points in RUBRIC.WRITTEN.items():
        mine = [q for q in questions if q.problem == problem]
        if sum(q.points for q in mine) != points or \
                [q.number for q in mine] != list(range(1, len(mine) + 1)):
            raise ValueError(f"{path}: {problem}'s questions ({len(mine)}) do not add up to "
                             f"its {points} written points in order")
    return questions


# ----------------------------------------------------------------------------- numbers
def decimal_points(text: str) -> Fraction:
    """A decimal as a Fraction, exactly ("2.5" -> 5/2); ValueError if it is not one."""
    if not re.fullmatch(r"\s*\d+(\.\d+)?\s*", text):
        raise ValueError(text)
    return Fraction(text.strip())


def shown(points: Fraction | None) -> str:
    """points as the sheet writes them: exact where exact in hundredths (12, 2.5, 0.25),
    else rounded once, half up, to two decimals; blank for None."""
    if points is None:
        return ""
    hundredths = points * 100
    if hundredths.denominator != 1:
        hundredths = Fraction(math.floor(hundredths + Fraction(1, 2)))
    whole, rest = divmod(int(hundredths), 100)
    return str(whole) if not rest else f"{whole}.{rest:02d}".rstrip("0")


def exact_autograded(results: dict) -> dict[str, Fraction]:
    """{"code", "results"} of one Gradescope results.json, exactly: per part (or problem's
    results) its rubric points x the tests passed / its tests with points."""
    groups = {}
    for test in results["tests"]:
        if test["max_score"] > 0:
            passed = test["score"] >= test["max_score"] * (1 - 1e-9)
            tally = groups.setdefault(test["tags"][0], [0, 0])
            tally[0] += passed
            tally[1] += 1
    out = {"code": Fraction(0), "results": Fraction(0)}
    for tag, (passed, tests) in groups.items():
        if tag in RUBRIC.PARTS:
            out["code"] += Fraction(RUBRIC.PARTS[tag][3] * passed, tests)
        elif tag.endswith("-results") and tag.removesuffix("-results") in RUBRIC.RESULTS:
            out["results"] += Fraction(RUBRIC.RESULTS[tag.removesuffix("-results")] * passed,
                                       tests)
        else:
            raise ValueError(f"a test tagged {tag!r}, not a part of the rubric")
    return out


# ------------------------------------------------------------------------------ inputs
def read_csv(path: Path, needed: list[str], what: str) -> list[dict]:
    """The rows of a CSV with the columns needed; one line naming the file otherwise."""
    if not path.is_file():
        fail(f"{path}: no such file: {what}")
    try:
        with open(path, newline="") as f:
            reader = csv.DictReader(f)
            columns, rows = reader.fieldnames or [], list(reader)
    except (OSError, UnicodeDecodeError, csv.Error) as err:
        fail(f"{path} cannot be read as a CSV ({type(err).__name__}: {err}): {what}")
    missing = [c for c in needed if c not in columns]
    if missing:
        fail(f"{path} has no column {', '.join(missing)}: {what}")
    return rows


def autograded(csv_path: Path, results_dir: Path) -> dict[str, dict]:
    """{submission: {"code", "results": Fraction or None, "note"}} from the grading CSV,
    exact from each results.json where it can be read."""
    what = "give the CSV that python -m course.grading.grade --csv wrote"
    rows = read_csv(csv_path, ["submission", "score", "note"], what)
    out = {}
    for number, row in enumerate(rows, start=2):
        name = row["submission"] or ""
        if not name:
            fail(f"{csv_path}, line {number}: no submission name: {what}")
        if name in out:
            fail(f"{csv_path}, line {number}: {name} is listed twice: {what}")
        note = row.get("note") or ""
        if note.startswith("not graded"):
            out[name] = {"code": None, "results": None, "note": note}
            continue
        path = results_dir / name / "results.json"
        try:
            points = exact_autograded(json.loads(path.read_text()))
        except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError, IndexError):
            parts = [p for p in RUBRIC.PARTS if p in row]
            try:
                points = {"code": sum((decimal_points(row[p]) for p in parts), Fraction(0)),
                          "results": decimal_points(row.get("results") or "0")}
            except (ValueError, TypeError):
                fail(f"{csv_path}, line {number} ({name}): a score that is not a number: {what}")
            warn(f"{path} cannot be read: {name}'s autograded points are the CSV's, rounded "
                 "to 4 decimals (give --results the folder holding <submission>/results.json)")
        else:
            score = float(row["score"] or "nan")
            if not abs(float(points["code"] + points["results"]) - score) < 1e-3:
                fail(f"{path} gives {name} {float(points['code'] + points['results']):.4f} "
                     f"points, {csv_path} {row['score']}: grade the class again")
        out[name] = {**points, "note": note}
    if not out:
        fail(f"{csv_path} has no submissions: grade a folder of submissions into it first")
    return out


def written_points(folder: Path, questions: list[Question],
                   submissions: list[str]) -> dict[str, dict[str, Fraction | None]]:
    """{question key: {submission: points or None (blank)}} from folder/<key>.csv; a file
    that is missing counts as every submission blank, with a warning."""
    out = {}
    absent = []
    for question in questions:
        path = folder / f"{question.key}.csv"
        points = dict.fromkeys(submissions)
        out[question.key] = points
        if not path.exists():
            absent.append(path.name)
            continue
        what = (f"one row per submission, points from 0 to {shown(question.points)} "
                f"(python -m course.grading.sheet ... --template writes the file)")
        seen = set()
        for number, row in enumerate(read_csv(path, ["submission", "points"], what), start=2):
            name, text = row["submission"] or "", (row["points"] or "").strip()
            if name not in points:
                fail(f"{path}, line {number}: {name!r} is not a submission of the grading "
                     f"CSV: {what}")
            if name in seen:
                fail(f"{path}, line {number}: {name} is listed twice: {what}")
            seen.add(name)
            if not text:
                continue
            try:
                value = decimal_points(text)
            except ValueError:
                value = None
            if value is None or value > question.points:
                fail(f"{path}, line {number} ({name}): points {text!r}: {what}")
            points[name] = value
    if absent:
        warn(f"{len(absent)} of the {len(questions)} written files are missing in {folder} "
             f"(e.g. {absent[0]}): their points count 0 and are listed as missing")
    return out


# ------------------------------------------------------------------------------- sheet
def sheet_rows(auto: dict, written: dict, questions: list[Question]) -> tuple[list, list]:
    """(columns, rows) of the final sheet; every sum exact."""
    maximum = (sum(Fraction(p[3]) for p in RUBRIC.PARTS.values())
               + sum(map(Fraction, RUBRIC.RESULTS.values()))
               + sum(q.points for q in questions))
    columns = ["submission", "code", "results", *(q.key for q in questions),
               *(f"written_{p}" for p in RUBRIC.WRITTEN), "written", "total", "max",
               "missing", "note"]
    rows = []
    for name, points in auto.items():
        row = {"submission": name, "code": shown(points["code"]),
               "results": shown(points["results"]), "max": shown(maximum),
               "note": points["note"]}
        missing, by_problem = [], dict.fromkeys(RUBRIC.WRITTEN, Fraction(0))
        for q in questions:
            value = written[q.key][name]
            row[q.key] = shown(value)
            if value is None:
                missing.append(q.key)
            else:
                by_problem[q.problem] += value
        for problem, value in by_problem.items():
            row[f"written_{problem}"] = shown(value)
        total_written = sum(by_problem.values(), Fraction(0))
        row["written"] = shown(total_written)
        row["total"] = shown(total_written + (points["code"] or 0) + (points["results"] or 0))
        row["missing"] = " ".join(missing)
        rows.append(row)
    return columns, rows


def write_rows(path: Path, columns: list[str], rows: list[dict]) -> None:
    lines = []

    class Sink:
        def write(self, text):
            lines.append(text)

    writer = csv.DictWriter(Sink(), fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    atomic_write_text(path, "".join(lines))


def write_templates(folder: Path, questions: list[Question], submissions: list[str]) -> int:
    """folder/<question>.csv for every question that has none: one row per submission,
    points blank. Returns how many were written."""
    folder.mkdir(parents=True, exist_ok=True)
    written = 0
    for question in questions:
        path = folder / f"{question.key}.csv"
        if not path.exists():
            write_rows(path, WRITTEN_COLUMNS, [{"submission": name, "points": "", "comment": ""}
                                               for name in submissions])
            written += 1
    return written


# ------------------------------------------------------------------ Gradescope's export
GRADESCOPE_COLUMN = re.compile(
    r"^\s*(?:q(?:uestion)?\s*)?(\d+(?:\.\d+)*)\s*(?::\s*(.*?))?\s*"
    r"(?:\(\s*(\d+(?:\.\d+)?)\s*pts?\s*\))?\s*$", re.IGNORECASE)
EXPORT_HELP = ("download it from Gradescope: the written assignment's Review Grades -> "
               "Download Grades -> CSV")


def squeezed(text: str) -> str:
    """text compared loosely: case ignored, runs of white space one space, no end dot."""
    return re.sub(r"\s+", " ", text).strip().rstrip(".").casefold()


def export_questions(path: Path, columns: list[str],
                     questions: list[Question]) -> dict[str, Question]:
    """{export column: rubric question} for the export's graded question columns."""
    found = []  # (column, number, title, points or None)
    for column in columns:
        match = GRADESCOPE_COLUMN.match(column or "")
        if match:
            points = Fraction(match.group(3)) if match.group(3) else None
            found.append((column, match.group(1), match.group(2) or "", points))
    numbers = {number for _, number, _, _ in found}
    leaves = [q for q in found if not any(n.startswith(q[1] + ".") for n in numbers)
              and q[3] != 0]
    if not leaves:
        fail(f"{path} has no question columns (\"1: title (2.0 pts)\"): {EXPORT_HELP}")
    by_title = {}
    for q in questions:
        by_title[squeezed(q.title)] = by_title[squeezed(q.key)] = q
    by_number = {f"{q.problem.removeprefix('problem')}.{q.number}": q for q in questions}
    if all(squeezed(title) in by_title for _, _, title, _ in leaves):
        mapped = {column: by_title[squeezed(title)] for column, _, title, _ in leaves}
    elif all(number in by_number for _, number, _, _ in leaves):
        mapped = {column: by_number[number] for column, number, _, _ in leaves}
    elif len(leaves) == len(questions):
        mapped = {leaf[0]: q for leaf, q in zip(leaves, questions)}
    else:
        column = next(c for c, _, title, _ in leaves if squeezed(title) not in by_title)
        fail(f"{path}: question column {column!r} is none of the rubric's {len(questions)} "
             f"questions by title, by number N.K or by place (the export has {len(leaves)} "
             "question columns with points): title the questions on Gradescope as "
             "written_pdfs/outline.csv does")
    seen = {}
    for column, _, _, points in leaves:
        question = mapped[column]
        if question.key in seen:
            fail(f"{path}: columns {seen[question.key]!r} and {column!r} are both "
                 f"{question.key}: keep one column a question")
        seen[question.key] = column
        if points is not None and points != question.points:
            fail(f"{path}: column {column!r} is worth {shown(points)} points, the rubric's "
                 f"{question.key} {shown(question.points)}: set the question's points on "
                 "Gradescope as RUBRIC.md has them")
    return mapped


def student_aliases(path: Path | None) -> dict[str, str]:
    """{email or sid, case folded: submission} of --students FILE."""
    if path is None:
        return {}
    what = "give a CSV with the columns submission and email or sid, a row a student"
    rows = read_csv(path, ["submission"], what)
    aliases = {}
    for number, row in enumerate(rows, start=2):
        keys = [squeezed(row.get(c) or "") for c in ("email", "sid")]
        if not row["submission"] or not any(keys):
            fail(f"{path}, line {number}: no submission or no email and sid: {what}")
        for key in filter(None, keys):
            aliases[key] = row["submission"]
    return aliases


def gradescope_points(path: Path, questions: list[Question], submissions: list[str],
                      aliases: dict[str, str]) -> tuple[dict, int]:
    """({question key: {submission: points or None}}, roster rows left out) of an export:
    every submission matched by one row."""
    if not path.is_file():
        fail(f"{path}: no such file: {EXPORT_HELP}")
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            reader = csv.DictReader(f)
            columns, rows = reader.fieldnames or [], list(reader)
    except (OSError, UnicodeDecodeError, csv.Error) as err:
        fail(f"{path} cannot be read as a CSV ({type(err).__name__}: {err}): {EXPORT_HELP}")
    named = {squeezed(c or ""): c for c in columns}
    ids = [named[k] for k in ("email", "sid") if k in named]
    if not ids:
        fail(f"{path} has no column Email or SID, which match its students to the "
             f"submissions: {EXPORT_HELP}")
    mapped = export_questions(path, columns, questions)
    names = {squeezed(name): name for name in submissions}
    out = {q.key: {} for q in mapped.values()}
    owner, left_out = {}, 0
    for number, row in enumerate(rows, start=2):
        email = squeezed(row.get(named.get("email", ""), "") or "")
        keys = {email, email.split("@")[0], squeezed(row.get(named.get("sid", ""), "") or "")}
        keys.discard("")
        found = {names.get(k) or aliases.get(k) for k in keys} - {None}
        who = (row.get(named.get("name", "")) or ", ".join(sorted(keys)) or "a student")
        values = {column: (row.get(column) or "").strip() for column in mapped}
        if not found:
            status = squeezed(row.get(named.get("status", ""), "") or "")
            if status == "missing" or not any(values.values()):
                left_out += 1
                continue
            fail(f"{path}, line {number}: {who} ({', '.join(sorted(keys))}) matches no "
                 "submission of the grading CSV by email or SID: name the submission by the "
                 "student's email or SID in --students FILE (columns submission, email, sid)")
        if len(found) > 1:
            fail(f"{path}, line {number}: {who} matches the submissions "
                 f"{', '.join(sorted(found))}: give one submission a student in --students")
        submission = found.pop()
        if submission in owner:
            fail(f"{path}, lines {owner[submission]} and {number} are both {submission}: "
                 "keep one row a student")
        owner[submission] = number
        for column, question in mapped.items():
            out[question.key][submission] = row_points(
                f"{path}, line {number} ({submission}), column {column!r}", values[column],
                question)
    unmatched = [name for name in submissions if name not in owner]
    if unmatched:
        fail(f"{path} has no student for the submission {unmatched[0]}"
             + (f" (and {len(unmatched) - 1} more)" if len(unmatched) > 1 else "")
             + ": name each submission by its student's email or SID, in --students FILE "
               "(columns submission, email, sid) where the folder's name is neither")
    return out, left_out


def row_points(where: str, text: str, question: Question) -> float | None:
    """A cell's points (None: blank), within the question's; else one line and exit."""
    try:
        value = decimal_points(text) if text else None
    except ValueError:
        value = -1
    if value is not None and not 0 <= value <= question.points:
        fail(f"{where}: points {text!r}, not from 0 to {shown(question.points)}: fix it on "
             "Gradescope and download the grades again")
    return value


def merge_written(folder: Path, questions: list[Question], export: dict,
                  submissions: list[str]) -> tuple[int, int]:
    """Write the export's points into folder/<question>.csv (blank on Gradescope: the file's
    points stay; comments stay). Returns (files written, points that changed)."""
    folder.mkdir(parents=True, exist_ok=True)
    files = changed = 0
    for question in questions:
        if question.key not in export:
            continue
        path = folder / f"{question.key}.csv"
        rows = []
        if path.exists():
            rows = read_csv(path, ["submission", "points"],
                            "one row per submission (delete the file to start it again)")
        by_name = {row["submission"]: row for row in rows}
        for name in submissions:
            if name not in by_name:
                by_name[name] = {"submission": name, "points": "", "comment": ""}
                rows.append(by_name[name])
        for name, value in export[question.key].items():
            if value is None:
                continue
            row = by_name[name]
            old = (row.get("points") or "").strip()
            new = shown(value)
            changed += bool(old) and old != new
            row["points"] = new
        write_rows(path, WRITTEN_COLUMNS, [{c: row.get(c) or "" for c in WRITTEN_COLUMNS}
                                           for row in rows])
        files += 1
    return files, changed


@script
def main(argv=None) -> int:
    parser = ArgumentParser(__doc__)
    parser.add_argument("csv", type=Path, help="the CSV of python -m course.grading.grade --csv")
    parser.add_argument("--written", type=Path, required=True,
                        help="the folder of the written points, one problemN_qK.csv a question")
    parser.add_argument("--template", action="store_true",
                        help="write the missing written files (points blank) and stop")
    parser.add_argument("--results", type=Path, default=None,
                        help=f"the folder holding <submission>/results.json (default: "
                             f"{GRADED_FOLDER}/ beside the CSV)")
    parser.add_argument("--out", type=Path, default=None,
                        help=f"the sheet (default: {SHEET_NAME} beside the CSV)")
    parser.add_argument("--gradescope", type=Path, default=None, metavar="EXPORT",
                        help="Gradescope's CSV of the written assignment's grades: its points "
                             "merged into the written files first")
    parser.add_argument("--students", type=Path, default=None, metavar="FILE",
                        help="with --gradescope: a CSV of columns submission and email or "
                             "sid, for submissions not named by email or SID")
    args = parser.parse_args(argv)
    if args.students and not args.gradescope:
        fail("--students goes with --gradescope EXPORT")
    if args.template and args.gradescope:
        fail("--template and --gradescope: --gradescope writes the files itself")
    if args.written.exists() and not args.written.is_dir():
        fail(f"--written {args.written} is a file: give the folder of the written points")
    questions = written_questions()
    auto = autograded(args.csv, args.results or args.csv.parent / GRADED_FOLDER)
    if args.template:
        count = write_templates(args.written, questions, list(auto))
        print(f"wrote {count} of the {len(questions)} written files in {args.written} "
              f"({len(questions) - count} were there): one row per submission, fill in points")
        return 0
    if args.gradescope:
        export, left_out = gradescope_points(args.gradescope, questions, list(auto),
                                             student_aliases(args.students))
        files, changed = merge_written(args.written, questions, export, list(auto))
        print(f"read {args.gradescope}: {len(auto)} students' points of {files} questions "
              f"into {args.written}" + (f", {changed} points changed" if changed else "")
              + (f"; {left_out} roster rows without a submission left out" if left_out
                 else ""))
    if not args.written.is_dir():
        fail(f"--written {args.written}: no such folder: write its files with --template")
    written = written_points(args.written, questions, list(auto))
    columns, rows = sheet_rows(auto, written, questions)
    out = args.out or args.csv.parent / SHEET_NAME
    write_rows(out, columns, rows)
    incomplete = sum(1 for row in rows if row["missing"])
    print(f"wrote {out}: {len(rows)} submissions, out of {rows[0]['max']}"
          + (f"; {incomplete} with written questions missing" if incomplete else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
