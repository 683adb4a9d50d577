"""Where the kit's files lie, relative to the repository root: imported by the grader, the
judges and the course's conftest.py alike, and by the zygote through the judge, so it holds
nothing secret (no rubric, no test, no band)."""

HIDDEN_DIR = "course/grading/hidden"  # the hidden graded tests, test_hidden_{part}.py
