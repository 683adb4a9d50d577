"""Correct code, however written, earns in the grader what it earns in local pytest.

The reference solution rewritten the ways students write correct code (module constants of
any expression, helpers before or after their users, decorators, a `__main__` block, debug
prints, other encodings and line ends, ...). Every rewrite is applied at once, to the files
named, so one submission carries them all: local `pytest` must pass in the handout filled
with it, and the grader must give it exactly the reference's code points."""

import ast
import codecs
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from course.grading import grade
from course.grading import rubric as RUBRIC
from course.grading.handout import make_handout
from provided.common import REPO_ROOT

pytestmark = [pytest.mark.kit, pytest.mark.timeout(900)]


def after_docstring(text: str, added: str) -> str:
    """text with added right after its module docstring (the first line that closes it)."""
    end = text.index('"""', text.index('"""') + 3) + 3
    return text[:end] + "\n" + added + text[end:]


def before_first_def(text: str, added: str) -> str:
    """text with added before its first top-level function or class (decorators included)."""
    node = next(n for n in ast.parse(text).body
                if isinstance(n, (ast.FunctionDef, ast.ClassDef)))
    first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    lines = text.splitlines(keepends=True)
    return "".join(lines[:first - 1]) + added + "".join(lines[first - 1:])


def replace(old: str, new: str):
    def edit(text: str) -> str:
        assert old in text, f"the idiom's anchor is gone: {old!r}"
        return text.replace(old, new, 1)
    return edit


def append(added: str):
    return lambda text: text.rstrip("\n") + "\n\n\n" + added


# (what a student wrote, the file, the edit of its text); bytes-level ones in ENCODINGS
IDIOMS = [
    ("a module constant of an expression, used in a solution", "problem1/attention.py",
     lambda t: replace('scores.masked_fill(~mask, float("-inf"))',
                       "scores.masked_fill(~mask, NEG_INF)")(
         before_first_def(t, 'NEG_INF = float("-inf")\n\n'))),
    ("a helper defined after its user, its default a computed constant", "problem1/attention.py",
     lambda t: append("_DIAGONAL = int('0')\n\n\ndef _lower(size, device, diagonal=_DIAGONAL):\n"
                      "    return torch.ones(size, size, dtype=torch.bool, device=device)"
                      ".tril(diagonal)\n")(replace(
         "return torch.ones(size, size, dtype=torch.bool, device=device).tril()",
         "return _lower(size, device)")(t))),
    ("from __future__ import annotations", "problem1/attention.py",
     lambda t: after_docstring(t, "\nfrom __future__ import annotations\n")),
    ("a debug print at module level", "problem1/dataset.py",
     append('print("problem1.dataset loaded")\n')),
    ("__all__", "problem1/dataset.py", append('__all__ = ["AdditionDataset"]\n')),
    ("a decorated helper (functools.lru_cache)", "problem1/model.py",
     lambda t: before_first_def(t, "import functools\n\n\n@functools.lru_cache(maxsize=None)\n"
                                   "def _width(d_model: int) -> int:\n    return 4 * d_model\n\n")),
    ("a __main__ block in a module", "problem1/model.py",
     append('if __name__ == "__main__":\n    print("model self-check")\n')),
    ("a type alias and a computed constant from math", "problem2/positional.py",
     lambda t: before_first_def(t, "import math\n\nTensor = torch.Tensor\n"
                                   "_TWO_PI = 2 * math.pi\n\n\n"
                                   "def _wrap(angles: Tensor) -> Tensor:\n"
                                   "    return torch.remainder(angles, _TWO_PI)\n\n")),
    ("an optional import in try/except", "problem2/positional.py",
     lambda t: before_first_def(t, "try:\n    import tqdm as _tqdm\nexcept ImportError:\n"
                                   "    _tqdm = None\n\n")),
    ("an assertion at module level", "problem2/positional.py",
     append("assert _TWO_PI > 6\n")),
    ("a logger, used in a solution", "problem2/train.py",
     lambda t: replace("    return loss_sum, correct, has_target.sum().item()\n",
                       '    logger.debug("loss %s", float(loss_sum))\n'
                       "    return loss_sum, correct, has_target.sum().item()\n")(
         before_first_def(t, "import logging\n\nlogger = logging.getLogger(__name__)\n\n"))),
    ("a dataclass helper", "problem2/train.py",
     append("from dataclasses import dataclass\n\n\n@dataclass(frozen=True)\n"
            "class _Tally:\n    loss: float = 0.0\n    correct: int = 0\n")),
    ("a set comprehension constant", "problem3/evaluate.py",
     lambda t: before_first_def(t, '_BRACKETS = {c for c in "()[]"}\n\n')),
    ("a lambda constant", "problem3/evaluate.py",
     lambda t: before_first_def(t, "_square = lambda x: x * x  # noqa: E731\n\n")),
    ("a temporary deleted at module level", "problem3/evaluate.py",
     append("_scratch = [1, 2]\ndel _scratch\n")),
    ("an aliased import", "problem3/sample.py",
     lambda t: before_first_def(t, "import numpy as np\n\n_ONE = np.int64(1)\n\n")),
    ("a helper class with __slots__", "problem3/sample.py",
     append("class _Stop:\n    __slots__ = ('reason',)\n\n    def __init__(self, reason):\n"
            "        self.reason = reason\n")),
    ("a comment and blank lines moved", "problem3/model.py",
     lambda t: after_docstring(t, "\n# a student's note: the Block follows the spec.\n\n")),
]
# (what a student's editor did, the file, text -> bytes)
ENCODINGS = [
    ("a latin-1 encoding cookie and a latin-1 comment", "problem1/attention.py",
     lambda t: ("# -*- coding: latin-1 -*-\n# d\xe9j\xe0 vu: caf\xe9\n" + t).encode("latin-1")),
    ("CRLF line ends", "problem1/dataset.py", lambda t: t.replace("\n", "\r\n").encode()),
    ("a UTF-8 BOM", "problem1/model.py", lambda t: codecs.BOM_UTF8 + t.encode()),
    ("a BOM and CRLF", "problem3/model.py",
     lambda t: codecs.BOM_UTF8 + t.replace("\n", "\r\n").encode()),
]


