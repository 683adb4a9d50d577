"""Correct code, however written, earns in the grader what it earns in local pytest.

The reference solution rewritten the ways students write correct code (module constants of
any expression, helpers before or after their users, decorators, a `__main__` block, debug
prints, other encodings and line ends, a helper package, a data file read through
Path(__file__).parent, a helper in the given, empty problem1/__init__.py, a DataLoader with
worker processes, ...). Every
rewrite is applied at once, to the files named, so one submission carries them all: local
`pytest` must pass in the handout filled with it, `make submission` must name none of it,
and the grader must give it exactly the reference's code points. A given function edited
(and called edited) is the one rewrite the grader does not take: there the public tests'
verdict of `python -m provided.submission --check` is the grader's, test by test, the
part's visible output names the function, and no part whose files are untouched loses a
point. Part 3E written with the standard library's concurrency and files (asyncio, threads,
multiprocessing's Pool, Manager, Pipe and Queue, ProcessPoolExecutor with the spawn and
forkserver start methods, tempfile, logging to a file, a Python subprocess) passes local
pytest and `--check`, and earns every point of the part."""

import ast
import codecs
import os
import re
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
    ("a DataLoader with worker processes, used in a solution", "problem2/train.py",
     lambda t: replace("    for start in range(0, tokens.shape[0], batch_size):\n"
                       "        logits = model(tokens[start:start + batch_size])\n"
                       "        batch_loss, batch_correct, batch_count = loss_and_correct(\n"
                       "            logits, targets[start:start + batch_size])\n",
                       "    loader = DataLoader(TensorDataset(tokens, targets), "
                       "batch_size=batch_size, num_workers=2)\n"
                       "    for batch_tokens, batch_targets in loader:\n"
                       "        logits = model(batch_tokens)\n"
                       "        batch_loss, batch_correct, batch_count = loss_and_correct(\n"
                       "            logits, batch_targets)\n")(
         before_first_def(t, "from torch.utils.data import DataLoader, TensorDataset\n\n\n"))),
    # kinds of files beside the solution (FILES holds them)
    ("a helper package with a submodule and a relative import, used in a solution",
     "problem1/attention.py",
     lambda t: replace("return x.unflatten(-1, (self.num_heads, self.d_k)).transpose(1, 2)",
                       "return split_columns(x, self.num_heads, self.d_k)")(
         before_first_def(t, "from problem1.attn_utils import split_columns\n\n\n"))),
    ("a data file beside the solution, read through Path(__file__).parent",
     "problem2/positional.py",
     lambda t: replace("    return _omega(d_model).float()\n",
                       "    steps = torch.arange(0, d_model, 2, dtype=torch.float64) / d_model\n"
                       "    return (_CONSTANTS['base'] ** -steps).float()\n")(
         before_first_def(t, "import json\nfrom pathlib import Path\n\n_CONSTANTS = json.loads("
                             "(Path(__file__).parent / 'constants.json').read_text())\n\n\n"))),
    ("a helper written into the given, empty problem1/__init__.py", "problem1/dataset.py",
     lambda t: replace("        return len(self.src)\n", "        return count_rows(self.src)\n")(
         before_first_def(t, "from problem1 import count_rows\n\n\n"))),
]
# the standard library's concurrency and files in Part 3E's solutions (problem3/evaluate.py),
# each as a student might use it (the helpers they call go before the first function); a
# spawned or forkserver worker runs only library functions, as it must: it imports the
# module afresh, without the tests' stand-ins
EVALUATE = "problem3/evaluate.py"
STDLIB_HELPERS = """import asyncio
import logging
import multiprocessing
import subprocess
import sys
import tempfile
import threading
from concurrent.futures import ProcessPoolExecutor


async def _canonical_in_threads(samples):
    return await asyncio.gather(*(asyncio.to_thread(canonical, s) for s in samples))


def _count_in_threads(predicate, items, threads=4):
    counts, lock = [], threading.Lock()

    def count(chunk):
        found = sum(map(predicate, chunk))
        with lock:
            counts.append(found)
    workers = [threading.Thread(target=count, args=(items[i::threads],)) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return sum(counts)


def _outcomes(members):
    with multiprocessing.get_context("fork").Pool(2) as pool:
        return pool.map(outcome, members)


def _rows_via_a_manager(rows):
    with multiprocessing.Manager() as manager:
        shared = manager.list()
        shared.extend(rows)
        return list(shared)


def _in_a_process(method, function, values):
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context(method)) as executor:
        return executor.submit(function, values).result()


def _send_early(connection, rows):
    connection.send([r["head_grad_norm"] for r in rows if r["step"] in EARLY_STEPS])
    connection.close()


def _early_through_a_pipe(rows):
    ours, theirs = multiprocessing.Pipe()
    worker = multiprocessing.get_context("fork").Process(target=_send_early, args=(theirs, rows))
    worker.start()
    early = ours.recv()
    worker.join()
    return early


def _put_final(queue, log):
    queue.put(log["final_val_loss"])


def _final_through_a_queue(log):
    queue = multiprocessing.get_context("fork").Queue()
    worker = multiprocessing.get_context("fork").Process(target=_put_final, args=(queue, log))
    worker.start()
    final = queue.get()
    worker.join()
    return final


def _count_in_python(count):
    return int(subprocess.run([sys.executable, "-c", "import sys; print(int(sys.argv[1]))",
                               str(count)], capture_output=True, text=True, check=True).stdout)


def _log_to_a_file(found):
    path = Path(tempfile.mkdtemp()) / "samples.log"
    logger = logging.getLogger("sample_metrics")
    handler = logging.FileHandler(path)
    logger.addHandler(handler)
    try:
        logger.warning("%d distinct valid samples", len(found))
    finally:
        logger.removeHandler(handler)
        handler.close()
    assert path.read_text().startswith(str(len(found)))


"""
STDLIB_IDIOMS = [
    ("asyncio.run of asyncio.to_thread", EVALUATE,
     replace("    canon = [canonical(s) for s in samples]\n",
             "    canon = asyncio.run(_canonical_in_threads(samples))\n")),
    ("threading.Thread and a Lock", EVALUATE,
     replace('"well_formed": sum(map(is_well_formed, samples)) / len(samples),',
             '"well_formed": _count_in_threads(is_well_formed, samples) / len(samples),')),
    ("a Python subprocess (subprocess.run([sys.executable, ...]))", EVALUATE,
     replace('"num_samples": len(samples),', '"num_samples": _count_in_python(len(samples)),')),
    ("tempfile and logging to a file", EVALUATE,
     replace("    distinct = set(valid)\n",
             "    distinct = set(valid)\n    _log_to_a_file(sorted(distinct))\n")),
    ("a fork multiprocessing.Pool", EVALUATE,
     replace("counts = Counter(outcome(s) for s in members)",
             "counts = Counter(_outcomes(members))")),
    ("a multiprocessing.Manager", EVALUATE,
     replace("    return rows\n    # END SOLUTION", "    return _rows_via_a_manager(rows)\n"
             "    # END SOLUTION")),
    ("a multiprocessing.Pipe to a Process", EVALUATE,
     replace('early = [r["head_grad_norm"] for r in log["log"] if r["step"] in EARLY_STEPS]',
             'early = _early_through_a_pipe(log["log"])')),
    ("a multiprocessing.Queue from a Process", EVALUATE,
     replace('final = log["final_val_loss"]', "final = _final_through_a_queue(log)")),
    ("a ProcessPoolExecutor with the spawn start method", EVALUATE,
     replace('float(np.mean(finite)) if complete', 'float(_in_a_process("spawn", np.mean, finite))'
             " if complete")),
    ("a ProcessPoolExecutor with the forkserver start method", EVALUATE,
     replace('"head_grad_norm_max_100": max(finite) if complete',
             '"head_grad_norm_max_100": _in_a_process("forkserver", max, finite) if complete')),
]


