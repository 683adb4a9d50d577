"""A submission into code and files the grader can use: the intake.

Runs in the grader (course/grading/grade.py) and never imports or runs a submission's
code: it copies the submission's regular files with defensive reads (no links, FIFOs or
devices, nothing over the size limits), finds its root, takes its solution files whole with
the given code put back as the handout has it (provided.given.graded_source), and
every other file of a problem folder that `make submission` packs
(provided.submission.taken_problem_files: modules and packages of the student's own, data
files), says which given code it put back (given_code_told), and keeps the code as graded
beside the results. results_files runs in the forked child that recomputes the results
(course/grading/scoring.py).
"""

import ast
import os
import stat
from pathlib import Path

from course.grading import rubric as RUBRIC
from course.grading.trusted import Kit
from course.grading.users import remove_tree
from provided.given import given_changes, graded_source, read_source, region_functions

# what is taken from a submission, at most (defined once, in provided/submission.py, whose
# `make submission` checks a student's files against them): the files unpacked, in bytes
# and in number, and one file's bytes; and the result files the grader reads
from provided.submission import (
    OWN_GIVEN,
    SUBMISSION_FILE_BYTES,
    SUBMISSION_FILES,
    SUBMISSION_LIMIT_BYTES,
    graded_results,
    problem_folder_files,
    taken_problem_files,
)

GRADED_FOLDER = "graded_code"  # beside results.json: the submission's code as graded