def test_the_corpus_is_at_least_twenty_rewrites():
    assert len(IDIOMS) + len(ENCODINGS) >= 20


@pytest.fixture(scope="module")
def rewritten(tmp_path_factory) -> Path:
    """The handout with the reference's problem files, every rewrite applied."""
    out = tmp_path_factory.mktemp("idioms") / "submission"
    make_handout(out)
    texts = {}
    for _, name, edit in IDIOMS:
        texts[name] = edit(texts.get(name, (REPO_ROOT / name).read_text()))
    for path in REPO_ROOT.glob("problem*/*.py"):
        name = path.relative_to(REPO_ROOT).as_posix()
        (out / name).write_text(texts.get(name, path.read_text()))
    for _, name, encode in ENCODINGS:
        (out / name).write_bytes(encode(texts.get(name, (REPO_ROOT / name).read_text())))
    return out


def test_local_pytest_passes_on_the_rewrites(rewritten):
    env = {**os.environ, "PYTHONPATH": str(rewritten), "OMP_NUM_THREADS": "1"}
    ran = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "tests"], cwd=rewritten, capture_output=True, text=True, env=env)
    assert ran.returncode == 0, ran.stdout[-3000:]


def test_the_grader_gives_the_rewrites_every_code_point(rewritten):
    parts = list(RUBRIC.PARTS)
    grader = grade.setup(parts)
    try:
        budget = grade.Budget(time.monotonic() + 1800, grader.test_seconds)
        results = grade.grade(rewritten, grader, parts, None, budget)
    finally:
        grader.close()
    lost = {t["name"]: t["output"][:300] for t in results["tests"]
            if not t["tags"][0].endswith("-results") and t["score"] < t["max_score"]}
    assert not lost, lost
