"""The sandbox's syscall policy, for the grader's modules (course/grading/sandbox.py, weights.py).

It lives in provided/limits.py, beside the grader's other limits, so that `python -m
provided.submission --check` (which cannot import the course's folder: the handout has none)
applies the very same policy to the public tests.
"""

from provided.limits import ALLOWED, REFUSED_EXAMPLES, install, policy  # noqa: F401
