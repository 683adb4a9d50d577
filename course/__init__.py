"""The course: everything for instructors only (the grader, hidden tests, reference reports,
tools). The handout is the repository without this folder; nothing outside it imports it."""

from pathlib import Path

COURSE_ROOT = Path(__file__).resolve().parent
REPORTS = COURSE_ROOT / "reports"  # the reference reports, problemN.md


def reference_report(problem: str) -> Path:
    """The reference report of problem ('problem1' .. 'problem3')."""
    return REPORTS / f"{problem}.md"
