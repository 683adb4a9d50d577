"""Where the kit's files lie, relative to the repository root, and how a process forgets the
repository's own modules: imported by the grader, the judges and the course's conftest.py
alike, and by the zygote through the judge, so it holds nothing secret (no rubric, no test,
no band)."""

import sys
from pathlib import Path

HIDDEN_DIR = "course/grading/hidden"  # the hidden graded tests, test_hidden_{part}.py
REPO_ROOT = Path(__file__).resolve().parents[2]
KIT = REPO_ROOT / "course"


def forget_repository_modules() -> None:
    """Drop from sys.modules every module the process imported from the repository's own
    files but the grading kit's (course/) and a Python environment's kept in it (.venv/): a
    judge or a sandbox then imports its tree's copies of them (the tests, the problems,
    provided/), never the grader's."""
    kept = [KIT, *{Path(p).resolve() for p in (sys.prefix, sys.base_prefix)}]
    for name, module in list(sys.modules.items()):
        place = getattr(module, "__file__", None) or next(iter(getattr(module, "__path__", [])),
                                                          None)
        if not isinstance(place, str) or not place.startswith("/"):
            continue  # built in, or a module of torch's own kind (torch.ops: "_ops.py")
        path = Path(place).resolve()
        if path.is_relative_to(REPO_ROOT) and not any(path.is_relative_to(k) for k in kept):
            del sys.modules[name]