def with_stdlib_idioms(text: str) -> str:
    """problem3/evaluate.py's text with STDLIB_IDIOMS applied, their helpers first."""
    text = before_first_def(text, STDLIB_HELPERS)
    for _, _, edit in STDLIB_IDIOMS:
        text = edit(text)
    return text


# the files of a student's own that the idioms above use: {path: text}
FILES = {
    "problem1/attn_utils/__init__.py": '"""Helpers of my attention."""\n\n'
                                       "from .heads import split_columns\n\n"
                                       '__all__ = ["split_columns"]\n',
    "problem1/attn_utils/heads.py": "def split_columns(x, heads, width):\n"
                                    '    """[B, T, h * w] -> [B, h, T, w]."""\n'
                                    "    return x.unflatten(-1, (heads, width)).transpose(1, 2)\n",
    "problem2/constants.json": '{"base": 10000.0}\n',
    "problem1/__init__.py": "def count_rows(rows):\n    return len(rows)\n",
}
# {an idiom's description: the FILES it uses}: each is graded alone too
USES = {
    "a helper package with a submodule and a relative import, used in a solution":
        ["problem1/attn_utils/__init__.py", "problem1/attn_utils/heads.py"],
    "a data file beside the solution, read through Path(__file__).parent":
        ["problem2/constants.json"],
    "a helper written into the given, empty problem1/__init__.py": ["problem1/__init__.py"],
}
assert set(USES) <= {idiom for idiom, _, _ in IDIOMS}, "USES names an idiom IDIOMS lacks"
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
    kinds = {provided_kind(name) for name in FILES}
    assert kinds == {"code", "data"} and "problem1/__init__.py" in FILES
    assert any("/" in name.split("/", 1)[1] for name in FILES), "a package"


