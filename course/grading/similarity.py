"""Similar code between graded submissions, function by function, with copydetect.

    python -m course.grading.similarity scores.csv                  # -> class_report/ beside it
    python -m course.grading.similarity scores.csv --out report/ --threshold 0.8

Instructors only (the handout leaves course/ out). The input is what
`python -m course.grading.grade SUBMISSIONS --csv scores.csv` leaves: the CSV (its graded
rows name the submissions) and each submission's code exactly as graded in
graded_code/<submission>/ beside the CSV (--code names another folder holding
<submission>/problemN/*.py). The output folder (class_report/ beside the CSV, the class
report's, unless --out) gets similarity.md (the rule, the pairs ranked, the functions that
match and their scores), similarity.json (every pair with its matching units, and every
unit's scores for the pairs shown) and similarity.html (the pairs shown: the flagged and the
SHOWN highest-ranked others, each function they share side by side with the common code
highlighted).

What is compared: every graded solution file (course/grading/rubric.py's REGIONS) is parsed
with ast, and its units are each solution function (a function or method that holds a
solution region in the reference, by file and qualified name:
'problem1/attention.py:MultiHeadAttention.forward') and one unit per file for the code the
student added (functions, methods, classes and other top-level statements the handout does
not have: helpers, in file order), plus every module the student added to a problem folder.
A unit is compared with the same unit of every other submission. Given code never counts:
the grader already puts the handout's text back in place of every given function, solution
functions' signatures and docstrings are the handout's, and every fingerprint of the
handout's Python code (problemN/*.py with the regions stripped, provided/, tests/,
generate_datasets.py: the stub of the same function included) is boilerplate, removed from
both sides before any comparison.

How (copydetect, the winnowing of MOSS): each unit's code is tokenized by copydetect's
filter (pygments), which writes every identifier as V (functions F, classes O), every
string as S and drops comments and white space, so renamed variables, reformatting and
comments change nothing; its k-grams of K filtered characters (the noise threshold, K =
NOISE below) are hashed and winnowed, the boilerplate's removed. The guarantee threshold is
K too, so the winnowing window is 1 and every k-gram is kept: copydetect's own default, and
the only window whose fingerprints do not depend on Python's string hash, which copydetect
uses and which changes from process to process (a larger window would give other scores on
every run; units are a function long, so keeping every k-gram costs nothing). A unit's
score in one direction is copydetect's: the share of its fingerprinted (non-boilerplate)
code that lies in k-grams the other side also has.

The decision rule: a unit is *nontrivial* when at least MIN_CHARS of its filtered code
(after the boilerplate is removed) take part in fingerprints, in both submissions; a unit
*matches* when it is nontrivial and both directions' scores are at least the threshold
(--threshold, default THRESHOLD); a pair is *flagged* when at least MIN_UNITS units match
(--min-units). Pairs are ranked flagged first, then by the number of matching units, then by
the pair's score: the filtered code in common over all nontrivial units, as a share of each
side's, the smaller of the two. Why these defaults, as measured by the kit test
(course/grading/kit/test_similarity.py: a class of the reference, a copy of it with renamed
variables and reordered functions, the handout filled with course/grading/alternatives, and
the empty handout): the copy matches all 38 nontrivial units of the reference at 1.00 both
ways; the reference and the alternatives, written independently, match none, their closest
unit being MultiHeadAttention.forward at 0.38 / 0.65 (pair score 0.13; with K = 15 one unit
reaches 0.54 both ways, with K = 25 none reaches 0.40). So THRESHOLD = 0.8 sits well above
what independent correct code reaches and well below a copy; MIN_UNITS = 4 flags a copy of a
single problem (a dozen or so nontrivial units) but not two or three short functions that
happen to be written alike; MIN_CHARS = 60 leaves out one-liners such as causal_mask or
__len__, which independent solutions share. The empty handout has no nontrivial unit at all.
A real class is bigger than this one: read the highest-ranked unflagged pairs too.

A flag is a pair to read side by side, not proof of copying: short common functions look
alike, and code copied and then rewritten by hand or by a model may not be flagged.

Bad input: a missing or malformed CSV, no graded submission or a missing code folder is one
line (error:, exit 2); a graded submission without code, or a file that does not parse, is a
warning line each and is left out. Every file is written to a temporary file and renamed into
place; the JSON is strict.
"""

