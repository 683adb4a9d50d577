"""Run every script of every problem, in pipeline order, on tiny settings (`make smoke`).

Students: given; a course tool (make smoke), you need not read it.

    python -m provided.smoke                  # the three problems (make smoke)
    python -m provided.smoke --problem 2      # one problem (--problem 1 --problem 3: two)
    python -m provided.smoke --keep DIR       # keep the scratch folder DIR (a new one)

A check that the whole pipeline works, on your own code, before the long jobs: tiny datasets
cut from data/ (or from tests/fixtures for the molecules), a few training steps, and every
train, evaluate, sample and figure step, all inside a scratch folder (deleted afterwards
unless --keep names one). Committed results are never touched. The numbers mean nothing.

Each problem runs on its own. Files of its folder that the grader will not take are named
first (warnings, as `make submission` names them; data files over the grader's limit fail
the problem). When one of its steps fails, the rest of that problem is skipped and the next
problem runs; a step that stops at a function still to be written (the
handout's `raise NotImplementedError`) is named in one line: its file, function and part.
The exit status is 0 when every problem asked for passed, 1 when any failed.
"""

import ast
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from provided.common import DATA_DIR, REPO_ROOT, ArgumentParser, fail, script

PROBLEMS = (1, 2, 3)
PAIRS = {"train": 4000, "val": 64, "test": 64}  # addition pairs per split (n4000 runs)
SEQUENCES = {"train": 256, "test": 64}  # offset sequences per split
FIXTURE = REPO_ROOT / "tests" / "fixtures" / "smiles_train.txt"
DATA_OF = {1: ("addition", "train.csv"), 2: ("offset", "train.npy")}  # what each one reads
TRACEBACK_FRAME = re.compile(r'^\s*File "(.+)", line (\d+), in (\S+)')


def tiny_data(problem: int, source: Path, out: Path) -> None:
    """The first rows of each split of the problem's real data (the SMILES test fixture
    for Problem 3) in out."""
    if problem == 1:
        (out / "addition").mkdir(parents=True, exist_ok=True)
        for split, n in PAIRS.items():
            lines = (source / "addition" / f"{split}.csv").read_text().splitlines()[: n + 1]
            (out / "addition" / f"{split}.csv").write_text("\n".join(lines) + "\n")
    elif problem == 2:
        (out / "offset").mkdir(parents=True, exist_ok=True)
        for split, n in SEQUENCES.items():
            np.save(out / "offset" / f"{split}.npy",
                    np.load(source / "offset" / f"{split}.npy")[:n])
    else:
        smiles = FIXTURE.read_text().split()
        (out / "smiles").mkdir(parents=True, exist_ok=True)
        (out / "smiles" / "train.txt").write_text("\n".join(smiles[:320]) + "\n")
        (out / "smiles" / "val.txt").write_text("\n".join(smiles[320:]) + "\n")


def missing_data(problem: int, source: Path) -> str | None:
    """One line saying how to make the problem's data, if it is not in source."""
    if problem not in DATA_OF:
        return None
    folder, name = DATA_OF[problem]
    if (source / folder / name).exists():
        return None
    return (f"no data: {source / folder / name} not found; run `python generate_datasets.py "
            f"--only {folder}` (or make data) first")


def steps(problem: int, data: Path, results: Path) -> list[list[str]]:
    """The problem's pipeline commands, each a python argv, in order."""
    out = results / f"problem{problem}"
    common = ["--data_dir", str(data), "--results_dir", str(out), "--device", "cpu",
              "--threads", "1"]
    figures = ["-m", "provided.visualize", f"problem{problem}", "--results_dir", str(out)]
    if problem == 1:
        return [
            *[["-m", "problem1.train", "--digit_order", order, "--train_size", "4000",
               "--steps", "20", *common] for order in ("forward", "reversed")],
            ["-m", "problem1.evaluate", "--quick", *common],
            figures,
        ]
    if problem == 2:
        return [
            *[["-m", "problem2.train", "--position", position, "--steps", "10", *common]
              for position in ("none", "learned", "sinusoidal", "rotary")],
            ["-m", "problem2.evaluate", *common],
            figures,
        ]
    p3_main = ["--norm", "pre", "--lr", "1e-3", "--warmup", "5", "--steps", "20",
               "--batch_size", "16"]
    return [
        ["-m", "problem3.train", *p3_main, "--checkpoint_every", "10", *common],
        *[["-m", "problem3.train", "--norm", norm, "--lr", "1e-2", "--steps", "10",
           "--batch_size", "16", *common] for norm in ("pre", "post")],
        ["-m", "problem3.sample", "--run", "pre_lr0.001_w5_s20", "--num_samples", "20",
         *common],
        ["-m", "problem3.evaluate", "--run", "pre_lr0.001_w5_s20", "--num_samples", "20",
         "--sweep_steps", "10", *common],
        figures,
    ]


