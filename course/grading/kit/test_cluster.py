"""course/tools/cluster.py: the extra seeds as one submitit job per run. Its commands are
course/course.mk's seed rules (checked against `make -n`), its local executor writes what the
local command writes and skips a finished run, and bad input ends in one line."""

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from course.grading.kit.test_pipeline import dry_run, training_runs
from course.tools import cluster

pytestmark = pytest.mark.kit


@pytest.mark.skipif(shutil.which("make") is None, reason="needs GNU make")
def test_the_jobs_are_the_make_rules_commands(tmp_path):
    """Every seed run of `make seeds-problem1 seeds-problem2 seeds-problem3` (course.mk's
    SEEDS, the registry's runs and flags) is one planned run with the same command line
    (a dry run in a copy of the Makefiles, as test_pipeline.py does: nothing is touched)."""
    made = [shlex.split(line) for line in training_runs(dry_run(
        tmp_path, "THREADS=3", "DEVICE=cpu", "seeds-problem1", "seeds-problem2",
        "seeds-problem3"))]
    planned = [[f"{k}={v}" for k, v in run.env.items()] + list(run.argv)
               for run in cluster.plan(cluster.SEEDS, threads=3, device="cpu", python="python")]
    assert len(planned) == 4 * 23
    assert sorted(made) == sorted(planned)


def run_cluster(*args) -> int:
    return cluster.main(["seeds", *map(str, args)])


def test_local_executor_writes_what_the_local_command_writes_and_skips_it_again(
        tmp_path, data, capsys, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.environ.get("PYTHONPATH", ""))
    jobs_root, local_root = tmp_path / "cluster", tmp_path / "local"
    common = ["--only", "problem2/none", "--seeds", 1, "--device", "cpu", "--data_dir", data,
              "--train_args=--steps 10", "--folder", tmp_path / "submitit"]
    assert run_cluster("--executor", "local", "--root", jobs_root, *common) == 0
    assert "0 of 1 runs finished (skipped), 1 to run" in capsys.readouterr().out

    # course.mk's rule, by hand: the same flags, --seed, --results_dir and threads
    local_root.mkdir()
    subprocess.run([sys.executable, "-m", "problem2.train", "--position", "none", "--steps",
                    "10", "--seed", "1", "--results_dir", "problem2/results/seeds/seed1",
                    "--device", "cpu", "--threads", "1", "--data_dir", str(data)],
                   cwd=local_root, env={**os.environ, "OMP_NUM_THREADS": "1"}, check=True,
                   capture_output=True)
    seed_dir = Path("problem2/results/seeds/seed1")

    def files(root):
        return {p.relative_to(root).as_posix(): p.read_bytes()
                for p in root.rglob("*") if p.is_file()}
    assert files(jobs_root) == files(local_root)  # same names, same bytes
    assert set(files(jobs_root)) == {f"{seed_dir.as_posix()}/{name}"
                                     for name in ("training_log_none.json", "model_none.pth")}

    log = jobs_root / seed_dir / "training_log_none.json"
    before = log.stat().st_mtime_ns
    submitted = set((tmp_path / "submitit").iterdir())
    assert run_cluster("--executor", "local", "--root", jobs_root, *common) == 0
    assert "1 of 1 runs finished (skipped), 0 to run" in capsys.readouterr().out
    assert log.stat().st_mtime_ns == before
    assert set((tmp_path / "submitit").iterdir()) == submitted  # no job this time


def test_a_job_that_finds_its_target_does_nothing(tmp_path):
    run = cluster.plan([1], ["problem2/none"], tmp_path, python="false")[0]
    target = tmp_path / run.target
    target.parent.mkdir(parents=True)
    target.write_text("{}")
    assert cluster.TrainJob()(run).startswith("skipped problem2/seed1/none")


def test_the_dry_run_lists_every_run_longest_first(tmp_path, data, capsys):
    assert run_cluster("--executor", "slurm", "--dry-run", "--root", tmp_path / "r",
                       "--data_dir", data) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "0 of 92 runs finished (skipped), 92 to run"
    assert out[1].startswith("problem3/seed1/pre_lr0.001_w500_s4000  (90 min)")
    assert out[-1].startswith("problem2/seed4/rotary")