import ast
import html
import io
import sys
import textwrap
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path

from course.grading import rubric as RUBRIC
from course.grading.class_report import class_parser, read_scores
from course.grading.handout import SOLUTION_FILE
from course.grading.intake import GRADED_FOLDER
from provided.common import REPO_ROOT, fail, script
from provided.given import definitions, source_lines, strip_solutions
from provided.results import atomic_write_text, write_json

NOISE = 20  # k: filtered characters per fingerprint (copydetect's noise threshold)
THRESHOLD = 0.8  # a unit matches when both directions' scores are at least this
MIN_CHARS = 60  # filtered, non-boilerplate characters that make a unit nontrivial
MIN_UNITS = 4  # matching units that flag a pair
UNITS_SHOWN = 8  # matching units named per flagged pair on the page
SHOWN = 10  # pairs in the HTML view besides the flagged ones, and unflagged rows of the page
NAMES = ("similarity.md", "similarity.json", "similarity.html")
ADDED = "(added code)"


def warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr, flush=True)


def copydetect_parts():
    try:
        from copydetect.detector import CodeFingerprint, compare_files
        from copydetect.utils import highlight_overlap
    except ImportError:
        fail("copydetect is not installed: pip install -r course/requirements.txt")
    return CodeFingerprint, compare_files, highlight_overlap


# ------------------------------------------------------------------------------ units
def segment(lines: list[str], node: ast.AST) -> str:
    first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
    return textwrap.dedent("".join(lines[first - 1:node.end_lineno]))


def units_of(name: str, source: str, handout: str) -> dict[str, str]:
    """{unit: its code} of one graded solution file: each solution function it defines
    ('problem1/attention.py:MultiHeadAttention.forward'), and the code it adds to the
    handout's ('problem1/attention.py:(added code)', in file order)."""
    tree = ast.parse(source)
    lines = source_lines(source)
    defs = definitions(tree)
    given_tree = ast.parse(handout)
    given = definitions(given_tree)
    units = {f"{name}:{f}": segment(lines, defs[f]) for f in RUBRIC.REGIONS[name]
             if f in defs and not isinstance(defs[f], ast.ClassDef)}
    given_statements = {ast.dump(node) for node in given_tree.body}
    added = []
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)) or ast.dump(node) in given_statements:
            continue
        if isinstance(node, ast.ClassDef) and node.name in given:
            added += [segment(lines, child) for child in node.body
                      if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef,
                                            ast.ClassDef))
                      and f"{node.name}.{child.name}" not in given]
        elif not (isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                  and node.name in given):
            added.append(segment(lines, node))
    if added:
        units[f"{name}:{ADDED}"] = "\n".join(added)
    return units


def handout_sources() -> dict[str, str]:
    """{path: source} of the handout's solution files, regions stripped."""
    return {name: strip_solutions((REPO_ROOT / name).read_text(), name) for name in RUBRIC.REGIONS}


def boilerplate_code() -> list[str]:
    """The handout's Python code: every fingerprint in it is boilerplate."""
    paths = sorted({*REPO_ROOT.glob("problem*/*.py"), *REPO_ROOT.glob("provided/**/*.py"),
                    *REPO_ROOT.glob("tests/**/*.py"), REPO_ROOT / "generate_datasets.py"})
    code = []
    for path in paths:
        if path.is_file():
            name = path.relative_to(REPO_ROOT).as_posix()
            text = path.read_text()
            code.append(strip_solutions(text, name) if SOLUTION_FILE.match(name) else text)
    return code


