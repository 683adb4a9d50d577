"""A class report for the next lecture: scores per part and the most common mistakes.

    python -m course.grading.class_report scores.csv                    # -> class_report/ beside it
    python -m course.grading.class_report scores.csv --out report/ --catalogue mistakes.json

Instructors only (the handout leaves course/grading/ out; hidden tests are named on the page). The
input is what `python -m course.grading.grade SUBMISSIONS --csv scores.csv` leaves: the CSV (one
row per submission: score, max_score, one column per part, results, note) and, per
submission, its Gradescope results.json at graded_code/<submission>/results.json beside the
CSV (--results names another folder holding <submission>/results.json). The output folder
gets class_report.md, figures/scores_per_part.png (the score distribution of every part,
the results and the total) and, unless --catalogue names another file, mistakes.json.

The mistake catalogue is course/grading/mutants.py's: for every planted mistake, the graded tests
(public and hidden) that fail when it alone is planted in the reference, as
`python -m course.grading.mutants --json FILE` writes them. Without the file, the report builds it
once (course.grading.mutants.run over the mistakes of the graded parts: about 6 s a mistake
on 2 cores, 10 minutes for the whole catalogue) and keeps it; delete it after changing a
test so that it is built again.

Attribution: a submission's failing tests of one part are compared with each catalogued
mistake of that part, and so is HOW they fail: each failing test's failure kind
(failure_kind: the exception's type and its message with the numbers taken out, read from
the first line of the test's output in results.json, which is the failing exception's own
line) against the kind the catalogue recorded for that test when the mistake alone was
planted. A mistake is matched when every test that catches it fails in the submission, and
fails the same way (its catching tests are a subset of the failing ones, and each kind is
the catalogue's). Of the matched mistakes only the most specific are kept (one whose
catching tests are a strict subset of another matched one's is dropped), and mistakes that
the tests cannot tell apart (the same catching tests) share one row ("a or b"). A
submission counts once in each kept row. Failing tests that no kept mistake explains are
listed under their part: those that fail on an exception, not on the test's own verdict
(an AssertionError or pytest.fail), as the exception (its type and message without
numbers, one short line, e.g. "NameError: name 'NEG_INF' is not defined": a constant the
grader left out is not a flipped mask), each with the number of submissions raising it;
the others as "other", each with the number of submissions failing it and the catalogued
mistakes it catches (a hint where a submission matches a mistake only in part, or fails
differently). A part whose every test fails is one row,
"every test fails", with the grader's reason (not implemented, file missing, does not
compile, not run), and is not attributed to mistakes (a part whose every test fails
on assertions or on another exception is attributed as any other). A test stopped over its
own time limit (slow code, an endless loop) that no kept mistake explains is counted in a row
of its own, not as "other". Tests the grader did not reach (the grading time limit) are not
failures of the student: they are left out and counted.
The results entries (recomputed metrics) have no catalogued mistakes: under their problem
they are grouped by the reason their points were lost (results_reason: "no weights" where a
model_*.pth is missing, "no metrics.json", "outside the reference range", "not graded:
--code-only", or the recomputation's own reason with the run's file name made generic), each
row with the number of submissions and of graded quantities it covers. The page names tests
and exceptions, never an assertion's message or a test's output, so no reference value is
shown. A catalogue written before the failure kinds were recorded (an entry without "kinds")
is refused with one line: delete it to have it built again.

Bad input: a missing or malformed CSV or catalogue is one line (error:, exit 2). A row not
graded, a missing results.json or one that is not Gradescope's JSON is one warning line
each (naming the file and what to do); the page is still written and says what it left
out. Every file is written to a temporary file and renamed into place; the JSON is strict.
"""

import csv
import json
import math
import re
import statistics
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

from course.grading import rubric as RUBRIC
from course.grading.failures import TIME_LIMITS, failure_kind, is_error
from course.grading.intake import GRADED_FOLDER
from provided.common import ArgumentParser, fail, script
from provided.results import atomic_write_text, write_json

