"""The course kit, for instructors only (the handout leaves it out).

    grading/grade.py      the grader and the Gradescope autograder (python -m grading.grade)
    grading/sandbox.py    the sealed worker processes the grader runs submissions in
    grading/handout.py    the student handout (python -m grading.handout)
    grading/rubric.py     the points of every part
    grading/hidden/       the hidden graded tests
    grading/kit/          the kit's own tests (pytest -m kit)
    grading/alternatives/ correct solutions written differently from the reference
"""