def submission_units(folder: Path, handout: dict) -> dict[str, str]:
    """{unit: code} of one submission's graded code (warning about a file that does not
    parse)."""
    units = {}
    for name, given in handout.items():
        path = folder / name
        if not path.is_file():
            continue
        try:
            units.update(units_of(name, path.read_text(), given))
        except (OSError, UnicodeDecodeError, SyntaxError, ValueError, RecursionError) as err:
            warn(f"{path} left out ({type(err).__name__}: {str(err)[:80]})")
    for path in sorted(folder.glob("problem*/*.py")):
        name = path.relative_to(folder).as_posix()
        if name not in handout:
            try:
                units[f"{name}:(added module)"] = path.read_text()
            except (OSError, UnicodeDecodeError) as err:
                warn(f"{path} left out ({type(err).__name__})")
    return units


# ------------------------------------------------------------------------- comparison
@dataclass(eq=False)  # pairs compare by identity
class Pair:
    a: str
    b: str
    units: list  # [unit, score a->b, score b->a, chars a, chars b, matches] nontrivial only
    common: float  # the pair's score

    @property
    def matching(self) -> list:
        return [u for u in self.units if u[5]]


class Fingerprints:
    """copydetect's fingerprints of every unit, with the handout's as boilerplate."""

    def __init__(self, noise: int):
        import numpy as np

        self.CodeFingerprint, self.compare_files, self.highlight = copydetect_parts()
        self.noise = noise
        hashes = [self.fingerprint(code, None).hashes for code in boilerplate_code()]
        self.boilerplate = np.unique(np.array([h for found in hashes for h in found],
                                              dtype=np.int64))

    def fingerprint(self, code: str, boilerplate):
        return self.CodeFingerprint("unit.py", self.noise, 1, boilerplate=boilerplate,
                                    fp=io.StringIO(code))

    def of(self, code: str):
        return self.fingerprint(code, self.boilerplate)


def compare(name_a: str, prints_a: dict, name_b: str, prints_b: dict, fingerprints,
            threshold: float, min_chars: int) -> Pair:
    rows, overlap_a, overlap_b, size_a, size_b = [], 0.0, 0.0, 0.0, 0.0
    for unit in sorted(set(prints_a) & set(prints_b)):
        fa, fb = prints_a[unit], prints_b[unit]
        if min(fa.token_coverage, fb.token_coverage) < min_chars:
            continue
        _, (sa, sb), _ = fingerprints.compare_files(fa, fb)
        sa, sb = float(sa), float(sb)
        rows.append([unit, round(sa, 4), round(sb, 4), int(fa.token_coverage),
                     int(fb.token_coverage), min(sa, sb) >= threshold])
        overlap_a += sa * fa.token_coverage
        overlap_b += sb * fb.token_coverage
        size_a += fa.token_coverage
        size_b += fb.token_coverage
    common = min(overlap_a / size_a, overlap_b / size_b) if rows else 0.0
    return Pair(name_a, name_b, rows, round(common, 4))


def rank(pairs: list[Pair], min_units: int) -> list[Pair]:
    return sorted(pairs, key=lambda p: (len(p.matching) < min_units, -len(p.matching),
                                        -p.common, p.a, p.b))


# ----------------------------------------------------------------------------- output
def rule_text(threshold: float, min_units: int, noise: int, min_chars: int) -> str:
    return (f"a pair is flagged when at least {min_units} units (solution functions, or a "
            f"file's added code) of at least {min_chars} filtered characters each, outside "
            f"the handout's code, score at least {threshold:g} in both directions "
            f"(copydetect, k = {noise}, window 1)")