REPORT_NAME = "class_report.md"
FIGURE_NAME = "scores_per_part"
NOT_RUN = ("not graded",)  # how course.grading.grade's TOO_LATE and STOPPED begin: never ran
TOP = 10  # rows of the page's "most common mistakes"
TESTS_SHOWN = 4  # catching tests named per row
NAMES_SHOWN = 10  # submissions named per reason
ERROR_CHARS = 100  # an exception's line on the page


def warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------ inputs
@dataclass
class Row:
    submission: str
    note: str
    scores: dict  # column -> float (parts, "results", "score", "max_score")

    @property
    def graded(self) -> bool:
        return not self.note.startswith("not graded")


def read_scores(path: Path) -> tuple[list[str], list[Row]]:
    """(the part columns of the CSV, in the rubric's order, its rows)."""
    if not path.is_file():
        fail(f"{path}: no such file: grade the class first "
             f"(python -m course.grading.grade SUBMISSIONS --csv {path})")
    try:
        with open(path, newline="") as f:
            reader = csv.DictReader(f)
            columns = reader.fieldnames or []
            records = list(reader)
    except (OSError, UnicodeDecodeError, csv.Error) as err:
        fail(f"{path} cannot be read as a CSV ({type(err).__name__}: {err}): give the CSV that "
             "python -m course.grading.grade --csv wrote")
    missing = [c for c in ("submission", "score", "max_score", "note") if c not in columns]
    if missing:
        fail(f"{path} is not a grading CSV (no column {', '.join(missing)}): give the CSV that "
             "python -m course.grading.grade --csv wrote")
    parts = [p for p in RUBRIC.PARTS if p in columns]
    numeric = ["score", "max_score", *parts] + (["results"] if "results" in columns else [])
    rows = []
    for number, record in enumerate(records, start=2):
        name, note = record.get("submission") or "", record.get("note") or ""
        row = Row(name, note, {})
        if not name:
            fail(f"{path}, line {number}: no submission name: give the CSV that "
                 "python -m course.grading.grade --csv wrote")
        if row.graded:
            for column in numeric:
                text = record.get(column) or ""
                try:
                    value = float(text)
                except ValueError:
                    value = math.nan
                if not math.isfinite(value):
                    fail(f"{path}, line {number} ({name}): {column} {text!r} is not a number: "
                         "grade the class again (python -m course.grading.grade ... --csv)")
                row.scores[column] = value
        rows.append(row)
    if not rows:
        fail(f"{path} has no submissions: grade a folder of submissions into it first")
    return parts, rows


def read_results(path: Path) -> list[dict] | str:
    """The tests of a Gradescope results.json, or why it cannot be used (one line)."""
    if not path.is_file():
        return "missing"
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as err:
        return f"not JSON ({type(err).__name__}: {str(err)[:80]})"
    tests = data.get("tests") if isinstance(data, dict) else None
    if not isinstance(tests, list) or not all(
            isinstance(t, dict) and isinstance(t.get("name"), str)
            and isinstance(t.get("tags"), list) and t["tags"]
            and all(isinstance(t.get(k), (int, float)) for k in ("score", "max_score"))
            for t in tests):
        return "not Gradescope's format (a tests list with name, score, max_score, tags)"
    return tests


def read_catalogue(path: Path, parts: list[str]) -> dict:
    """{mistake name: {test name that catches it: its failure kind}} for the mistakes of
    parts, from path (course.grading.mutants --json format), built first if path does not
    exist."""
    from course.grading.mutants import MUTANTS

    wanted = [m for m in MUTANTS if m.part in parts]
    if not path.exists():
        build_catalogue(path, wanted)
    try:
        data = json.loads(path.read_text())
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        tests = {name: [*entry["public"], *entry["hidden"]] for name, entry in data.items()}
        if not all(isinstance(t, str) for found in tests.values() for t in found):
            raise ValueError("a test name that is not a string")
    except (OSError, UnicodeDecodeError, ValueError, TypeError, KeyError) as err:
        fail(f"{path} is not a mistake catalogue ({type(err).__name__}: {str(err)[:80]}): "
             "delete it to have it built again, or write one with "
             f"python -m course.grading.mutants --json {path}")
    old = [name for name, entry in data.items() if not isinstance(entry.get("kinds"), dict)
           or not all(isinstance(entry["kinds"].get(t), str) for t in tests[name])]
    if old:
        fail(f"{path} is a mistake catalogue of an older format (no failure kind for the "
             f"tests of {old[0]}): delete it to have it built again, or write one with "
             f"python -m course.grading.mutants --json {path}")
    return {m.name: {t: data[m.name]["kinds"][t] for t in tests[m.name]}
            for m in wanted if m.name in data}


