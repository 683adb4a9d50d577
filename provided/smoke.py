"""Run every script of every problem, in pipeline order, on tiny settings (`make smoke`).

Students: given; a course tool (make smoke), you need not read it.

    python -m provided.smoke [--keep DIR]

A check that the whole pipeline works before the long job: tiny datasets cut from data/
(or from tests/fixtures for the molecules), a few training steps, and every train,
evaluate, sample and figure step, all inside a scratch folder (deleted afterwards unless
--keep names one). Committed results are never touched. The numbers mean nothing.
"""

import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from provided.common import DATA_DIR, REPO_ROOT, ArgumentParser, fail, script

PAIRS = {"train": 4000, "val": 64, "test": 64}  # addition pairs per split (n4000 runs)
SEQUENCES = {"train": 256, "test": 64}  # offset sequences per split
FIXTURE = REPO_ROOT / "tests" / "fixtures" / "smiles_train.txt"


def tiny_data(source: Path, out: Path) -> None:
    """The first rows of each split of the real data, and the SMILES test fixture."""
    for split, n in PAIRS.items():
        lines = (source / "addition" / f"{split}.csv").read_text().splitlines()[: n + 1]
        (out / "addition").mkdir(parents=True, exist_ok=True)
        (out / "addition" / f"{split}.csv").write_text("\n".join(lines) + "\n")
    for split, n in SEQUENCES.items():
        (out / "offset").mkdir(parents=True, exist_ok=True)
        np.save(out / "offset" / f"{split}.npy", np.load(source / "offset" / f"{split}.npy")[:n])
    smiles = FIXTURE.read_text().split()
    (out / "smiles").mkdir(parents=True, exist_ok=True)
    (out / "smiles" / "train.txt").write_text("\n".join(smiles[:320]) + "\n")
    (out / "smiles" / "val.txt").write_text("\n".join(smiles[320:]) + "\n")


def steps(data: Path, results: Path) -> list[list[str]]:
    """The pipeline's commands, each a python argv, in order."""
    def common(problem: str) -> list[str]:
        return ["--data_dir", str(data), "--results_dir", str(results / problem),
                "--device", "cpu", "--threads", "1"]

    def figures(problem: str) -> list[str]:
        return ["provided/visualize.py", problem, "--input_dir", str(results / problem),
                "--out_dir", str(results / problem / "figures")]

    p3_main = ["--norm", "pre", "--lr", "1e-3", "--warmup", "5", "--steps", "20",
               "--batch_size", "16"]
    return [
        *[["-m", "problem1.train", "--digit_order", order, "--train_size", "4000",
           "--steps", "20", *common("problem1")] for order in ("forward", "reversed")],
        ["-m", "problem1.evaluate", *common("problem1")],
        figures("problem1"),
        *[["-m", "problem2.train", "--position", position, "--steps", "10", *common("problem2")]
          for position in ("none", "learned", "sinusoidal", "rotary")],
        ["-m", "problem2.evaluate", *common("problem2")],
        figures("problem2"),
        ["-m", "problem3.train", *p3_main, "--checkpoint_every", "10", *common("problem3")],
        *[["-m", "problem3.train", "--norm", norm, "--lr", "1e-2", "--steps", "10",
           "--batch_size", "16", *common("problem3")] for norm in ("pre", "post")],
        ["-m", "problem3.sample", "--run", "pre_lr0.001_w5_s20", "--num_samples", "20",
         *common("problem3")],
        ["-m", "problem3.evaluate", "--run", "pre_lr0.001_w5_s20", "--num_samples", "20",
         "--sweep_steps", "10", *common("problem3")],
        figures("problem3"),
    ]


@script
def main(argv=None) -> int:
    parser = ArgumentParser(__doc__)
    parser.add_argument("--keep", type=Path, default=None,
                        help="work in this (new) folder and keep it")
    args = parser.parse_args(argv)
    if not (DATA_DIR / "addition" / "train.csv").exists():
        fail(f"{DATA_DIR} has no data: run `python generate_datasets.py` (or make data) first")
    if args.keep is not None and args.keep.exists():
        fail(f"--keep {args.keep} exists: give a new folder")
    scratch = args.keep or Path(tempfile.mkdtemp(prefix="smoke_"))
    tiny_data(DATA_DIR, scratch / "data")
    start = time.perf_counter()
    try:
        for argv_ in steps(scratch / "data", scratch / "results"):
            begun = time.perf_counter()
            done = subprocess.run([sys.executable, *argv_], cwd=REPO_ROOT,
                                  capture_output=True, text=True)
            name = " ".join(argv_[:2])
            if done.returncode != 0:
                tail = (done.stderr or done.stdout).strip().splitlines()[-15:]
                fail(f"smoke step `python {' '.join(argv_)}` failed (exit "
                     f"{done.returncode}):\n" + "\n".join(tail))
            print(f"ok  {time.perf_counter() - begun:5.1f} s  python {name}", flush=True)
    finally:
        if args.keep is None:
            shutil.rmtree(scratch, ignore_errors=True)
    print(f"smoke run passed: every script of the three problems in "
          f"{time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
