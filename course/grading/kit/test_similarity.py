"""course.grading.similarity on a class built by hand (the grader not run: too slow).

graded_code/<name>/problemN/*.py as course.grading.grade --csv lays it out (each file through
provided.given.graded_source, as the intake does), for: the reference; a copy of it
with every solution function's local variables renamed and the top-level functions of every
file in reverse order; the handout filled with course/grading/alternatives (as
`python -m course.grading.handout --fill` does); and the empty handout. Only the copy's pair
with the reference is flagged."""

import ast
import csv
import io
import json
import keyword
import subprocess
import sys
import tokenize

import pytest

from course.grading import rubric as RUBRIC
from course.grading import similarity
from course.grading.handout import splice
from course.grading.intake import GRADED_FOLDER
from provided.common import REPO_ROOT
from provided.given import definitions, graded_source, source_lines, strip_solutions

pytestmark = [pytest.mark.kit, pytest.mark.timeout(120)]

ALTERNATIVES = REPO_ROOT / "course" / "grading" / "alternatives"


def locals_of(node: ast.AST) -> set[str]:
    """The names a function assigns (its locals, loop and comprehension variables)."""
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)
            and isinstance(n.ctx, ast.Store)} - {"self"}


def renamed(source: str, regions) -> str:
    """source with every local variable of its solution functions renamed (v0, v1, ...):
    attributes and keyword arguments keep their names."""
    defs = definitions(ast.parse(source))
    spans = [(defs[f].lineno, defs[f].end_lineno, locals_of(defs[f])) for f in regions
             if f in defs]
    names = sorted({name for _, _, found in spans for name in found})
    new = {name: f"v{i}" for i, name in enumerate(names)}
    tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    edits, depth = [], 0
    for i, tok in enumerate(tokens):
        if tok.type == tokenize.OP and tok.string in "([{":
            depth += 1
        elif tok.type == tokenize.OP and tok.string in ")]}":
            depth -= 1
        if tok.type != tokenize.NAME or keyword.iskeyword(tok.string):
            continue
        row = tok.start[0]
        inside = [found for first, last, found in spans if first <= row <= last]
        if not inside or tok.string not in inside[0]:
            continue
        before = tokens[i - 1].string if i else ""
        after = tokens[i + 1].string if i + 1 < len(tokens) else ""
        if before == "." or (after == "=" and depth > 0):
            continue
        edits.append((row, tok.start[1], tok.end[1], new[tok.string]))
    lines = source_lines(source)
    for row, start, end, name in sorted(edits, reverse=True):
        lines[row - 1] = lines[row - 1][:start] + name + lines[row - 1][end:]
    return "".join(lines)


def reordered(source: str) -> str:
    """source with its top-level functions in reverse order (each with its decorators and
    the lines after it), every other statement in its place."""
    body = ast.parse(source).body
    lines = source_lines(source)
    starts = [min([n.lineno, *(d.lineno for d in getattr(n, "decorator_list", []))])
              for n in body]
    chunks = ["".join(lines[s - 1:e - 1]) for s, e in zip(starts, [*starts[1:],
                                                                   len(lines) + 1])]
    functions = [i for i, n in enumerate(body) if isinstance(n, ast.FunctionDef)]
    moved = dict(zip(functions, reversed([chunks[i] for i in functions])))
    head = "".join(lines[:starts[0] - 1]) if body else source
    text = head + "".join(moved.get(i, chunk) for i, chunk in enumerate(chunks))
    return text.replace("\n\n\n\n", "\n\n\n")


def write_class(root, rows: dict) -> None:
    """root/scores.csv and root/graded_code/<name>/<file>, rows {name: {file: source}}; each
    file graded as the intake grades it."""
    with open(root / "scores.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["submission", "score", "max_score", "note"])
        writer.writeheader()
        for name in rows:
            writer.writerow({"submission": name, "score": 0, "max_score": 108, "note": ""})
    for name, files in rows.items():
        for file, student in files.items():
            reference = (REPO_ROOT / file).read_text()
            handout = strip_solutions(reference, file)
            path = root / GRADED_FOLDER / name / file
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(graded_source(student, handout, list(RUBRIC.REGIONS[file])))


def the_class() -> dict:
    rows = {"reference": {}, "copy": {}, "alternative": {}, "handout": {}}
    for file, regions in RUBRIC.REGIONS.items():
        reference = (REPO_ROOT / file).read_text()
        handout = strip_solutions(reference, file)
        rows["reference"][file] = reference
        rows["copy"][file] = reordered(renamed(reference, regions))
        rows["alternative"][file] = splice(handout, (ALTERNATIVES / file).read_text(), regions)
        rows["handout"][file] = handout
    return rows


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    root = tmp_path_factory.mktemp("class")
    rows = the_class()
    for file in RUBRIC.REGIONS:  # the copy really differs: names and order
        assert rows["copy"][file] != rows["reference"][file], file
        compile(rows["copy"][file], file, "exec")
    write_class(root, rows)
    result = similarity.run(similarity.parse_args([str(root / "scores.csv")]))
    return root, result


def pair(result: dict, a: str, b: str) -> dict:
    return next(p for p in result["pairs"] if {p["a"], p["b"]} == {a, b})


def test_the_copy_is_flagged_and_nothing_else(report):
    root, result = report
    copy = pair(result, "copy", "reference")
    assert copy["flagged"] and copy["matching"] >= 3 * similarity.MIN_UNITS, copy
    assert copy["score"] > 0.9, copy
    flagged = [(p["a"], p["b"]) for p in result["pairs"] if p["flagged"]]
    assert flagged == [("copy", "reference")], flagged
    for honest in ("reference", "copy"):
        alternative = pair(result, honest, "alternative")
        assert alternative["matching"] < similarity.MIN_UNITS, alternative
    for other in ("reference", "copy", "alternative"):
        empty = pair(result, "handout", other)
        assert not empty["flagged"] and empty["nontrivial"] == 0, empty  # given code: nothing
    out = root / "class_report"
    assert json.loads((out / "similarity.json").read_text()) == result
    page = (out / "similarity.md").read_text()
    assert "| copy – reference |" in page and "1 flagged" in page
    view = (out / "similarity.html").read_text()
    assert "MultiHeadAttention.forward" in view and "class='hl'" in view


def test_renamed_variables_are_normalized():
    """copydetect's filter writes every identifier as V: a renamed copy is the same text."""
    from copydetect.utils import filter_code

    source = (REPO_ROOT / "problem1" / "attention.py").read_text()
    copy = renamed(source, list(RUBRIC.REGIONS["problem1/attention.py"]))
    assert copy != source
    assert filter_code(copy, "a.py")[0] == filter_code(source, "a.py")[0]


def test_a_missing_csv_is_one_line(tmp_path):
    done = subprocess.run([sys.executable, "-m", "course.grading.similarity",
                           str(tmp_path / "scores.csv")], capture_output=True, text=True,
                          cwd=REPO_ROOT)
    assert done.returncode == 2, done
    assert done.stderr.startswith("error: ") and done.stderr.count("\n") == 1, done.stderr
    assert done.stdout == ""


def test_no_code_folder_is_one_line(tmp_path, capsys):
    write_class(tmp_path, {"someone": {}})  # the CSV, and no graded_code/ folder
    with pytest.raises(SystemExit) as stop:
        similarity.main([str(tmp_path / "scores.csv")])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and GRADED_FOLDER in err, err