def qualified_name(path: Path, line: int) -> str | None:
    """Class.method or function of the innermost definition holding line of path."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return None
    best = None

    def visit(node, prefix):
        nonlocal best
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                if child.lineno <= line <= (child.end_lineno or child.lineno):
                    if not isinstance(child, ast.ClassDef):
                        best = name
                    visit(child, f"{name}.")

    visit(tree, "")
    return best


def parts_table(readme: Path) -> dict[tuple[str, str], str]:
    """{(file, function): 'Part B, pytest -m p1b'} from the README's table of the parts
    (empty where there is none)."""
    try:
        text = readme.read_text(encoding="utf-8")
    except OSError:
        return {}
    table = {}
    for row in text.splitlines():
        cells = [cell.strip() for cell in row.strip().strip("|").split("|")]
        if len(cells) < 5 or not cells[0].isdigit():
            continue
        marker = re.search(r"pytest -m (p\d[a-z])", cells[4])
        where = f"Part {cells[1]}" + (f", pytest -m {marker.group(1)}" if marker else "")
        for file, functions in re.findall(r"`(problem\d/[\w/]+\.py)`: ([^;]+)", cells[3]):
            for function in re.findall(r"`([\w.]+)`", functions):
                table[file, function] = where
    return table


def unfinished_part(output: str, root: Path | None = None) -> str | None:
    """'problem1/dataset.py: AdditionDataset.__init__ (Part A, pytest -m p1a)' when output
    (a script's stderr) ends in a NotImplementedError raised in a file under root (default:
    the repository's root), the part from root's README.md; else None."""
    root = REPO_ROOT if root is None else root
    lines = [line for line in output.strip().splitlines() if line.strip()]
    if not lines or not lines[-1].startswith("NotImplementedError"):
        return None
    for line in reversed(lines):
        frame = TRACEBACK_FRAME.match(line)
        if frame is None:
            continue
        path = Path(frame.group(1))
        try:
            relative = path.resolve().relative_to(root.resolve()).as_posix()
        except (OSError, ValueError):
            continue  # torch's or Python's own frames
        name = qualified_name(path, int(frame.group(2))) or frame.group(3)
        part = parts_table(root / "README.md").get((relative, name))
        return f"{relative}: {name}" + (f" ({part})" if part else "")
    return None


def not_taken(problem: int) -> str | None:
    """Say (warning lines) which files of the problem folder the grader will not take, as
    `make submission` does; what fails the problem (data over the grader's limit, which
    code reading it would miss there), or None."""
    from provided.given import handout_code
    from provided.submission import not_taken as files_not_taken

    errors, warnings = files_not_taken(REPO_ROOT, handout_code(REPO_ROOT), (f"problem{problem}",))
    for line in warnings:
        print(f"warning: {line}", file=sys.stderr, flush=True)
    return "; ".join(errors) or None


def run_problem(problem: int, scratch: Path) -> str | None:
    """Run one problem's steps, one `ok` line each; None if every step passed, else what
    failed (its later steps are not run)."""
    missing = missing_data(problem, DATA_DIR) or not_taken(problem)
    if missing:
        return missing
    tiny_data(problem, DATA_DIR, scratch / "data")
    for argv in steps(problem, scratch / "data", scratch / "results"):
        begun = time.perf_counter()
        done = subprocess.run([sys.executable, *argv], cwd=REPO_ROOT, capture_output=True,
                              text=True)
        name = " ".join(argv[:next((i for i, a in enumerate(argv)
                                    if a in ("--data_dir", "--results_dir")), len(argv))])
        if done.returncode != 0:
            part = unfinished_part(done.stderr)
            if part:
                return (f"unfinished: {part} raises NotImplementedError (in `python {name}`); "
                        "the rest of the problem is skipped")
            tail = (done.stderr or done.stdout).strip().splitlines()[-15:]
            return (f"step `python {' '.join(argv)}` failed (exit {done.returncode}):\n"
                    + "\n".join(f"    {line}" for line in tail))
        print(f"ok    {time.perf_counter() - begun:5.1f} s  python {name}", flush=True)
    return None


@script
def main(argv=None) -> int:
    parser = ArgumentParser(__doc__)
    parser.add_argument("--problem", type=int, choices=PROBLEMS, action="append",
                        help="run this problem only (repeat it for more; default: all three)")
    parser.add_argument("--keep", type=Path, default=None,
                        help="work in this (new) folder and keep it")
    args = parser.parse_args(argv)
    problems = sorted(set(args.problem or PROBLEMS))
    if args.keep is not None and args.keep.exists():
        fail(f"--keep {args.keep} exists: give a new folder")
    scratch = args.keep or Path(tempfile.mkdtemp(prefix="smoke_"))
    start = time.perf_counter()
    failed = {}
    try:
        for problem in problems:
            print(f"problem {problem}", flush=True)
            failure = run_problem(problem, scratch)
            if failure:
                failed[problem] = failure
                print(f"FAILED problem {problem}: {failure}", file=sys.stderr, flush=True)
    finally:
        if args.keep is None:
            shutil.rmtree(scratch, ignore_errors=True)
    took = f"{time.perf_counter() - start:.0f} s"
    if not failed:
        which = ("the three problems" if len(problems) == 3
                 else "problem " + " and ".join(map(str, problems)))
        print(f"smoke run passed: every script of {which} in {took}")
        return 0
    passed = [str(p) for p in problems if p not in failed]
    print(f"smoke run failed: problem {', '.join(map(str, failed))} failed"
          + (f", problem {', '.join(passed)} passed" if passed else "") + f" ({took})",
          file=sys.stderr)
    return 1


if __name__ == "__main__":
    raise SystemExit(main())
