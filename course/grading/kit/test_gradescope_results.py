"""Gradescope's results.json as a student sees it before publication: no top-level score
(Gradescope sums the entries and, by its specification, hides that total while an entry
is hidden; course/INSTRUCTORS.md, "Gradescope"), and nothing visible that depends on a
hidden entry's outcome; the given code the grader put back named in the visible entries
of its parts."""

import time

import pytest

from course.grading import rubric as RUBRIC
from course.grading import scoring
from course.grading.gradescope import results_json, score_of
from course.grading.trusted import Kit

pytestmark = pytest.mark.kit


def fake_kit() -> Kit:
    """A kit whose every part has three public and two hidden tests (node ids only)."""
    tests = {part: {"visible": [f"tests/test_{part}.py::test_{i}" for i in range(3)],
                    "hidden": [f"course/grading/hidden/test_hidden_{part}.py::test_{i}"
                               for i in range(2)]}
             for part in RUBRIC.PARTS}
    return Kit({}, {}, {}, tests)


def results_entries(earned: bool) -> list[dict]:
    """Each problem's results entries: a visible status worth 0, the scored quantities
    after_published, earned or not."""
    entries = []
    for problem, points in RUBRIC.RESULTS.items():
        entries.append(scoring.status_entry(problem, points, {("run", "q"): {
            "status": "verified", "value": 0.5, "why": "your weights"}}, None))
        entries.append({"name": f"{problem} results: run q", "score": points if earned else 0.0,
                        "max_score": points, "visibility": "after_published",
                        "tags": [f"{problem}-results"],
                        "output": "inside the reference range" if earned else
                        "outside the reference range"})
    return entries


def graded(kit: Kit, hidden_pass: bool, told: dict | None = None) -> dict:
    outcomes = {}
    for nodes in kit.tests.values():
        for node in nodes["visible"]:
            outcomes[node] = (node.endswith("_0"), "AssertionError: a public failure")
        for node in nodes["hidden"]:
            outcomes[node] = (hidden_pass, "AssertionError: a hidden failure")
    entries = [entry for part in RUBRIC.PARTS for which in ("visible", "hidden")
               for entry in scoring.part_entries(kit, part, which, outcomes, "not run",
                                                 (told or {}).get(part, ()))]
    return results_json(entries + results_entries(hidden_pass), time.monotonic(), "a note")


def seen_before_publication(results: dict) -> dict:
    """What Gradescope shows a student before the grades are published: the top level
    (but its total, which it hides while an entry is after_published) and the visible
    entries."""
    return {"top": {k: v for k, v in results.items() if k not in ("tests", "execution_time")},
            "tests": [t for t in results["tests"] if t["visibility"] == "visible"]}


def test_results_json_states_no_total():
    results = graded(fake_kit(), hidden_pass=True)
    assert "score" not in results, "the top-level score overrides Gradescope's own sum"
    assert score_of(results) == pytest.approx(sum(t["score"] for t in results["tests"]))
    assert score_of({"score": 0, "tests": []}) == 0  # run_autograder's results of a failure


def test_hidden_outcomes_change_nothing_a_student_sees_before_publication():
    kit = fake_kit()
    best, worst = graded(kit, hidden_pass=True), graded(kit, hidden_pass=False)
    assert score_of(best) > score_of(worst)
    assert seen_before_publication(best) == seen_before_publication(worst)
    hidden = [t for t in best["tests"] if t["visibility"] != "visible"]
    assert hidden and all(t["visibility"] == "after_published" for t in hidden)
    assert all(t["max_score"] == 0 for t in best["tests"] if t["visibility"] == "visible"
               and t["tags"][0].endswith("-results"))
    visible_total = sum(t["score"] for t in best["tests"] if t["visibility"] == "visible")
    assert f"{visible_total:6.2f}" in best["output"]  # the visible entries' sum, and only it


def test_the_given_code_put_back_is_named_in_its_parts_public_entries():
    kit = fake_kit()
    line = "problem2/positional.py: _omega is given code you changed: the handout's version is used"
    results = graded(kit, hidden_pass=False, told={"p2b": [line], "p2c": [line]})
    for test in results["tests"]:
        named = line in test["output"]
        assert named == (test["tags"][0] in ("p2b", "p2c") and test["visibility"] == "visible")
        if named and test["score"] == 0:  # the failure first, as class_report reads it
            assert test["output"].startswith("AssertionError")
