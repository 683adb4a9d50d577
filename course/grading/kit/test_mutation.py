"""Mutation testing's record (course/grading/mutation.json, written by `make mutation`) leaves no
survivor unexplained: every mutant of the reference's solution regions that passed its
part's graded tests is recorded in course/grading/equivalent_mutants.json with a one-line
reason (the same behaviour the contract allows). Nothing here runs a mutant; the record is
checked against the reference's current mutants, so a changed region asks for a new run."""

import json

import pytest

from course.tools.mutation import EQUIVALENT_FILE, RESULTS_FILE, equivalents

pytestmark = pytest.mark.kit

RESULTS = json.loads(RESULTS_FILE.read_text())["mutants"]
EQUIVALENT = equivalents()


def test_every_survivor_is_recorded_as_equivalent_with_a_reason():
    survivors = sorted(i for i, r in RESULTS.items() if r["outcome"] == "survived")
    unexplained = [i for i in survivors if not EQUIVALENT.get(i, "").strip()]
    assert not unexplained, (
        f"{len(unexplained)} mutants survived their part's graded tests and are not recorded "
        f"as equivalent in {EQUIVALENT_FILE.name}: kill each with a public test, or record why "
        "it is the same behaviour the contract allows: " + "; ".join(unexplained[:5]))


def test_every_recorded_equivalent_is_a_survivor_of_the_last_run():
    stale = sorted(i for i in EQUIVALENT
                   if i not in RESULTS or RESULTS[i]["outcome"] != "survived")
    assert not stale, f"{EQUIVALENT_FILE.name} records mutants that no longer survive: {stale[:5]}"


def test_the_record_covers_the_reference_as_it_is():
    pytest.importorskip("cosmic_ray")
    from course.tools.mutation import mutants

    current = {m["id"] for m in mutants()}
    missing, extra = sorted(current - set(RESULTS)), sorted(set(RESULTS) - current)
    assert not missing and not extra, (
        f"{RESULTS_FILE.name} is older than the reference's solution regions: "
        f"{len(missing)} mutants never run (e.g. {missing[:2]}), {len(extra)} no longer made "
        "(run make mutation)")
