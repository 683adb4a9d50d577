"""The grading kit (instructors only, like all of course/).

    grade.py      the grader and the Gradescope autograder (python -m course.grading.grade)
    judge.py      the processes that run the graded tests (never submission code)
    sandbox.py    the sandboxes submission code runs in, and their zygote
    recompute.py  the results recomputed from a submission's weights, logs, samples
    bands.py      the reference bands from the seed runs, and the rule that applies them
    handout.py    the student handout (python -m course.grading.handout)
    rubric.py     the points of every part
    mutants.py    the catalogue of planted mistakes (MISTAKES.md)
    hidden/       the hidden graded tests
    kit/          the kit's own tests (pytest course -m kit)
    alternatives/ correct solutions written differently from the reference
"""