def read_regular(path: Path, limit: int) -> bytes | None:
    """path's bytes if it is a regular file of at most limit bytes, else None: opened without
    following a link (O_NOFOLLOW) and without waiting on a FIFO (O_NONBLOCK), checked on the
    open file itself (fstat), and read no further than limit."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode) or status.st_size > limit:
            return None
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, min(2**20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        return None if size > limit else b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def copy_submission(source: Path, out: Path) -> list[str]:
    """The submission's regular files (no links, FIFOs or devices, nothing over the size
    limits) under out: everything the grader reads of a submission comes from this copy.
    Returns a note per file of a problem folder left out (a path too long to copy, or one
    over the limits), for the student to see: the grader reads nothing else."""
    total, count, notes = 0, 0, []
    for folder, dirs, names in os.walk(source, followlinks=False):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d != "__pycache__"]
        for name in names:
            path = Path(folder) / name
            relative = path.relative_to(source)
            noted = any(part.startswith("problem") for part in relative.parts[:2])
            if path.suffix == ".pth" and not (name.startswith("model_")
                                              and path.parent.name == "results"):
                continue  # weights: only the runs' own (step checkpoints, resume files stay)
            if count >= SUBMISSION_FILES:
                notes += [f"{relative}: left out, over {SUBMISSION_FILES} files"] * noted
                continue
            data = read_regular(path, min(SUBMISSION_FILE_BYTES, SUBMISSION_LIMIT_BYTES - total))
            if data is None:
                if noted and path.is_file() and not path.is_symlink():
                    notes.append(f"{relative}: left out, over the size limits "
                                 f"({SUBMISSION_FILE_BYTES / 2**20:g} MiB a file, "
                                 f"{SUBMISSION_LIMIT_BYTES / 2**20:g} MiB in all)")
                continue  # a link, FIFO, device or unreadable file: never read
            target = out / relative
            try:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)
            except OSError as err:  # a path too long for the grader's copy, say
                notes += [f"{relative}: left out, it could not be copied "
                          f"({err.strerror or type(err).__name__})"] * noted
                continue
            total, count = total + len(data), count + 1
    return notes


def find_root(submission: Path) -> Path | None:
    """The folder of a submission that holds problem1/, problem2/ or problem3/ (Gradescope
    may unpack a repository one level down)."""
    for folder in [submission, *sorted(p for p in submission.iterdir() if p.is_dir())]:
        if any((folder / f"problem{n}").is_dir() for n in (1, 2, 3)):
            return folder
    return None


def submission_code(kit: Kit, root: Path | None) -> tuple[dict, dict]:
    """({path: bytes} of the submission's code as graded, {part: a reason its code could not
    be taken}): each solution file is the submission's own, whole, with the given code put
    back as the handout has it (provided.given.graded_source), plus every file of a
    problem folder that `make submission` packs besides (own_files: modules, packages and
    data files of its own, a problem folder's __init__.py), as it is.

    So what runs is what the student ran: every top-level statement of the file in its own
    order (imports, constants, helpers, decorators, the `__main__` block, prints), decoded
    as Python decodes it (BOM, encoding cookie, CRLF). It runs only in a sandbox: code at
    module level that raises, loops or prints fails the tests that import the module, with
    its reason. A region function the submission lacks is the handout's (it raises
    NotImplementedError; it never falls back to the reference's)."""
    code, reasons = {}, {}
    for name, functions in RUBRIC.REGIONS.items():
        problem = name.split("/")[0]
        parts = sorted(set(functions.values()))
        submitted = root / name if root is not None else None
        if root is None or not (root / problem).is_dir():
            reasons.update(dict.fromkeys(parts, f"your submission has no {problem}/ folder"))
            continue
        if not submitted.is_file():
            reasons.update(dict.fromkeys(parts, f"your submission has no {name}"))
            continue
        try:
            student = read_source(submitted.read_bytes())
            compile(student, name, "exec")
        except SyntaxError as err:
            where = f"{name}, line {err.lineno}" if err.lineno else name
            reasons.update(dict.fromkeys(parts, f"{where}: {err.msg} (the file does not "
                                                "compile)"))
            continue
        except (UnicodeDecodeError, ValueError, RecursionError, MemoryError) as err:
            reasons.update(dict.fromkeys(parts, f"{name} cannot be read as Python source: "
                                                f"{type(err).__name__}"))
            continue
        try:
            code[name] = graded_source(student, kit.handout[name].decode(),
                                       region_functions(kit.files[name].decode())).encode()
        except (SyntaxError, ValueError, RecursionError, MemoryError) as err:
            reasons.update(dict.fromkeys(parts, f"{name}: its given code could not be put "
                                                f"back ({type(err).__name__}: {err})"[:300]))
    for name in own_files(kit, root):
        data = read_regular(root / name, SUBMISSION_FILE_BYTES)
        if data is not None:
            code[name] = data
    return code, reasons


def own_files(kit: Kit, root: Path | None) -> list[str]:
    """The files of root's problem folders that the grader takes as the submission has
    them: what `make submission` packs (provided.submission.taken_problem_files: modules
    and packages of its own at any depth, data files within DATA_BYTES), less the solution
    files (taken through graded_source), REPORT.md and the kit's own files (config.py, ...:
    the handout's stay), except a problem folder's __init__.py (OWN_GIVEN), empty in the
    handout and the student's to fill."""
    if root is None:
        return []
    taken, _ = taken_problem_files(problem_folder_files(root)[0])
    return [name for name in taken if name not in RUBRIC.REGIONS
            and not name.endswith("/REPORT.md")
            and (name not in kit.files or name in OWN_GIVEN)]


def given_code_told(kit: Kit, root: Path | None) -> dict[str, list[str]]:
    """{part: lines for its visible output}: each given function, method or class of a
    solution file that the submission changed or lacks, put back as the handout has it (in
    every part of the file), and each given file of a problem folder whose submitted copy
    differs from the handout's, which the grader uses instead (in every part of the
    problem). The lines are those of `python -m provided.submission --check`."""
    told: dict[str, list[str]] = {}
    if root is None:
        return told
    for name, functions in RUBRIC.REGIONS.items():
        try:
            student = read_source((root / name).read_bytes())
            changed, lacking = given_changes(student, kit.handout[name].decode(),
                                             region_functions(kit.files[name].decode()))
        except (OSError, SyntaxError, ValueError, UnicodeDecodeError, RecursionError,
                MemoryError):
            continue  # missing or not compiling: its parts' reason says so
        lines = [f"{name}: {what} is given code you changed: the handout's version is used"
                 for what in changed]
        lines += [f"{name}: {what} is not in your file: the handout's "
                  + ("stub is used (it raises NotImplementedError)" if what in functions
                     else "version is used") for what in lacking]
        for part in sorted(set(functions.values())) if lines else ():
            told.setdefault(part, []).extend(lines)
    for name, data in kit.files.items():
        problem = name.split("/")[0]
        if (not problem.startswith("problem") or name.count("/") != 1
                or name in RUBRIC.REGIONS or name in OWN_GIVEN):
            continue
        theirs = read_regular(root / name, SUBMISSION_FILE_BYTES)
        if theirs is None or not differs(theirs, data, name):
            continue
        line = f"{name}: a given file: the handout's is used, not yours"
        for part, (owner, *_) in RUBRIC.PARTS.items():
            if owner == problem:
                told.setdefault(part, []).append(line)
    return told


def differs(theirs: bytes, ours: bytes, name: str) -> bool:
    """Whether a submitted given file differs from the kit's: for Python, as Python sees it
    (comments and layout are no change), else byte for byte."""
    if not name.endswith(".py"):
        return theirs != ours
    try:
        return ast.dump(ast.parse(read_source(theirs))) != ast.dump(ast.parse(ours))
    except (SyntaxError, ValueError, UnicodeDecodeError, RecursionError, MemoryError):
        return True


def keep_graded_code(folder: Path, code: dict) -> None:
    """The submission's code exactly as graded, in folder (replaced; a results.json there,
    which grade keeps writing, stays)."""
    if folder.is_dir() and not folder.is_symlink():
        for entry in folder.iterdir():
            if entry.name != "results.json":
                remove_tree(entry)
    else:
        remove_tree(folder)
    for name, data in code.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def results_files(folder: Path, problem: str, out: Path) -> Path:
    """out holding only the submission's result files the grader reads, as plain files:
    metrics.json, and per prescribed run (by the run registry) its training log, its
    weights (Problems 1 and 2) and, for Problem 3's long run, its samples, each within its
    size limit (provided.submission.graded_results, with the limits recompute reads). A run
    name in metrics.json then names no other file: with no folder in out, a path such as
    training_log_x/../../secret.json resolves to nothing."""
    out.mkdir(mode=0o700)
    for name, limit in graded_results(problem).items():
        data = read_regular(folder / name, limit)
        if data is not None:
            (out / name).write_bytes(data)
    return out
