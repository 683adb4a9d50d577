"""The Makefile: what `make all` runs, in which order, with how many threads per job.

Dry runs only (`make -n`) in a temporary copy of the Makefile: nothing trains.
"""

import functools
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from provided.common import REPO_ROOT

pytestmark = [pytest.mark.kit,
              pytest.mark.skipif(shutil.which("make") is None, reason="needs GNU make")]


@functools.cache
def run_registry() -> str:
    """The Makefile's build/runs.mk, made once from the three run registries (three Python
    starts), instead of once per dry run."""
    return "".join(subprocess.run([sys.executable, "-m", f"problem{n}.config", "--make", f"P{n}"],
                                  capture_output=True, text=True, check=True).stdout
                   for n in (1, 2, 3))


def copy_makefile(tmp_path: Path) -> None:
    """Both Makefiles and the run registry in tmp_path (no config.py there: never remade)."""
    shutil.copy(REPO_ROOT / "Makefile", tmp_path / "Makefile")
    (tmp_path / "course").mkdir(exist_ok=True)
    shutil.copy(REPO_ROOT / "course" / "course.mk", tmp_path / "course" / "course.mk")
    (tmp_path / "build").mkdir(exist_ok=True)
    (tmp_path / "build" / "runs.mk").write_text(run_registry())


def dry_run(tmp_path: Path, *args: str) -> list[str]:
    """The commands `make -n ARGS` would run (the root Makefile with the course's targets
    it includes), one string each (continuation lines joined)."""
    copy_makefile(tmp_path)
    out = subprocess.run(["make", "--no-print-directory", "-n", *args],
                         cwd=tmp_path, capture_output=True, text=True, check=True).stdout
    joined = re.sub(r"\\\n\s*", "", out)
    command = re.compile(r"(OMP_NUM_THREADS=\d+ )?python ")
    return [line for line in joined.splitlines() if command.match(line)]


def training_runs(commands: list[str]) -> list[str]:
    return [c for c in commands if re.search(r"-m problem\d\.train ", c)]


def test_make_all_runs_every_prescribed_run_once_data_first_problem3_first(tmp_path):
    commands = dry_run(tmp_path, "all", "-j2", "NPROC=2")
    runs = training_runs(commands)
    assert len(runs) == len(set(runs)) == 23
    p1 = [re.search(r"--digit_order (\w+) --train_size (\d+)", c).groups()
          for c in runs if "problem1" in c]
    assert sorted(p1) == sorted((order, n) for order in ("forward", "reversed")
                                for n in ("1000", "2000", "4000"))
    p2 = [re.search(r"--position (\w+)", c).group(1) for c in runs if "problem2" in c]
    assert sorted(p2) == ["learned", "none", "rotary", "sinusoidal"]
    p3 = [re.search(r"--norm (\w+) --lr ([\de.-]+) --warmup (\d+) --steps (\d+)", c).groups()
          for c in runs if "problem3" in c]
    assert p3[0] == ("pre", "0.001", "500", "4000")  # the long run starts first
    assert sorted(p3[1:]) == sorted((norm, lr, w, "1500") for norm in ("pre", "post")
                                    for lr in ("0.001", "0.01", "0.03") for w in ("0", "500"))
    # the data before any run, Problem 3's runs before the short jobs of Problems 1 and 2
    assert all("generate_datasets.py" in c for c in commands[:3])
    assert all("problem3" in c for c in runs[:13])
    for script in ("problem1.evaluate", "problem2.evaluate", "problem3.evaluate",
                   "problem3.sample", "visualize.py problem1", "visualize.py problem2",
                   "visualize.py problem3"):
        assert sum(script in c for c in commands) == 1, script


@pytest.mark.parametrize("args, threads", [
    (("-j2", "NPROC=2"), 1),     # two jobs on two cores: one thread each
    (("-j4", "NPROC=8"), 2),
    (("NPROC=2",), 2),           # one job at a time takes every core
    (("-j4", "NPROC=2"), 1),     # never fewer than one
    (("-j2", "NPROC=8", "THREADS=3"), 3),
])
def test_threads_per_job_share_the_cores_among_the_jobs(tmp_path, args, threads):
    runs = training_runs(dry_run(tmp_path, "all", *args))
    assert runs and all(c.startswith(f"OMP_NUM_THREADS={threads} ") for c in runs)
    assert all(c.endswith(f"--threads {threads}") for c in runs)


def test_clean_results_keeps_data_reports_and_figures(tmp_path):
    kept = ["data/smiles/train.txt", "problem3/REPORT.md", "problem3/results/figures/a.png",
            "problem3/results/samples_x.txt"]
    removed = ["problem1/results/model_forward_n1000.pth", "problem3/results/resume_x.pth",
               "problem2/results/training_log_none.json", "problem3/results/metrics.json"]
    for name in kept + removed:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x")
    copy_makefile(tmp_path)
    subprocess.run(["make", "clean-results"], cwd=tmp_path, capture_output=True, check=True)
    assert all((tmp_path / name).exists() for name in kept)
    assert not any((tmp_path / name).exists() for name in removed)


