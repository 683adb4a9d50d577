"""The reports' tables, generated from the committed JSON.

    python -m course.tools.report_tables            rewrite every generated table in the reports
    python -m course.tools.report_tables --check    exit 1, naming each table that differs

Each reference report (course/reports/problemN.md) and the students' README.md hold their
generated tables between two marker lines:

    <!-- table: NAME -->
    ...
    <!-- end table -->

and this script owns the text between them: it renders NAME from problemN/results/
(metrics.json, the training logs, breakdown.json, attention_maps.json, Problem 2's
analysis.json and, when it exists, reference_bands.json from `python -m course.grading.bands`)
and writes it in place, atomically. Seed 0 is the committed run; a column or sentence with
"mean ± sd" or "k of n seeds" appears only when reference_bands.json holds more than one
seed of that run, so after `make seeds`

    python -m course.grading.bands && python -m course.tools.report_tables

refreshes every table and every seed count in the reports. Every number is rounded once, half
up, from its exact value: a logged value from the JSON's decimal text, and an average, range,
difference, ratio or standard deviation computed in exact arithmetic from those decimals
(course/tools/tables/style.py); reference_bands.json is read back exactly, its late validation
averages recomputed from the logs. 4 decimals in Problems 1 and 2, 3 in Problem 3 (the
reports' style).

Instructors only (course/tools/): the reports are not part of the homework.
"""

import re
from pathlib import Path

from course import reference_report
from course.grading.rubric import parts_table, points_table
from course.tools.tables import problem1, problem2, problem3
from course.tools.tables.style import load_bands
from provided.common import REPO_ROOT, ArgumentParser, results_dir, script
from provided.results import atomic_write_text, read_json

MARKER = re.compile(r"^<!-- table: (?P<name>[\w-]+) -->\n(?P<body>.*?)^<!-- end table -->$",
                    re.M | re.S)
MODULES = {"problem1": problem1, "problem2": problem2, "problem3": problem3}
TABLES = {problem: module.TABLES for problem, module in MODULES.items()}


README = "README"  # the students' README: its tables of parts and points, from the rubric
DOCUMENTS = (*TABLES, README)


def report_path(document: str) -> Path:
    """A problem's reference report, or the students' README."""
    if document == README:
        return REPO_ROOT / "README.md"
    return reference_report(document)


def render(problem: str) -> dict:
    """{table name: markdown} of one problem, from its JSON (of the README, from the
    rubric)."""
    if problem == README:
        return {"parts": parts_table(), "points": points_table()}
    metrics = read_json(results_dir(problem) / "metrics.json")
    bands = load_bands(problem, getattr(MODULES[problem], "RECOMPUTE", None))
    return {name: make(metrics, bands) for name, make in TABLES[problem].items()}


def fill(text: str, tables: dict) -> tuple[str, list[str], list[str]]:
    """text with each marked table replaced by its rendering: (new text, names whose text
    changed, problems: names in tables without markers, markers with no table, repeats)."""
    changed, found, problems = [], [], []

    def replace(match: re.Match) -> str:
        name = match["name"]
        found.append(name)
        if name not in tables:
            problems.append(f"table {name}: marked in the report but not generated")
            return match[0]
        body = tables[name].strip("\n") + "\n"
        if body != match["body"]:
            changed.append(name)
        return f"<!-- table: {name} -->\n{body}<!-- end table -->"

    new = MARKER.sub(replace, text)
    problems += [f"table {name}: generated but has no markers in the report"
                 for name in tables if name not in found]
    problems += [f"table {name}: marked {found.count(name)} times"
                 for name in sorted(set(found)) if found.count(name) > 1]
    return new, changed, problems


def differences(problems=None) -> list[str]:
    """One line per table that differs from its JSON (or is missing), over the reports."""
    lines = []
    for problem in problems or DOCUMENTS:
        path = report_path(problem)
        _, changed, faults = fill(path.read_text(), render(problem))
        rel = path.relative_to(REPO_ROOT)
        lines += [f"{rel}: table {name} differs from the JSON" for name in changed]
        lines += [f"{rel}: {fault}" for fault in faults]
    return lines


@script
def main(argv=None) -> int:
    parser = ArgumentParser(__doc__)
    parser.add_argument("problems", nargs="*", metavar="problemN",
                        help=f"any of {', '.join(DOCUMENTS)} (default: all)")
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 and name each table that differs")
    args = parser.parse_args(argv)
    for problem in args.problems:
        if problem not in DOCUMENTS:
            parser.error(f"unknown document {problem!r}: choose from {', '.join(DOCUMENTS)}")
    if args.check:
        lines = differences(args.problems)
        for line in lines:
            print(line)
        if lines:
            print("run `python -m course.tools.report_tables` to regenerate the tables")
            return 1
        print("every generated table matches its JSON")
        return 0
    status = 0
    for problem in args.problems or DOCUMENTS:
        path = report_path(problem)
        text = path.read_text()
        new, changed, faults = fill(text, render(problem))
        for fault in faults:
            print(f"{path.relative_to(REPO_ROOT)}: {fault}")
            status = 1
        if new != text:
            atomic_write_text(path, new)
        print(f"{path.relative_to(REPO_ROOT)}: {len(changed)} table(s) rewritten"
              + (f" ({', '.join(changed)})" if changed else ""))
    return status


if __name__ == "__main__":
    raise SystemExit(main())
