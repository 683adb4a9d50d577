"""The course kit, for instructors only (the handout leaves it out).

    grading/grade.py      the grader and the Gradescope autograder (python -m grading.grade)
    grading/judge.py      the processes that run the graded tests (never submission code)
    grading/sandbox.py    the sandboxes submission code runs in, and their zygote
    grading/recompute.py  the results recomputed from a submission's weights, logs, samples
    grading/handout.py    the student handout (python -m grading.handout)
    grading/rubric.py     the points of every part
    grading/hidden/       the hidden graded tests
    grading/kit/          the kit's own tests (pytest -m kit)
    grading/alternatives/ correct solutions written differently from the reference
"""