def build_catalogue(path: Path, mutants: list) -> None:
    """Plant each mistake alone and grade its part (course.grading.mutants.run); keep which tests
    fail, without their outputs."""
    from course.grading import mutants as mutants_module
    from provided.common import REPO_ROOT

    usable = []
    for mutant in mutants:
        try:
            mutant.apply((REPO_ROOT / mutant.file).read_text())
            usable.append(mutant)
        except (OSError, ValueError) as err:
            warn(f"{mutant.name} left out of the catalogue ({str(err)[:120]})")
    print(f"building the mistake catalogue {path}: {len(usable)} planted mistakes, each graded "
          "alone (about 6 s each on 2 cores, once)", flush=True)
    start = time.monotonic()
    try:
        found = mutants_module.run(usable)
    except Exception as err:  # the grader could not start here: say how to build it elsewhere
        fail(f"the mistake catalogue {path} could not be built ({type(err).__name__}: "
             f"{str(err)[:120]}): write it with python -m course.grading.mutants --json {path}")
    write_json(path, {name: {"public": f["public"], "hidden": f["hidden"], "kinds": f["kinds"]}
                      for name, f in found.items()})
    seconds = time.monotonic() - start
    print(f"built {path} in {seconds:.0f} s ({seconds / max(len(usable), 1):.1f} s a mistake); "
          "it is kept: the next report reuses it", flush=True)


# ------------------------------------------------------------------------- attribution
@dataclass
class PartTally:
    """What the submissions' failing tests of one part add up to."""
    submissions: set = field(default_factory=set)  # that lost points here
    mistakes: Counter = field(default_factory=Counter)  # tuple of mistake names -> count
    other: Counter = field(default_factory=Counter)  # test name -> count
    errors: Counter = field(default_factory=Counter)  # exception's kind -> count
    error_tests: dict = field(default_factory=dict)  # exception's kind -> set of test names
    every: Counter = field(default_factory=Counter)  # reason -> count (every test fails)
    not_run: set = field(default_factory=set)  # submissions with tests not reached
    slow: set = field(default_factory=set)  # submissions with a test over its time limit
    slow_tests: set = field(default_factory=set)  # those tests
    tests: set = field(default_factory=set)  # every test name seen
    reasons: dict = field(default_factory=dict)  # a results entry's reason -> submissions
    quantities: dict = field(default_factory=dict)  # a results entry's reason -> entry names


def part_of(test: dict) -> str:
    return str(test["tags"][0])


def why_all_fail(outputs: list[str]) -> str:
    """The grader's reason a part's every test failed, as a category (no output shown)."""
    first = outputs[0] if outputs else ""
    if first.startswith(TIME_LIMITS):
        return "over a test's or its group's time limit"
    if first.startswith(NOT_RUN):
        return "not run (grading time limit)"
    if first.startswith("your submission has no"):
        return "file or folder missing"
    if "does not compile" in first:
        return "does not compile"
    if "could not be taken" in first or "cannot be read as Python source" in first:
        return "code could not be taken"
    if "NotImplementedError" in first:
        return "not implemented"
    return "fails"


RESULT_FILE = re.compile(r"\b(model|training_log|samples)_[^\s,;:()]+?\.(pth|json|txt)\b")