def test_make_seeds_trains_what_is_missing_and_skips_finished_logs(tmp_path):
    commands = dry_run(tmp_path, "seeds-problem1", "seeds-problem2", "NPROC=2")
    runs = training_runs(commands)
    assert len(runs) == 4 * (6 + 4)
    assert all(re.search(r"--seed [1-4] --results_dir problem\d/results/seeds/seed[1-4]", c)
               for c in runs)
    for tool in ("problem1_seed_metrics", "problem1_breakdown"):  # the course's, per seed
        assert sorted(re.search(r"seed(\d)", c).group(1) for c in commands
                      if f"-m course.tools.{tool} " in c) == ["1", "2", "3", "4"], tool
    # a finished seed folder (logs, metrics and breakdown committed, no weights): nothing to do
    seed1 = tmp_path / "problem1/results/seeds/seed1"
    for order in ("forward", "reversed"):
        for n in (1000, 2000, 4000):
            log = seed1 / f"training_log_{order}_n{n}.json"
            log.parent.mkdir(parents=True, exist_ok=True)
            log.write_text("{}")
    for name in ("metrics.json", "breakdown.json"):
        (seed1 / name).write_text("{}")
    commands = dry_run(tmp_path, "seeds-problem1", "NPROC=2")
    assert len(training_runs(commands)) == 3 * 6 and not any("seed1" in c for c in commands)


def test_problem1_breakdown_trains_the_six_runs_then_counts_seed_0s_errors(tmp_path):
    commands = dry_run(tmp_path, "problem1-breakdown", "NPROC=2")
    assert len(training_runs(commands)) == 6
    assert commands[-1].endswith("-m course.tools.problem1_breakdown --device auto --threads 2")


@pytest.mark.parametrize("cleaned", [False, True])
def test_make_all_reruns_everything_in_a_fresh_clone(tmp_path, cleaned):
    """A fresh clone has the committed logs, metrics and figures but no weights; with
    `make clean-results` the logs and metrics go too. Either way `make all` redoes all runs."""
    committed = ["data/addition/train.csv", "data/offset/train.npy", "data/smiles/train.txt",
                 "data/figures/carries.png",
                 "problem1/results/figures/pruning.png",
                 "problem2/results/figures/accuracy_by_bucket.png",
                 "problem3/results/figures/sweep_grid.png",
                 "problem3/results/samples_pre_lr0.001_w500_s4000.txt"]
    if not cleaned:
        committed += [f"problem{n}/results/metrics.json" for n in (1, 2, 3)]
    for name in committed:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x")
    commands = dry_run(tmp_path, "all", "-j2", "NPROC=2")
    assert len(training_runs(commands)) == 23
    assert sum("visualize.py problem" in c for c in commands) == 3


def test_the_makefile_makes_its_run_registry_from_the_problems_configs(tmp_path):
    shutil.copy(REPO_ROOT / "Makefile", tmp_path / "Makefile")
    out = subprocess.run(["make", "--no-print-directory", "-n", "problem2"], cwd=tmp_path,
                         capture_output=True, text=True, check=True).stdout
    assert (tmp_path / "build" / "runs.mk").read_text() == run_registry()
    assert "-m problem2.train --position rotary " in out


def test_problem2_analysis_follows_each_folders_metrics(tmp_path):
    """course/tools/problem2_analysis.py writes each folder's analysis.json after that folder's
    metrics.json (seed 0 with problem2-analysis, then its figure; seeds 1-4 with
    seeds-problem2), and leaves a finished seed folder alone."""
    commands = dry_run(tmp_path, "problem2-analysis", "seeds-problem2", "NPROC=2")

    def place(script: str, folder: str | None) -> int:
        """Index of the command running script on folder (None: the default folder)."""
        return next(i for i, c in enumerate(commands) if f"-m {script} " in f"{c} " and (
            f"--results_dir {folder} " in c if folder else "--results_dir" not in c))

    assert sum("-m course.tools.problem2_analysis " in c for c in commands) == 5
    for folder in [None] + [f"problem2/results/seeds/seed{s}" for s in (1, 2, 3, 4)]:
        assert place("problem2.evaluate", folder) < place("course.tools.problem2_analysis",
                                                          folder)
    assert place("course.tools.problem2_analysis", None) < place("course.tools.problem2_figures",
                                                                 None)
    seed1 = tmp_path / "problem2/results/seeds/seed1"
    seed1.mkdir(parents=True)
    for name in [f"training_log_{p}.json" for p in ("none", "learned", "sinusoidal", "rotary")]:
        (seed1 / name).write_text("{}")
    (seed1 / "metrics.json").write_text("{}")
    assert any("seed1" in c for c in dry_run(tmp_path, "seeds-problem2", "NPROC=2"))
    (seed1 / "analysis.json").write_text("{}")
    assert not any("seed1" in c for c in dry_run(tmp_path, "seeds-problem2", "NPROC=2"))
