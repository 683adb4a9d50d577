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
    """Drop from sys.modules every package and module the process imported from the
    repository's own files but the grading kit's (course/) and a Python environment's kept
    in it (.venv/): a judge or a sandbox then imports its tree's copies of them (the tests,
    the problems, provided/), never the grader's. Decided once per top-level name."""
    kept = [KIT, *{Path(p).resolve() for p in (sys.prefix, sys.base_prefix)}]
    forget = {}
    for name in list(sys.modules):
        top = name.partition(".")[0]
        if top not in forget:
            place = _place(sys.modules.get(top))
            forget[top] = place is not None and place.is_relative_to(REPO_ROOT) and not any(
                place.is_relative_to(k) for k in kept)
        if forget[top]:
            del sys.modules[name]


def _place(module) -> Path | None:
    """Where a module or package lies, resolved; None for a built-in one, or one of torch's
    own kind (torch.ops: "_ops.py")."""
    place = getattr(module, "__file__", None) or next(iter(getattr(module, "__path__", [])),
                                                      None)
    if not isinstance(place, str) or not place.startswith("/"):
        return None
    return Path(place).resolve()