def page(csv_path: Path, names: list[str], left_out: dict, ranked: list[Pair], rule: str,
         min_units: int) -> str:
    flagged = [p for p in ranked if len(p.matching) >= min_units]
    lines = [f"# Similar code: {csv_path.name}", "",
             f"Written by `python -m course.grading.similarity {csv_path}` (instructors only). "
             f"Rule: {rule}. A flag is a pair to read side by side (similarity.html), not "
             "proof of copying: short functions that everyone writes the same way look "
             "alike, and code copied and then rewritten by hand or by a model may not be "
             "flagged. Given code never counts.", "",
             f"- {len(names)} submissions compared, {len(ranked)} pairs, "
             f"{len(flagged)} flagged."]
    for name, why in left_out.items():
        lines.append(f"  - left out: {name} ({why})")
    lines += ["", "## Flagged pairs", ""]
    if flagged:
        lines += ["| pair | matching units | pair score | matching units (score a→b / b→a) |",
                  "|---|---:|---:|---|"]
        for pair in flagged:
            best = sorted(pair.matching, key=lambda u: (-min(u[1], u[2]), u[0]))
            shown = "; ".join(f"`{u[0]}` {u[1]:.2f}/{u[2]:.2f}" for u in best[:UNITS_SHOWN])
            if len(best) > UNITS_SHOWN:
                shown += f"; and {len(best) - UNITS_SHOWN} more (similarity.json)"
            lines.append(f"| {pair.a} – {pair.b} | {len(pair.matching)} of {len(pair.units)} "
                         f"| {pair.common:.2f} | {shown} |")
    else:
        lines.append("No pair is flagged.")
    others = [p for p in ranked if len(p.matching) < min_units][:SHOWN]
    lines += ["", f"## The highest-ranked pairs not flagged (at most {SHOWN})", ""]
    if others:
        lines += ["| pair | matching units | pair score | best unit (score a→b / b→a) |",
                  "|---|---:|---:|---|"]
        for pair in others:
            best = max(pair.units, key=lambda u: min(u[1], u[2]), default=None)
            cell = f"`{best[0]}` {best[1]:.2f}/{best[2]:.2f}" if best else "none nontrivial"
            lines.append(f"| {pair.a} – {pair.b} | {len(pair.matching)} of {len(pair.units)} "
                         f"| {pair.common:.2f} | {cell} |")
    else:
        lines.append("None.")
    return "\n".join(lines) + "\n"


HTML_STYLE = """body{font-family:sans-serif;margin:1em}
table.side{width:100%;table-layout:fixed;border-collapse:collapse}
table.side td{vertical-align:top;border:1px solid #ccc;width:50%}
pre{white-space:pre-wrap;font-size:12px;margin:0}
.hl{background:#fdd}"""