def provided_kind(name: str) -> str | None:
    from provided.submission import problem_file_kind

    return problem_file_kind(name)


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
    for name, text in FILES.items():
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_text(text)
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


@pytest.mark.parametrize("idiom", list(USES))
def test_a_file_of_ones_own_alone_earns_its_whole_problem(idiom, tmp_path):
    """One idiom that uses a file of the student's own (a package, a data file, a helper in
    problem1/__init__.py), alone in its problem's reference (the other problems the
    handout's stubs), graded over its problem's parts: every code point of the problem
    (blast radius 0)."""
    _, name, edit = next(item for item in IDIOMS if item[0] == idiom)
    problem = name.split("/")[0]
    root = tmp_path / "submission"
    make_handout(root)
    for path in REPO_ROOT.glob(f"{problem}/*.py"):
        (root / path.relative_to(REPO_ROOT)).write_text(path.read_text())
    (root / name).write_text(edit((REPO_ROOT / name).read_text()))
    for used in USES[idiom]:
        (root / used).parent.mkdir(parents=True, exist_ok=True)
        (root / used).write_text(FILES[used])
    parts = [part for part, (owner, *_) in RUBRIC.PARTS.items() if owner == problem]
    grader = grade.setup(parts)
    try:
        budget = grade.Budget(time.monotonic() + 1200, grader.test_seconds)
        results = grade.grade(root, grader, parts, None, budget)
    finally:
        grader.close()
    lost = {t["name"]: t["output"][:300] for t in results["tests"]
            if not t["tags"][0].endswith("-results") and t["score"] < t["max_score"]}
    assert not lost, lost


def test_make_submission_packs_the_rewrites_and_names_none(rewritten, tmp_path, capsys):
    """The files of the rewrites are packed, and no warning names them: a package, a data
    file and problem1/__init__.py are the student's own, like any module."""
    import zipfile

    from provided import submission

    out = tmp_path / "s.zip"
    submission.main(["--root", str(rewritten), "--out", str(out)])
    said = capsys.readouterr().err.splitlines()
    with zipfile.ZipFile(out) as archive:
        assert {name: archive.read(name).decode() for name in FILES} == FILES
    named = [line for line in said if "given code" in line or "differs from the handout" in line
             or "not packed" in line or any(name in line for name in FILES)]
    assert not named, named


FAILED_LINE = re.compile(r"^FAILED (tests/\S+?\.py)::(\S+)", re.M)