def results_reason(output: str) -> str:
    """Why a results entry (a recomputed quantity) earned nothing, as one short category
    shared across runs and submissions: "no weights" (a model_*.pth missing), "no
    metrics.json", "outside the reference range", or the recomputation's reason with the
    run's file named generically and its numbers taken out (a number inside a name, such as
    n1000 or steps_to_95, stays)."""
    first = output.strip().splitlines()[0] if output.strip() else ""
    if "outside the reference range" in first:
        return "outside the reference range"
    why = re.sub(r"^(unverified, no points|unverified|not graded): ", "", first)
    if re.match(r"there is no model_\S+\.pth", why):
        return "no weights (a model_*.pth missing)"
    if re.match(r"your submission has no \S+/metrics\.json", why):
        return "no metrics.json"
    if first.startswith("not graded: --code-only"):
        return "not graded: --code-only"
    why = RESULT_FILE.sub(lambda m: f"{m.group(1)}_*.{m.group(2)}", why)
    why = re.sub(r"(?<![\w.])\d+(\.\d+)?(e-?\d+)?\b", "#", why)  # a run's n1000 stays
    prefix = "not graded: " if first.startswith("not graded") else "unverified: "
    return prefix + why[:ERROR_CHARS]


def attribute(tests: list[dict], catalogue: dict, tally: dict, submission: str) -> None:
    """Add one submission's results to tally ({part: PartTally}), by the rule above."""
    from course.grading.mutants import MUTANTS

    by_part = {}
    for test in tests:
        by_part.setdefault(part_of(test), []).append(test)
    for part, mine in by_part.items():
        entry = tally.setdefault(part, PartTally())
        entry.tests |= {t["name"] for t in mine}
        failing = [t for t in mine if t["score"] < t["max_score"] - 1e-9]
        if not failing:
            continue
        entry.submissions.add(submission)
        if part.endswith("-results"):  # recomputed quantities: grouped by reason
            for test in failing:
                reason = results_reason(str(test.get("output", "")))
                entry.reasons.setdefault(reason, set()).add(submission)
                entry.quantities.setdefault(reason, set()).add(test["name"])
            continue
        reason = why_all_fail([str(t.get("output", "")) for t in failing])
        if part in RUBRIC.PARTS and len(failing) == len(mine) and reason != "fails":
            entry.every[reason] += 1
            continue
        # a test stopped over its own time limit ran: the code's time, not the grader's
        slow = {t["name"] for t in failing if str(t.get("output", "")).startswith(TIME_LIMITS)}
        ran = slow | {t["name"] for t in failing
                      if not str(t.get("output", "")).startswith(NOT_RUN)}
        if len(ran) < len(failing):
            entry.not_run.add(submission)
        kinds = {t["name"]: failure_kind(str(t.get("output", ""))) for t in failing
                 if t["name"] in ran}
        mistakes = [m.name for m in MUTANTS if m.part == part and catalogue.get(m.name)]
        matched = [m for m in mistakes
                   if all(kinds.get(t) == kind for t, kind in catalogue[m].items())]
        kept = [m for m in matched
                if not any(catalogue[m].keys() < catalogue[o].keys() for o in matched)]
        groups = {}
        for name in kept:
            groups.setdefault(frozenset(catalogue[name]), []).append(name)
        for names in groups.values():
            entry.mistakes[tuple(names)] += 1
        explained = set().union(*groups) if groups else set()
        raised = {}
        for name in sorted(ran - explained):
            if name in slow:
                entry.slow.add(submission)
                entry.slow_tests.add(name)
            elif is_error(kinds[name]):
                raised.setdefault(kinds[name], set()).add(name)
            else:
                entry.other[name] += 1
        for kind, names in raised.items():
            entry.errors[kind] += 1
            entry.error_tests.setdefault(kind, set()).update(names)


def maximum_points(parts: list[str], with_results: bool) -> Fraction:
    """The most a submission can score over the CSV's parts (and the results), exactly:
    the rubric's integers, never a sum of the tests' float shares."""
    total = sum(Fraction(RUBRIC.PARTS[p][3]) for p in parts)
    return total + (sum(map(Fraction, RUBRIC.RESULTS.values())) if with_results else 0)