def html_view(shown: list[Pair], prints: dict, fingerprints, rule: str) -> str:
    out = ["<!DOCTYPE html>", "<html><head><meta charset='utf-8'><title>Similar code</title>",
           f"<style>{HTML_STYLE}</style></head><body>", "<h1>Similar code</h1>",
           f"<p>Rule: {html.escape(rule)}. Highlighted: code in fingerprints both sides "
           "share (the handout's code excluded).</p><ul>"]
    for number, pair in enumerate(shown):
        out.append(f"<li><a href='#pair{number}'>{html.escape(pair.a)} – "
                   f"{html.escape(pair.b)}</a>: {len(pair.matching)} matching units, score "
                   f"{pair.common:.2f}</li>")
    out.append("</ul>")
    for number, pair in enumerate(shown):
        out.append(f"<h2 id='pair{number}'>{html.escape(pair.a)} – {html.escape(pair.b)}</h2>")
        for unit, sa, sb, _, _, matches in sorted(pair.units, key=lambda u: -min(u[1], u[2])):
            if min(sa, sb) <= 0:
                continue
            fa, fb = prints[pair.a][unit], prints[pair.b][unit]
            _, _, (slices_a, slices_b) = fingerprints.compare_files(fa, fb)
            left, _ = fingerprints.highlight(fa.raw_code, slices_a, "<span class='hl'>",
                                             "</span>", escape_html=True)
            right, _ = fingerprints.highlight(fb.raw_code, slices_b, "<span class='hl'>",
                                              "</span>", escape_html=True)
            out.append(f"<h3>{html.escape(unit)}: {sa:.2f} / {sb:.2f}"
                       f"{' (matches)' if matches else ''}</h3><table class='side'><tr>"
                       f"<td><pre>{left}</pre></td><td><pre>{right}</pre></td></tr></table>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"


# ------------------------------------------------------------------------------- main
def parse_args(argv=None):
    parser = class_parser(__doc__, "code", "problemN/*.py as graded")
    parser.add_argument("--threshold", type=float, default=THRESHOLD,
                        help=f"a unit matches at this score in both directions (default "
                             f"{THRESHOLD})")
    parser.add_argument("--min-units", type=int, default=MIN_UNITS,
                        help=f"matching units that flag a pair (default {MIN_UNITS})")
    args = parser.parse_args(argv)
    if not 0 < args.threshold <= 1:
        fail(f"--threshold {args.threshold}: give a score in (0, 1]")
    if args.min_units < 1:
        fail(f"--min-units {args.min_units}: give at least 1")
    return args


def run(args) -> dict:
    """Compare every pair; write the three files; return the JSON written."""
    _, rows = read_scores(args.csv)
    out_dir = args.out or args.csv.parent / "class_report"
    if out_dir.exists() and not out_dir.is_dir():
        fail(f"--out {out_dir} is a file: give a folder for the report")
    code_dir = args.code or args.csv.parent / GRADED_FOLDER
    if not code_dir.is_dir():
        fail(f"{code_dir}: no such folder: give --code the folder holding "
             "<submission>/problemN/*.py (grade.py --csv keeps it beside the CSV)")
    handout = handout_sources()
    left_out, units = {}, {}
    for row in rows:
        folder = code_dir / row.submission
        if not row.graded:
            left_out[row.submission] = row.note
        elif not folder.is_dir():
            left_out[row.submission] = f"no code in {folder}"
            warn(f"{folder}: no such folder: {row.submission} is left out")
        else:
            units[row.submission] = submission_units(folder, handout)
    if not units:
        fail(f"{args.csv}: no graded submission has code in {code_dir}: grade the class "
             "first (python -m course.grading.grade SUBMISSIONS --csv ...)")
    fingerprints = Fingerprints(NOISE)
    prints = {name: {unit: fingerprints.of(code) for unit, code in found.items()}
              for name, found in units.items()}
    names = sorted(units)
    pairs = [compare(a, prints[a], b, prints[b], fingerprints, args.threshold, MIN_CHARS)
             for a, b in combinations(names, 2)]
    ranked = rank(pairs, args.min_units)
    rule = rule_text(args.threshold, args.min_units, NOISE, MIN_CHARS)
    flagged = [p for p in ranked if len(p.matching) >= args.min_units]
    shown = flagged + [p for p in ranked if p not in flagged][:SHOWN]
    def unit_entry(u: list) -> dict:
        return {"unit": u[0], "a_to_b": u[1], "b_to_a": u[2], "chars_a": u[3],
                "chars_b": u[4], "matches": u[5]}

    result = {
        "rule": rule,
        "settings": {"noise": NOISE, "window": 1, "threshold": args.threshold,
                     "min_chars": MIN_CHARS, "min_units": args.min_units},
        "submissions": names,
        "left_out": left_out,
        "pairs": [{"a": p.a, "b": p.b, "flagged": p in flagged, "matching": len(p.matching),
                   "nontrivial": len(p.units), "score": p.common, "shown": p in shown,
                   "units": [unit_entry(u) for u in (p.units if p in shown else p.matching)]}
                  for p in ranked],
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    write_json(out_dir / NAMES[1], result)
    atomic_write_text(out_dir / NAMES[2], html_view(shown, prints, fingerprints, rule))
    atomic_write_text(out_dir / NAMES[0], page(args.csv, names, left_out, ranked, rule,
                                               args.min_units))
    print(f"wrote {out_dir / NAMES[0]}, {NAMES[1]} and {NAMES[2]}: {len(names)} submissions, "
          f"{len(pairs)} pairs, {len(flagged)} flagged")
    return result


@script
def main(argv=None) -> int:
    run(parse_args(argv))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
