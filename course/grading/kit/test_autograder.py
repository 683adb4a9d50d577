"""The Gradescope autograder as shipped, in a faithful simulation of Gradescope.

Gradescope unpacks the zip into /autograder/source, runs setup.sh once, then for every
submission puts the student's files in /autograder/submission and runs run_autograder,
which must leave /autograder/results/results.json. Here the root is a temporary folder
(AUTOGRADER_ROOT), and setup.sh's installs are stood in for by this test's environment:
apt-get does nothing, `python3 -m venv` makes an environment that is this one, and pip
checks that the requirements file it is given exists. AUTOGRADER_NO_DATA skips setup.sh's
data (a 51 MB download) and makes run_autograder grade the code alone (--code-only), as
the grader refuses to grade results without its data; the data check itself is
test_grade.py's.
"""

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from course.grading.gradescope import build_autograder, score_of
from course.grading.handout import make_handout, tracked_files
from provided.common import REPO_ROOT

pytestmark = [pytest.mark.kit, pytest.mark.timeout(900),
              pytest.mark.skipif(os.geteuid() != 0, reason="Gradescope runs as root")]

VISIBILITIES = {"hidden", "after_due_date", "after_published", "visible"}
FAKES = {
    "apt-get": "#!/bin/sh\nexit 0\n",
    "pip": '#!/bin/sh\nfor a in "$@"; do case "$prev" in -r) test -f "$a" || exit 1;; esac;'
           ' prev="$a"; done\nexit 0\n',
    # the environment it makes is this one, behind these stand-ins (so that its pip is the
    # stand-in, never this environment's own)
    "python3": '#!/bin/sh\nif [ "$1" = "-m" ] && [ "$2" = "venv" ]; then\n'
               '  mkdir -p "$3/bin"\n'
               '  echo "export PATH=\\"{fakes}:{bin}:\\$PATH\\"" > "$3/bin/activate"\n'
               '  exit 0\nfi\nexec "{python}" "$@"\n',
}


def check_results_format(results: dict) -> None:
    """Gradescope's results.json: an output, and tests with a name, a score, a max_score, a
    visibility and an output; no top-level score (Gradescope sums the tests, and hides the
    sum while an entry is hidden: course/INSTRUCTORS.md, "Gradescope")."""
    assert "score" not in results and results["tests"]
    assert isinstance(results["output"], str)
    assert results.get("stdout_visibility", "hidden") in VISIBILITIES
    for test in results["tests"]:
        assert isinstance(test["name"], str) and isinstance(test["output"], str)
        assert isinstance(test["score"], (int, float))
        assert isinstance(test["max_score"], (int, float))
        assert 0 <= test["score"] <= test["max_score"] + 1e-9
        assert test["visibility"] in VISIBILITIES


@pytest.fixture(scope="module")
def autograder(tmp_path_factory) -> Path:
    """An /autograder-like root with the zip unpacked into source/ and setup.sh run."""
    root = tmp_path_factory.mktemp("autograder")
    zip_path = root.parent / "autograder.zip"
    build_autograder(zip_path)
    with zipfile.ZipFile(zip_path) as archive:
        archive.extractall(root / "source")
    fakes = root.parent / "fakes"
    fakes.mkdir()
    for name, text in FAKES.items():
        (fakes / name).write_text(text.replace("{bin}", str(Path(sys.executable).parent))
                                  .replace("{fakes}", str(fakes))
                                  .replace("{python}", sys.executable))
        (fakes / name).chmod(0o755)
    env = {**os.environ, "PATH": f"{fakes}:{os.environ['PATH']}", "AUTOGRADER_ROOT": str(root),
           "AUTOGRADER_NO_DATA": "1"}  # no download here: see the module's docstring
    done = subprocess.run(["bash", str(root / "source" / "setup.sh")], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    where = subprocess.run([sys.executable, "-c", "import provided; print(provided.__file__)"],
                           cwd="/", capture_output=True, text=True)
    assert where.stdout.startswith(str(REPO_ROOT)), (
        "setup.sh's installs reached this environment: " + where.stdout + where.stderr)
    return root


def run_autograder(root: Path, submission: Path) -> dict:
    """Gradescope's per-submission step: the submission in place, run_autograder, and the
    results.json it left."""
    shutil.rmtree(root / "submission", ignore_errors=True)
    shutil.rmtree(root / "results", ignore_errors=True)
    shutil.copytree(submission, root / "submission")
    (root / "results").mkdir()
    env = {**os.environ, "AUTOGRADER_ROOT": str(root), "AUTOGRADER_NO_DATA": "1"}
    done = subprocess.run(["bash", str(root / "source" / "run_autograder")], env=env,
                          capture_output=True, text=True, timeout=600)
    path = root / "results" / "results.json"
    assert path.exists(), f"no results.json: {done.stdout[-2000:]}{done.stderr[-2000:]}"
    results = json.loads(path.read_text())
    check_results_format(results)
    return results


def test_the_repository_itself_scores_full_marks(autograder, tmp_path):
    """Every code test passes. The results are not graded here (this simulation has no data
    folder: --code-only): each results entry says so, and each problem's status is visible."""
    submission = tmp_path / "repository"
    for name in tracked_files(REPO_ROOT):
        if not name.startswith(("course/grading/", "course/tools/", ".ci/")):
            (submission / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO_ROOT / name, submission / name)
    results = run_autograder(autograder, submission)
    maximum = sum(t["max_score"] for t in results["tests"])
    code = [t for t in results["tests"] if not t["tags"][0].endswith("-results")]
    failed = [t["name"] + ": " + t["output"][:200] for t in code
              if t["score"] < t["max_score"] - 1e-9]
    assert not failed, failed
    assert sum(t["max_score"] for t in code) == pytest.approx(100)
    assert maximum == pytest.approx(108)
    for entry in results["tests"]:
        if entry["tags"][0].endswith("-results"):
            assert entry["output"].startswith("not graded: --code-only"), (
                entry["name"], entry["output"])
            assert (entry["visibility"] == "visible") == (entry["max_score"] == 0), entry["name"]


def test_the_empty_handout_scores_nothing(autograder, tmp_path):
    make_handout(tmp_path / "handout")
    results = run_autograder(autograder, tmp_path / "handout")
    assert score_of(results) == 0
    assert sum(t["max_score"] for t in results["tests"]) == pytest.approx(108)


def test_a_folder_without_problems_gets_results_that_say_why(autograder, tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "README.txt").write_text("oops, wrong folder")
    results = run_autograder(autograder, tmp_path / "empty")
    assert score_of(results) == 0 and "no problem1/, problem2/ or problem3/" in results["output"]
    assert sum(t["max_score"] for t in results["tests"]) == pytest.approx(108)
