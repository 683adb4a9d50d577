"""The course's tests follow the root conftest.py's rule too: every hidden graded test
(course/grading/hidden/) carries exactly one part marker, p1a .. p3e, and every test of the
kit (course/grading/kit/, the machinery's own tests, not graded) carries the marker `kit`
and no part marker. `pytest course` runs them all; `pytest course -m kit` the kit alone.
"""

from pathlib import Path

import pytest

from course.grading.paths import HIDDEN_DIR
from course.grading.rubric import PARTS

HIDDEN_FOLDER = HIDDEN_DIR + "/"
KIT_FOLDER = "course/grading/kit/"
KIT = "kit"


def pytest_configure(config):
    config.addinivalue_line("markers", "kit: the course machinery's own tests, not graded")


@pytest.hookimpl(tryfirst=True)  # before -m deselects anything: every collected test is checked
def pytest_collection_modifyitems(config, items):
    root = config.rootpath.resolve()
    problems = []
    for item in items:
        path = Path(item.path).resolve()
        if not path.is_relative_to(root):
            continue
        path = path.relative_to(root).as_posix()
        names = {mark.name for mark in item.iter_markers()}
        parts = sorted(names & set(PARTS))
        found = ", ".join(parts + ([KIT] if KIT in names else [])) or "no marker"
        if path.startswith(KIT_FOLDER) and (KIT not in names or parts):
            problems.append(f"{item.nodeid} has {found}; a test under {KIT_FOLDER} must carry "
                            "the marker 'kit' and no part marker")
        elif path.startswith(HIDDEN_FOLDER) and (len(parts) != 1 or KIT in names):
            problems.append(f"{item.nodeid} has {found}; a hidden test must carry exactly one "
                            "part marker, p1a .. p3e")
    if problems:
        raise pytest.UsageError(
            "course tests without their marker (see course/conftest.py):\n  "
            + "\n  ".join(problems))