def shown(points) -> str:
    """Points as the page prints them: an integer as it is, anything else to 2 decimals,
    rounded once (half up) from the exact value."""
    exact = Fraction(points).limit_denominator(10**6) if isinstance(points, float) else \
        Fraction(points)
    if exact.denominator == 1:
        return str(exact.numerator)
    hundredths = math.floor(exact * 100 + Fraction(1, 2))
    return f"{hundredths // 100}.{hundredths % 100:02d}"


# ----------------------------------------------------------------------------- figure
def figure(parts: list[str], rows: list[Row], out_dir: Path) -> Path:
    """A histogram of every part's points, the results' and the total's, one panel each."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from provided.plots.style import save_figure

    graded = [r for r in rows if r.graded]
    panels = [(p, f"{p} {RUBRIC.PARTS[p][2]}", RUBRIC.PARTS[p][3]) for p in parts]
    if graded and "results" in graded[0].scores:
        panels.append(("results", "results in the reference bands", sum(RUBRIC.RESULTS.values())))
    with_results = bool(graded) and "results" in graded[0].scores
    panels.append(("score", "total", maximum_points(parts, with_results)))
    columns = 4
    lines = math.ceil(len(panels) / columns)
    fig, axes = plt.subplots(lines, columns, figsize=(3.2 * columns, 2.5 * lines),
                             squeeze=False)
    for ax, (column, title, maximum) in zip(axes.flat, panels):
        values = [r.scores[column] for r in graded]
        top = float(maximum) or 1.0
        ax.hist(values, bins=10, range=(0, top), color="tab:blue", edgecolor="white")
        ax.set_title(title, fontsize=9)
        ax.set_xlim(0, top)
        ax.set_xlabel(f"points (of {shown(maximum)})", fontsize=8)
        ax.set_ylabel("submissions", fontsize=8)
        ax.yaxis.get_major_locator().set_params(integer=True)
    for ax in list(axes.flat)[len(panels):]:
        ax.set_visible(False)
    fig.suptitle(f"Score distribution per part ({len(graded)} graded submissions)")
    fig.tight_layout()
    return save_figure(fig, out_dir / "figures", FIGURE_NAME)


# ---------------------------------------------------------------------------- the page
def short(test: str) -> str:
    """A test's name without its part's prefix: 'problem1 B (p1b): test_x' -> 'test_x'."""
    return test.split(": ", 1)[-1]


def plural(count: int, word: str) -> str:
    return f"{count} {word}" + ("" if count == 1 else "s")


def share(count: int, total: int) -> str:
    return f"{count} ({100 * count / total:.0f} %)" if total else str(count)


def tests_cell(tests: set) -> str:
    names = sorted(tests, key=lambda t: (t.endswith("[hidden]"), t))
    shown = "; ".join(f"`{short(t)}`" for t in names[:TESTS_SHOWN])
    return shown + (f"; and {len(names) - TESTS_SHOWN} more" if len(names) > TESTS_SHOWN else "")


def error_label(kind: str) -> str:
    """An exception's kind as one short line of a table cell (its type and message without
    numbers, never a test's own message)."""
    text = kind.replace("|", "/").replace("`", "'")
    return text if len(text) <= ERROR_CHARS else text[:ERROR_CHARS - 3] + "..."


def mistake_label(names: tuple) -> str:
    from course.grading.mutants import MUTANTS

    described = {m.name: m.mistake for m in MUTANTS}
    return " or ".join(f"{described.get(n, n)} (`{n}`)" for n in names)


def part_title(part: str) -> str:
    if part in RUBRIC.PARTS:
        _, _, title, points = RUBRIC.PARTS[part]
        return f"{part} {title} ({RUBRIC.points_phrase(points)})"
    problem = part.removesuffix("-results")
    return (f"{problem} results in the reference bands "
            f"({RUBRIC.points_phrase(RUBRIC.RESULTS.get(problem, 0))})")


