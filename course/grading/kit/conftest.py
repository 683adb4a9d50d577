"""Shared set-up of the kit's bad-input tests (course/grading/kit/test_bad_input_*.py).

Every fault must end in ONE line on stderr that starts with "error:" and names the file or
flag at fault, with a non-zero exit and no traceback; these fixtures give the tests tiny data
in a temporary folder, a way to run a script in a subprocess, and that one-line check.
"""

import os
import random
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

REPO = Path(__file__).resolve().parents[3]
FIXTURES = REPO / "tests" / "fixtures"


def write_tiny_data(root: Path) -> Path:
    """root/data with every dataset in its real format, tiny: addition 40 / 8 / 8 pairs,
    offset [40, 64] and [6, 128], SMILES the 400 + 100 fixture strings."""
    data = root / "data"
    rng = random.Random(0)
    (data / "addition").mkdir(parents=True)
    for split, n in (("train", 40), ("val", 8), ("test", 8)):
        rows = [f"{rng.randint(0, 999)},{rng.randint(0, 999)}" for _ in range(n)]
        (data / "addition" / f"{split}.csv").write_text("a,b\n" + "\n".join(rows) + "\n")
    generator = np.random.default_rng(0)
    (data / "offset").mkdir()
    np.save(data / "offset" / "train.npy", generator.integers(0, 16, size=(40, 64)))
    np.save(data / "offset" / "test.npy", generator.integers(0, 16, size=(6, 128)))
    (data / "smiles").mkdir()
    shutil.copy(FIXTURES / "smiles_train.txt", data / "smiles" / "train.txt")
    shutil.copy(FIXTURES / "smiles_val.txt", data / "smiles" / "val.txt")
    return data


@pytest.fixture
def keep_torch_threads():
    """Scripts run in-process apply --threads to the whole process: put it back."""
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def data(tmp_path, keep_torch_threads) -> Path:
    """A tiny data folder (see write_tiny_data)."""
    return write_tiny_data(tmp_path)


def check_one_line(err: str, *needles: str) -> str:
    """The last stderr line (a progress bar may come before it): it starts with 'error:' and
    holds every needle, and there is no traceback. Returns that line."""
    assert "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert lines, "nothing on stderr"
    last = lines[-1]
    assert last.startswith("error:"), err
    for needle in needles:
        assert needle in last, f"{needle!r} not in {last!r}"
    return last


@pytest.fixture
def one_line():
    return check_one_line


@pytest.fixture
def stops(capsys, keep_torch_threads):
    """stops(main, argv, *needles): main(argv) ends with a non-zero exit (SystemExit or a
    non-zero return) and one line holding the needles; returns (code, that line)."""

    def run(main, argv, *needles):
        capsys.readouterr()
        try:
            code = main([str(a) for a in argv])
        except SystemExit as stop:
            code = stop.code
        assert code not in (0, None), f"exit code {code}"
        return code, check_one_line(capsys.readouterr().err, *needles)

    return run


def environment() -> dict:
    """The environment of a script run as a subprocess: PYTHONPATH is the repository root."""
    return dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")


@pytest.fixture
def script_env() -> dict:
    return environment()


def default_ctrl_c() -> None:
    """In the child: SIGINT back to its default, so that Python turns it into
    KeyboardInterrupt. A job started in the background (`make test &`, nohup) inherits an
    ignored SIGINT, and Python then leaves Ctrl-C ignored."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.fixture
def start_script():
    """start_script('problem1.train', *args): the script as a subprocess (python -m), run
    from the repository root with PYTHONPATH set to it; stdout and stderr are pipes."""
    started = []

    def start(module, *args):
        process = subprocess.Popen([sys.executable, "-m", module, *map(str, args)], cwd=REPO,
                                   env=environment(), stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True,
                                   preexec_fn=default_ctrl_c)
        started.append(process)
        return process

    yield start
    for process in started:  # only the processes this test started
        if process.poll() is None:
            process.kill()
            process.wait()
