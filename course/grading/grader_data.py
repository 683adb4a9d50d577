"""The grader's own data: the files the results are recomputed on and their SHA-1.

Imported by the grader (course/grading/grade.py checks every file before it reads a
submission) and by the recomputation (course/grading/recompute.py checks a problem's files
again in its child). Only hashlib: no torch, no reference code.
"""

import hashlib
from pathlib import Path

# the grader's data files (python generate_datasets.py is deterministic) and their SHA-1
DATA_SHA1 = {
    "addition/val.csv": "d05a85bd48a1c0c4a36e532887ab3a81183368c2",
    "addition/test.csv": "1d1be2418113cfda0922636d95f5b21f9f1f7d4d",
    "offset/test.npy": "4802a7dce4202f61856dbaeb4fb2716ab309da3c",
    "smiles/train.txt": "3d5815bf6c181c685e6bc98c49db41ff9b513df4",
}
DATA_FILES = {"problem1": ("addition/val.csv", "addition/test.csv"),
              "problem2": ("offset/test.npy",), "problem3": ("smiles/train.txt",)}


class GraderDataError(RuntimeError):
    """The grader's own data folder is not the homework's: a setup fault, not the student's."""


def check_data(problem: str, data_dir: Path, data_sha1: dict | None = DATA_SHA1) -> None:
    """GraderDataError unless each data file the problem needs has its SHA-1 in data_sha1
    (None: no check, for tests on tiny data)."""
    if data_sha1 is None:
        return
    for name in DATA_FILES[problem]:
        path = Path(data_dir) / name
        try:
            digest = hashlib.sha1(path.read_bytes()).hexdigest()
        except OSError as err:
            raise GraderDataError(f"the grader's {path} cannot be read ({err.strerror}): run "
                                  "`python generate_datasets.py`") from None
        if digest != data_sha1[name]:
            raise GraderDataError(f"the grader's {path} has SHA-1 {digest}, not the homework's "
                                  f"{data_sha1[name]}: regenerate it (python generate_datasets.py"
                                  " --force)")


def data_fault(data_dir: Path, problems=tuple(DATA_FILES)) -> str | None:
    """Why the grader's data cannot grade the results (the first file at fault), or None."""
    try:
        for problem in problems:
            check_data(problem, data_dir)
    except GraderDataError as err:
        return str(err)
    return None
