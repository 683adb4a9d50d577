"""Downstream tests know their upstream (conftest.py's pytest_runtest_makereport, the map
tests/parts.py's RELIES_ON): in a local run, a test that fails after the own tests of a
function it relies on failed starts its message with one line naming that function, its
part and its failing tests; a correct upstream adds nothing; the outcomes are the same with
the hint or without it, and under the grader's "seam-transport" plugin the hint is off
(the messages are the tests' own). Local pytest runs of Part B's tests in a copy of the
reference with one catalogued mistake planted (about a minute on 2 busy cores)."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from course.grading.mutants import MUTANTS
from provided.common import REPO_ROOT

pytestmark = [pytest.mark.kit, pytest.mark.timeout(600)]

HINT = "fix it first; this failure may follow from it."
# a plugin written into the tree: {node id: [outcome, the crash message]} of the tests run
OUTCOMES = '''import json, os
SEEN = {}


def pytest_runtest_logreport(report):
    crash = getattr(getattr(report.longrepr, "reprcrash", None), "message", "")
    old = SEEN.get(report.nodeid, ["passed", ""])
    SEEN[report.nodeid] = ["failed", crash] if report.failed else old


def pytest_sessionfinish(session):
    with open(os.environ["UPSTREAM_OUT"], "w") as out:
        json.dump(SEEN, out)
'''
# the grader's plugin name, with the seam's loopback as its transport (the tests then run
# in this process, as without it)
GRADER_LIKE = '''from tests import seam


class Transport:
    factory = seam.Loopback


def pytest_configure(config):
    config.pluginmanager.register(Transport(), "seam-transport")
'''


def planted_tree(tmp_path: Path, mistake: str) -> Path:
    """The reference's code and public tests in tmp_path, with the catalogued mistake."""
    mutant = next(m for m in MUTANTS if m.name == mistake)
    tree = tmp_path / mistake
    for name in ("problem1", "provided", "tests"):
        shutil.copytree(REPO_ROOT / name, tree / name,
                        ignore=shutil.ignore_patterns("__pycache__", "results"))
    for name in ("conftest.py", "pyproject.toml"):
        shutil.copy(REPO_ROOT / name, tree / name)
    target = tree / mutant.file
    target.write_text(mutant.apply(target.read_text()))
    (tree / "_upstream_outcomes.py").write_text(OUTCOMES)
    (tree / "_grader_like.py").write_text(GRADER_LIKE)
    return tree


def run_part(tree: Path, part: str, grader_like: bool = False) -> dict:
    """{node id: [outcome, crash message]} of `pytest -m part tests/` run in tree."""
    out = tree / "outcomes.json"
    out.unlink(missing_ok=True)
    plugins = ["-p", "_upstream_outcomes"] + (["-p", "_grader_like"] if grader_like else [])
    env = {**os.environ, "PYTHONPATH": str(tree), "UPSTREAM_OUT": str(out),
           "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           *plugins, "-m", part, "tests"], cwd=tree, env=env,
                          capture_output=True, text=True, timeout=500)
    assert out.exists(), done.stdout[-3000:] + done.stderr[-2000:]
    return json.loads(out.read_text())


def failed(outcomes: dict) -> dict:
    return {node: message for node, (outcome, message) in outcomes.items()
            if outcome == "failed"}


def test_a_failing_upstream_is_named_first_and_changes_no_outcome(tmp_path):
    tree = planted_tree(tmp_path, "p1b_mask_flipped")  # scaled_dot_product_attention's mask
    local, grader_like = failed(run_part(tree, "p1b")), failed(run_part(tree, "p1b", True))
    assert set(local) == set(grader_like), "the hint changed an outcome"
    own = [node for node in local if "::test_sdpa_" in node]
    relying = [node for node in local if "::test_mha_" in node]
    assert own and relying, local
    for node in relying:
        first = local[node].splitlines()[0]
        assert first.startswith("Part B's scaled_dot_product_attention fails its own tests (")
        assert own[0].split("::")[-1] in first and first.endswith(HINT), first
    for node in own:  # a function's own tests keep their own message
        assert HINT not in local[node], local[node]
    assert not any(HINT in message for message in grader_like.values()), (
        "the hint must be off under the grader's seam-transport plugin")


def test_a_correct_upstream_adds_nothing(tmp_path):
    tree = planted_tree(tmp_path, "p1b_no_output_projection")  # MultiHeadAttention alone
    local = failed(run_part(tree, "p1b"))
    assert any("::test_mha_" in node for node in local), local
    assert not any("::test_sdpa_" in node for node in local), local
    assert not any(HINT in message for message in local.values()), local