def stats_table(parts: list[str], graded: list[Row]) -> list[str]:
    lines = ["| part | points | mean | median | min | max | full marks | 0 points |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    columns = [(p, f"{p} {RUBRIC.PARTS[p][2]}", RUBRIC.PARTS[p][3]) for p in parts]
    if graded and "results" in graded[0].scores:
        columns.append(("results", "results in the reference bands",
                        sum(RUBRIC.RESULTS.values())))
    columns.append(("score", "**total**",
                    maximum_points(parts, bool(graded) and "results" in graded[0].scores)))
    n = len(graded)
    for column, title, maximum in columns:
        values = [r.scores[column] for r in graded]
        full = sum(1 for v in values if v >= maximum - 1e-3)  # the CSV rounds to 4 decimals
        zero = sum(1 for v in values if v <= 1e-9)
        lines.append(f"| {title} | {shown(maximum)} | {statistics.mean(values):.2f} | "
                     f"{statistics.median(values):.2f} | {min(values):.2f} | {max(values):.2f} | "
                     f"{share(full, n)} | {share(zero, n)} |")
    return lines


def page(csv_path: Path, parts: list[str], rows: list[Row], analysed: list[str],
         left_out: dict, tally: dict, catalogue: dict, catalogue_path: Path,
         figure_path: Path, out_dir: Path) -> str:
    """The class report's markdown: the submissions, the scores, the most common mistakes,
    each part's failing tests and where the catalogue and the results differ."""
    graded = [r for r in rows if r.graded]
    n = len(analysed)
    lines = [f"# Class report: {csv_path.name}", "",
             f"Written by `python -m course.grading.class_report {csv_path}` "
             "(instructors only: hidden "
             "tests are named, never their outputs).", ""]
    lines += submissions_section(csv_path, rows, n, left_out, out_dir)
    lines += ["", "## Scores", "",
              f"![Score distribution per part]({figure_path.relative_to(out_dir).as_posix()})",
              ""]
    lines += stats_table(parts, graded) if graded else ["No graded submission."]
    lines += ["", "## Most common mistakes", ""]
    lines += common_mistakes(tally, catalogue, n)
    lines += ["", "## Failing tests by part", "",
              f"Catalogue: `{catalogue_path}` ({len(catalogue)} mistakes of the graded parts; "
              "see the rule in course/grading/class_report.py). Percentages are of the "
              f"{n} submissions analysed.", ""]
    catches = {}
    for name, tests in catalogue.items():
        for test in tests:
            catches.setdefault(test, []).append(name)
    order = [*RUBRIC.PARTS, *(f"{p}-results" for p in RUBRIC.RESULTS)]
    for part in sorted(tally, key=lambda p: order.index(p) if p in order else len(order)):
        if tally[part].submissions:
            lines += part_section(part, tally[part], catalogue, catches, n)
    lines += catalogue_differs(parts, tally, catalogue, catalogue_path)
    return "\n".join(lines).rstrip() + "\n"


def submissions_section(csv_path: Path, rows: list[Row], n: int, left_out: dict,
                        out_dir: Path) -> list[str]:
    """How many submissions were graded, why the others were not, which were left out of
    the mistakes' counts, and where the similarity page is."""
    graded = [r for r in rows if r.graded]
    not_graded = [r for r in rows if not r.graded]
    lines = ["## Submissions", "",
             f"- {len(rows)} submissions in the CSV: {len(graded)} graded, "
             f"{len(not_graded)} not graded."]
    for reason, count in Counter(r.note.removeprefix("not graded: ") for r in not_graded
                                 ).most_common():
        names = [r.submission for r in not_graded if r.note.removeprefix("not graded: ") == reason]
        shown = ", ".join(names[:NAMES_SHOWN]) + (", ..." if len(names) > NAMES_SHOWN else "")
        lines.append(f"  - {count} not graded: {reason} ({shown})")
    if n:
        lines.append(f"- Mistakes below are counted over the {n} graded submissions whose "
                     "results.json could be read" + (":" if left_out else "."))
    else:
        lines.append("- No results.json could be read, so no mistake is counted below:")
    for why, count in Counter(left_out.values()).most_common():
        names = [name for name, reason in left_out.items() if reason == why]
        shown = ", ".join(names[:NAMES_SHOWN]) + (", ..." if len(names) > NAMES_SHOWN else "")
        lines.append(f"  - left out: {count} whose results.json is {why} ({shown})")
    similar = out_dir / "similarity.md"  # course.grading.similarity's page, if it ran
    lines.append("- Similar code between submissions: " + (
        f"[{similar.name}]({similar.name})" if similar.is_file() else
        f"not compared (python -m course.grading.similarity {csv_path} writes {similar.name})"))
    return lines


def common_mistakes(tally: dict, catalogue: dict, n: int) -> list[str]:
    """The TOP most common catalogued mistakes of the class, as a table."""
    ranked = sorted(((count, part, names) for part, entry in tally.items()
                     for names, count in entry.mistakes.items()),
                    key=lambda item: (-item[0], list(tally).index(item[1]), item[2]))
    if not ranked:
        return ["No failing tests matched a catalogued mistake."]
    lines = ["| part | mistake | submissions | failing tests that point at it |",
             "|---|---|---:|---|"]
    for count, part, names in ranked[:TOP]:
        lines.append(f"| {part} | {mistake_label(names)} | {share(count, n)} | "
                     f"{tests_cell(catalogue[names[0]])} |")
    return lines


def part_section(part: str, entry, catalogue: dict, catches: dict, n: int) -> list[str]:
    """One part's failing tests: its mistakes, exceptions, time limits, reasons and the
    rest (catches: {test: the catalogued mistakes it catches})."""
    lines = [f"### {part_title(part)}: {share(len(entry.submissions), n)} lose points",
             "", "| why no points | submissions | entries |" if part.endswith("-results")
             else "| mistake | submissions | failing tests that point at it |",
             "|---|---:|---|"]
    for names, count in sorted(entry.mistakes.items(), key=lambda i: (-i[1], i[0])):
        lines.append(f"| {mistake_label(names)} | {share(count, n)} | "
                     f"{tests_cell(catalogue[names[0]])} |")
    for kind, count in sorted(entry.errors.items(), key=lambda i: (-i[1], i[0])):
        lines.append(f"| raises `{error_label(kind)}` (an exception, not a catalogued "
                     f"mistake) | {share(count, n)} | {tests_cell(entry.error_tests[kind])} |")
    if entry.slow:
        lines.append(f"| over a test's time limit (slow code or an endless loop, not a "
                     f"catalogued mistake) | {share(len(entry.slow), n)} | "
                     f"{tests_cell(entry.slow_tests)} |")
    for reason, count in entry.every.most_common():
        lines.append(f"| every test fails: {reason} | {share(count, n)} | all "
                     f"{len(entry.tests)} tests |")
    for reason, names in sorted(entry.reasons.items(), key=lambda i: (-len(i[1]), i[0])):
        quantities = len(entry.quantities[reason])
        word = "quantity" if quantities == 1 else "quantities"
        lines.append(f"| {error_label(reason)} | {share(len(names), n)} | "
                     f"{quantities} graded {word} |")
    for test, count in sorted(entry.other.items(), key=lambda i: (-i[1], i[0])):
        hint = catches.get(test, [])
        also = f" (catches {', '.join(f'`{h}`' for h in hint[:3])}" + (
            ", ...)" if len(hint) > 3 else ")") if hint else ""
        lines.append(f"| other | {share(count, n)} | `{short(test)}`{also} |")
    if entry.not_run:
        lines.append(f"| (tests the grader did not run: time limit or grader fault) | "
                     f"{share(len(entry.not_run), n)} | left out above |")
    return lines + [""]


def catalogue_differs(parts: list[str], tally: dict, catalogue: dict,
                      catalogue_path: Path) -> list[str]:
    """Where the catalogue names tests the results do not have, or lacks a mistake of the
    graded parts: what to do about it."""
    from course.grading.mutants import MUTANTS

    stale = {part: sorted(t for m in MUTANTS if m.part == part and m.name in catalogue
                          for t in catalogue[m.name].keys() - entry.tests)
             for part, entry in tally.items() if entry.tests}
    stale = {p: t for p, t in stale.items() if t}
    missing = [m.name for m in MUTANTS if m.part in parts and m.name not in catalogue]
    if not stale and not missing:
        return []
    lines = ["## The catalogue and these results differ", ""]
    for part, tests in stale.items():
        lines.append(f"- {part}: the catalogue names {plural(len(tests), 'test')} that no "
                     "results.json "
                     f"has (e.g. `{short(tests[0])}`): the tests changed since it was "
                     f"built; delete `{catalogue_path}` to build it again.")
    if missing:
        lines.append(f"- {plural(len(missing), 'mistake')} of course/grading/mutants.py "
                     "for the "
                     f"graded parts missing from `{catalogue_path}` (e.g. `{missing[0]}`): "
                     "delete it to build it again.")
    return lines + [""]


# ------------------------------------------------------------------------------- main
def class_parser(doc: str, folder: str, holds: str) -> ArgumentParser:
    """The command line of a tool that reads a --csv grading: the CSV, --out (the report's
    folder) and --<folder>, the folder holding <submission>/<holds>."""
    parser = ArgumentParser(doc)
    parser.add_argument("csv", type=Path, help="the CSV of python -m course.grading.grade --csv")
    parser.add_argument("--out", type=Path, default=None,
                        help="the report's folder (default: class_report/ beside the CSV)")
    parser.add_argument(f"--{folder}", type=Path, default=None,
                        help=f"the folder holding <submission>/{holds} (default: "
                             f"{GRADED_FOLDER}/ beside the CSV)")
    return parser


def parse_args(argv=None):
    parser = class_parser(__doc__, "results", "results.json")
    parser.add_argument("--catalogue", type=Path, default=None,
                        help="the mistake catalogue "
                             "(python -m course.grading.mutants --json FILE); "
                             "built if missing (default: mistakes.json in the report's folder)")
    return parser.parse_args(argv)


@script
def main(argv=None) -> int:
    args = parse_args(argv)
    parts, rows = read_scores(args.csv)
    out_dir = args.out or args.csv.parent / "class_report"
    if out_dir.exists() and not out_dir.is_dir():
        fail(f"--out {out_dir} is a file: give a folder for the report")
    results_dir = args.results or args.csv.parent / GRADED_FOLDER
    catalogue_path = args.catalogue or out_dir / "mistakes.json"
    catalogue = read_catalogue(catalogue_path, parts) if parts else {}
    for row in rows:
        if not row.graded:
            warn(f"{args.csv}: {row.submission} was {row.note}: grade it again alone "
                 f"(python -m course.grading.grade SUBMISSIONS/{row.submission} "
                 "--out results.json)")
    analysed, left_out, loaded = [], {}, {}
    for row in (r for r in rows if r.graded):
        path = results_dir / row.submission / "results.json"
        tests = read_results(path)
        if isinstance(tests, str):
            left_out[row.submission] = tests
            if tests != "missing":
                warn(f"{path} is {tests}: grade {row.submission} again to rewrite it "
                     "(python -m course.grading.grade ... --csv)")
            continue
        analysed.append(row.submission)
        loaded[row.submission] = tests
    missing = [name for name, why in left_out.items() if why == "missing"]
    if missing:
        warn(f"{len(missing)} graded submissions have no results.json in {results_dir} (e.g. "
             f"{results_dir / missing[0] / 'results.json'}): their mistakes are left out; give "
             "--results the folder that holds <submission>/results.json")
    tally = {}
    for name, tests in loaded.items():
        attribute(tests, catalogue, tally, name)
    out_dir.mkdir(parents=True, exist_ok=True)
    figure_path = figure(parts, rows, out_dir)
    report = out_dir / REPORT_NAME
    atomic_write_text(report, page(args.csv, parts, rows, analysed, left_out, tally, catalogue,
                                   catalogue_path, figure_path, out_dir))
    print(f"wrote {report} and {figure_path}: {len(rows)} submissions, {len(analysed)} "
          "analysed")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