def test_a_given_function_edited_gets_the_local_checks_verdict(tmp_path):
    """Problem 2 written, its given _omega given an extra argument and called with it
    (local pytest passes): the grader runs the handout's _omega, and each public test of
    Problem 2 fails in the grader exactly where `python -m provided.submission --check`
    fails it; the visible entries of Parts 2B and 2C (positional.py's) name _omega; no
    part of Problem 2 whose public tests all pass in --check loses a point."""
    from course.grading.kit.test_submission_check import (
        POSITIONAL,
        check_in,
        filled,
        with_omega_edited,
    )

    root = tmp_path / "handout"
    make_handout(root)
    for name in RUBRIC.REGIONS:
        if name.startswith("problem2/"):
            (root / name).write_text(filled(name))
    (root / POSITIONAL).write_text(with_omega_edited(filled(POSITIONAL)))
    parts = [part for part, (problem, *_) in RUBRIC.PARTS.items() if problem == "problem2"]
    assert check_in(root, "--out", "s.zip").returncode == 0
    argv = [arg for part in parts for arg in ("--part", part)]
    local = check_in(root, "--check", "s.zip", *argv)
    assert local.returncode == 1, local.stdout[-3000:]
    told = (f"{POSITIONAL}: _omega is given code you changed: the handout's version is used")
    assert f"note: {told}" in local.stdout
    failed_locally = {name for _, name in FAILED_LINE.findall(local.stdout)}
    assert failed_locally, local.stdout[-3000:]
    grader = grade.setup(parts)
    try:
        budget = grade.Budget(time.monotonic() + 1800, grader.test_seconds)
        results = grade.grade(root, grader, parts, None, budget)
    finally:
        grader.close()
    visible = [t for t in results["tests"] if t["visibility"] == "visible"
               and not t["tags"][0].endswith("-results")]
    failed_here = {t["name"].split("): ", 1)[1] for t in visible if t["score"] < t["max_score"]}
    assert failed_here == failed_locally, (failed_here ^ failed_locally)
    for test in visible:
        assert (told in test["output"]) == (test["tags"][0] in ("p2b", "p2c")), test["name"]
    assert told in results["output"]
    failing_parts = {t["tags"][0] for t in visible if t["score"] < t["max_score"]}
    lost = {t["tags"][0] for t in results["tests"] if t["score"] < t["max_score"]
            and not t["tags"][0].endswith("-results")}
    assert lost == failing_parts, "a hidden test lost points where every public one passed"


def test_the_standard_librarys_idioms_earn_every_point_of_their_part(tmp_path):
    """Part 3E solved with STDLIB_IDIOMS (asyncio, threads, a Python subprocess, tempfile
    and logging to a file, a fork Pool, a Manager, a Pipe and a Queue to a Process, a
    ProcessPoolExecutor with the spawn and the forkserver start methods): local pytest
    passes, `--check` passes every public test of the part, and the grader gives the part
    every point (Problem 3's other files the reference's, Problems 1 and 2 the handout's)."""
    from course.grading.kit.test_submission_check import check_in

    root = tmp_path / "submission"
    make_handout(root)
    for path in REPO_ROOT.glob("problem3/*.py"):
        (root / path.relative_to(REPO_ROOT)).write_text(path.read_text())
    (root / EVALUATE).write_text(with_stdlib_idioms((REPO_ROOT / EVALUATE).read_text()))
    env = {**os.environ, "PYTHONPATH": str(root), "OMP_NUM_THREADS": "1"}
    ran = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "-m", "p3e", "tests"], cwd=root, capture_output=True, text=True,
                         env=env)
    assert ran.returncode == 0, ran.stdout[-3000:]
    assert check_in(root, "--out", "s.zip").returncode in (0, 1)  # other problems: stubs
    checked = check_in(root, "--check", "s.zip", "--part", "p3e")
    assert checked.returncode == 0, checked.stdout[-3000:]
    grader = grade.setup(["p3e"])
    try:
        budget = grade.Budget(time.monotonic() + 1200, grader.test_seconds)
        results = grade.grade(root, grader, ["p3e"], None, budget)
    finally:
        grader.close()
    graded = [t for t in results["tests"] if t["tags"][0] == "p3e"]
    assert graded and all(t["score"] == t["max_score"] for t in graded), [
        t["output"][:300] for t in graded if t["score"] < t["max_score"]]