@pytest.mark.parametrize("argv, needle", [
    (["everything", "--executor", "local"], "invalid choice: 'everything'"),
    (["seeds", "--executor", "pbs"], "invalid choice: 'pbs'"),
    (["seeds", "--executor", "local", "--only", "problem2/relative"], "--only problem2/relative"),
    (["seeds", "--executor", "local", "--cpus-per-task", "0"], "--cpus-per-task"),
    (["seeds", "--executor", "local", "--seeds", "0", "1"], "--seeds 0"),
])
def test_bad_input_is_one_line(argv, needle, stops):
    code, _ = stops(cluster.main, argv, needle)
    assert code == 2


def test_missing_data_is_one_line(tmp_path, stops):
    code, _ = stops(cluster.main, ["seeds", "--executor", "local", "--data_dir", tmp_path,
                                   "--root", tmp_path], "make data")
    assert code == 2


def test_missing_submitit_is_one_line(stops, monkeypatch):
    monkeypatch.setattr(cluster, "submitit", None)
    code, _ = stops(cluster.main, ["seeds", "--executor", "slurm"],
                    "submitit is not installed", "course/requirements.txt")
    assert code == 2


def test_slurm_submits_one_batch_job_per_run_with_its_resources(tmp_path, data, capsys,
                                                                monkeypatch):
    """Without a cluster: stand-ins for srun and sbatch (which records each batch script)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "srun").write_text("#!/bin/sh\nexit 0\n")
    (bin_dir / "sbatch").write_text(
        f'#!/bin/sh\ncat "$1" >> {tmp_path}/scripts\n'
        f'n=$(ls {tmp_path} | wc -l); echo "Submitted batch job 10$n"\n'
        f'touch {tmp_path}/job$n\n')
    (bin_dir / "squeue").write_text("#!/bin/sh\necho seeds-problem1-s1-forward_n1000\n")
    for tool in ("srun", "sbatch", "squeue"):
        (bin_dir / tool).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("PYTHONPATH", os.environ.get("PYTHONPATH", ""))
    assert run_cluster("--executor", "slurm", "--only", "problem3/pre_lr0.001_w500_s4000",
                       "problem2/none", "problem1/forward_n1000", "--seeds", 1,
                       "--partition", "cpu",
                       "--cpus-per-task", 2, "--root", tmp_path / "root", "--data_dir", data,
                       "--folder", tmp_path / "submitit") == 0
    out = capsys.readouterr().out
    assert "1 of them queued or running on Slurm already (skipped), 2 to submit" in out
    assert "submitted 2 jobs" in out and "make seeds" in out
    scripts = (tmp_path / "scripts").read_text().split("#!/bin/bash")[1:]
    assert len(scripts) == 2
    for script, minutes in zip(scripts, (90, 5)):  # longest first
        for line in ("--cpus-per-task=2", "--partition=cpu", f"--time={minutes}",
                     "--mem=2GB", "--nodes=1"):
            assert f"#SBATCH {line}\n" in script, (line, script)


def test_no_slurm_is_one_line(tmp_path, stops, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no srun
    code, _ = stops(cluster.main, ["seeds", "--executor", "slurm", "--root", tmp_path / "r",
                                   "--folder", tmp_path / "f"], "--executor slurm", "srun")
    assert code == 2


def test_a_failed_job_is_one_line(tmp_path, data, stops, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.environ.get("PYTHONPATH", ""))
    code, _ = stops(cluster.main, ["seeds", "--executor", "local", "--only", "problem2/none",
                                   "--seeds", 1, "--data_dir", data, "--root", tmp_path / "r",
                                   "--train_args=--no_such_flag", "--folder", tmp_path / "f"],
                    "1 of 1 jobs failed", "problem2/seed1/none")
    assert code == 2


def test_wait_outlasts_an_earlier_submission_and_refuses_missing_logs(tmp_path, data, stops,
                                                                      monkeypatch):
    """A run queued by an earlier submission is not submitted again; --wait waits until squeue
    no longer shows it, and a run still without its log then stops `make seeds-cluster` before
    `make seeds` (which would train it here)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    # squeue shows the job twice, then no more
    (bin_dir / "squeue").write_text(
        f'#!/bin/sh\necho x >> {tmp_path}/looks\n'
        f'[ $(wc -l < {tmp_path}/looks) -le 2 ] && echo seeds-problem2-s1-none\nexit 0\n')
    (bin_dir / "squeue").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(cluster, "POLL_S", 0)
    code, _ = stops(cluster.main, ["seeds", "--executor", "slurm", "--wait", "--only",
                                   "problem2/none", "--seeds", 1, "--root", tmp_path / "r",
                                   "--data_dir", data],
                    "1 of 1 runs have no training log yet", "problem2/seed1/none")
    assert code == 2
    assert len((tmp_path / "looks").read_text().split()) == 3
