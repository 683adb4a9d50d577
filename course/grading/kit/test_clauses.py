"""The clause-to-test map (course/grading/clauses.py) covers every solution docstring: every
sentence holds a clause, every behaviour clause names a public test that exists, and every
clause is word for word in its docstring. Nothing here runs a graded test."""

import ast
import difflib
import re

import pytest

from course.grading.clauses import CLAUSES
from course.grading.rubric import REGIONS
from provided.common import REPO_ROOT
from provided.given import definitions

pytestmark = pytest.mark.kit


def normalized(text: str) -> str:
    return " ".join(text.split())


def docstrings() -> dict:
    """{'file::name': the normalized docstring} for each docstring a solution region answers
    to: the function's own, or for a method without one its class's."""
    found = {}
    for file, functions in REGIONS.items():
        defs = definitions(ast.parse((REPO_ROOT / file).read_text()))
        for name in functions:
            own = ast.get_docstring(defs[name])
            if own:
                found[f"{file}::{name}"] = normalized(own)
                continue
            owner = name.rsplit(".", 1)[0]
            if owner in defs and ast.get_docstring(defs[owner]):
                found[f"{file}::{owner}"] = normalized(ast.get_docstring(defs[owner]))
    return found


DOCSTRINGS = docstrings()


def sentences(doc: str) -> list[str]:
    """The docstring's sentences and semicolon-separated clauses."""
    pieces = re.split(r"(?<=\S[.;])\s+(?=[A-Z0-9(\[{'|])", doc)
    return [p.rstrip(".;") for p in pieces if len(p) > 3]


def overlaps(sentence: str, fragment: str) -> bool:
    if fragment in sentence or sentence in fragment:
        return True
    match = difflib.SequenceMatcher(None, sentence, fragment, autojunk=False).find_longest_match()
    return match.size >= min(25, len(sentence))


def test_every_solution_docstring_has_its_clauses():
    missing = sorted(set(DOCSTRINGS) - set(CLAUSES))
    extra = sorted(set(CLAUSES) - set(DOCSTRINGS))
    assert not missing, f"docstrings without a clause map in course/grading/clauses.py: {missing}"
    assert not extra, f"clause maps of no solution docstring: {extra}"


@pytest.mark.parametrize("key", sorted(CLAUSES))
def test_clauses_are_in_their_docstring_and_cover_it(key):
    doc = DOCSTRINGS[key]
    fragments = [normalized(entry[0]) for entry in CLAUSES[key]]
    absent = [f for f in fragments if f not in doc]
    assert not absent, f"{key}: clauses not word for word in the docstring: {absent}"
    uncovered = [s for s in sentences(doc) if not any(overlaps(s, f) for f in fragments)]
    assert not uncovered, (f"{key}: sentences of the docstring that no clause of "
                           f"course/grading/clauses.py covers: {uncovered}")


def defined_tests(file: str) -> set[str]:
    return set(re.findall(r"^def (test_\w+)\(", (REPO_ROOT / file).read_text(), re.M))


@pytest.mark.parametrize("key", sorted(CLAUSES))
def test_every_behaviour_clause_names_public_tests_that_exist(key):
    for entry in CLAUSES[key]:
        clause, tests = entry[0], entry[1]
        if tests is None:
            assert len(entry) == 3 and entry[2].strip(), (
                f"{key}: {clause!r} names no test, so it must say why it states no behaviour")
            continue
        assert tests, f"{key}: {clause!r} states a behaviour and names no public test"
        for test in tests:
            file, name = test.split("::")
            assert file.startswith("tests/test_"), f"{key}: {test} is not a public test"
            assert name in defined_tests(file), (
                f"{key}: {clause!r} names {test}, which is not there")
