"""The extra seeds' training runs as one cluster job per run (Slurm, through submitit).

    python -m course.tools.cluster seeds --executor slurm [--partition P] [--cpus-per-task N]
        [--time MIN] [--mem-gb G] [--seeds 1 2 3 4] [--only problem3/pre_lr0.001_w500_s4000]
        [--wait] [--folder build/cluster]
    python -m course.tools.cluster seeds --executor local    # the same jobs on this machine

`make seeds` trains seeds 1-4 of every prescribed run with `make -jN` on one machine. This
submits the same training runs, one job each, with the same train.py command lines as
course/course.mk's seed rules: `OMP_NUM_THREADS=T python -m problemN.train <the run's flags>
--seed S --results_dir problemN/results/seeds/seedS --device D --threads T`, run from the
repository root, where T is --cpus-per-task (default 1, as the committed logs were made:
Problem 3's log records its threads). The runs come from each problem's run registry (RUNS in
problemN/config.py, with run_flags, exactly as build/runs.mk is made), never from a list here.

Resumable as the local runs: a run whose target (its training log, written together with its
weights) already exists is not submitted, nor one whose job squeue shows queued or running
(a second submission while the first is under way), and a job that finds it does nothing; an
interrupted Problem 3 run resumes from its last 250-step save when submitted again (train.py
does it), and a Problem 3 job that reaches its time limit is requeued by submitit and resumes
the same way. Jobs are submitted longest first (the 4,000-step runs, the sweep, Problem 1,
Problem 2) so that the long runs start first on a busy cluster.

The steps that need several runs (each seed folder's metrics.json, breakdown.json and
analysis.json, samples10k, the bands) are not jobs: once every job has finished, `make seeds`
on one machine skips every finished run and makes them (minutes). `make seeds-cluster` does
both and trains nothing on that machine: it submits, waits (--wait) and then makes each seed
folder's evaluations and the bands (`make seeds-problem1 seeds-problem2 seeds-problem3`, `make
bands`), not samples10k, which retrains seed 0's 4,000-step run where its weights are absent.

--executor local runs the jobs as local processes through submitit's LocalExecutor, at most
--max-jobs at a time (default: cores / --cpus-per-task); it always waits. The kit's test runs
it (course/grading/kit/test_cluster.py). submitit's logs and pickles go to --folder.

Instructors only (course/tools/): needs submitit (course/requirements.txt).
"""

import argparse
import os
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from problem1.config import RUNS as P1_RUNS
from problem2.config import RUNS as P2_RUNS
from problem3.config import MAIN_RUN as P3_MAIN
from problem3.config import RUNS as P3_RUNS
from provided.common import DATA_DIR, REPO_ROOT, ArgumentParser, HomeworkError, run_flags, script

try:
    import submitit
    _Checkpointable = submitit.helpers.Checkpointable
except ImportError:  # reported by main in one line; the module still imports
    submitit = None
    _Checkpointable = object

SEEDS = (1, 2, 3, 4)  # course/course.mk's SEEDS (the kit's test checks that they agree)
REGISTRIES = {"problem1": P1_RUNS, "problem2": P2_RUNS, "problem3": P3_RUNS}
# the data file each problem's seed rule waits for (order-only in course/course.mk)
DATA_FILES = {"problem1": "addition/train.csv", "problem2": "offset/train.npy",
              "problem3": "smiles/train.txt"}
# Default time limit per job in minutes: about twice the measured wall time of one run
# (course/README.md, "How long things take" and "The seeds behind the results points":
# Problem 1 140-143 s and about 2.5 min, Problem 2 16-18 s, a sweep run 13-20 min, the
# 4,000-step run 35-43 min, 45-50 min beside other work (INSTRUCTORS.md, "Reference bands"),
# one thread on a 2-core machine with another job beside it). Problem 3 resumes past a limit.
TIME_MIN = {"problem1": 10, "problem2": 5, "problem3": 45, P3_MAIN: 90}
POLL_S = 60  # --wait: seconds between two looks at squeue for an earlier submission's jobs
MEM_GB = 2  # default per job: measured peak RSS of one run 0.45-1.2 GB (INSTRUCTORS.md)


@dataclass(frozen=True)
class Run:
    """One training run of one seed: its command line, where it runs and what it writes."""
    problem: str
    run: str
    seed: int
    argv: tuple[str, ...]  # python -m problemN.train ...
    env: dict = field(hash=False)  # added to the job's environment (OMP_NUM_THREADS)
    cwd: str
    target: str  # the training log, the make rule's target

    @property
    def name(self) -> str:
        return f"{self.problem}/seed{self.seed}/{self.run}"

    @property
    def minutes(self) -> int:
        return TIME_MIN.get(self.run, TIME_MIN[self.problem])

    def command(self) -> str:
        """The command as make would print it (the python executable aside)."""
        env = " ".join(f"{k}={v}" for k, v in self.env.items())
        return f"{env} {shlex.join(self.argv)}"


class TrainJob(_Checkpointable):
    """The job: runs one Run's command unless its target exists. Checkpointable, so that
    submitit requeues a job that reaches its time limit (a Problem 3 run then resumes)."""

    def __call__(self, run: Run) -> str:
        target = Path(run.cwd, run.target)
        if target.exists():
            return f"skipped {run.name}: {run.target} exists"
        subprocess.run(run.argv, cwd=run.cwd, env={**os.environ, **run.env}, check=True)
        if not target.exists():
            raise RuntimeError(f"{run.name} ended without writing {run.target}")
        return f"done {run.name}: {run.target}"


def plan(seeds, only=(), root: Path = REPO_ROOT, data_dir: Path | None = None,
         threads: int = 1, device: str = "auto", python: str = sys.executable,
         extra: tuple[str, ...] = ()) -> list[Run]:
    """Every seed run of every registered run, longest first (the 4,000-step runs, the
    sweep, Problem 1, Problem 2); only: names "problemN/run" or "problemN" to keep.
    Paths are relative to root as in the Makefile's rules; extra flags (for tests only)
    go after the run's own."""
    known = {f"{problem}/{run}" for problem, runs in REGISTRIES.items() for run in runs}
    for name in only:
        if name not in known and name not in REGISTRIES:
            raise HomeworkError(f"--only {name}: not a registered run; give problemN or "
                                f"problemN/RUN, e.g. problem2/rotary (python -m "
                                f"problemN.config --list)")
    order = [("problem3", [P3_MAIN]), ("problem3", [r for r in P3_RUNS if r != P3_MAIN]),
             ("problem1", list(P1_RUNS)), ("problem2", list(P2_RUNS))]
    runs = []
    for problem, names in order:
        for run in names:
            if only and problem not in only and f"{problem}/{run}" not in only:
                continue
            for seed in seeds:
                folder = f"{problem}/results/seeds/seed{seed}"
                argv = (python, "-m", f"{problem}.train",
                        *run_flags(REGISTRIES[problem][run]).split(), *extra,
                        "--seed", str(seed), "--results_dir", folder,
                        "--device", device, "--threads", str(threads))
                if data_dir is not None:
                    argv += ("--data_dir", str(data_dir))
                runs.append(Run(problem, run, seed, argv, {"OMP_NUM_THREADS": str(threads)},
                                str(root), f"{folder}/training_log_{run}.json"))
    return runs


def executor_for(args, folder: Path):
    """submitit's executor, slurm or local, with the jobs' resources."""
    try:
        executor = submitit.AutoExecutor(folder=folder, cluster=args.executor)
    except RuntimeError as err:  # no srun here
        raise HomeworkError(f"--executor {args.executor}: {err}") from None
    params = {"cpus_per_task": args.cpus_per_task, "nodes": 1, "tasks_per_node": 1}
    if args.executor == "slurm":
        params["mem_gb"] = args.mem_gb
        if args.partition:
            params["slurm_partition"] = args.partition
        if args.account:
            params["slurm_account"] = args.account
    executor.update_parameters(**params)
    return executor


def job_name(what: str, run: Run) -> str:
    return f"{what}-{run.problem}-s{run.seed}-{run.run}"


def queued_on_slurm() -> set[str]:
    """The names of this user's Slurm jobs still queued or running (squeue), so that a second
    submission while the first is under way does not train the same run twice."""
    if shutil.which("squeue") is None:
        return set()
    done = subprocess.run(["squeue", "--me", "--noheader", "--format=%j"], capture_output=True,
                          text=True)
    if done.returncode != 0:
        raise HomeworkError(f"squeue failed (exit {done.returncode}): "
                            f"{(done.stderr.strip().splitlines() or [''])[-1]}")
    return set(done.stdout.split())


def submit(executor, runs: list[Run], time_min: int | None, name: str):
    """One job per run, in order; returns [(run, job)]."""
    jobs = []
    for run in runs:
        executor.update_parameters(timeout_min=time_min or run.minutes,
                                   name=job_name(name, run))
        jobs.append((run, executor.submit(TrainJob(), run)))
    return jobs


def wait(jobs) -> list[str]:
    """Wait for every job; the names of the failed ones (each failure printed in one line)."""
    failed = []
    for run, job in jobs:
        try:
            print(job.result(), flush=True)
        except Exception as err:  # a failed job: the last line of its stderr
            lines = [line for line in (job.stderr() or "").splitlines() if line.strip()]
            print(f"failed {run.name} (job {job.job_id}, {job.paths.stderr}): "
                  f"{(lines or [type(err).__name__])[-1].strip()}", file=sys.stderr, flush=True)
            failed.append(run.name)
    return failed


def run_local(executor, runs, time_min, name, max_jobs: int) -> list[str]:
    """The local executor starts every job at once: here at most max_jobs run at a time."""
    pending, running, failed = list(runs), [], []
    while pending or running:
        while pending and len(running) < max_jobs:
            running += submit(executor, [pending.pop(0)], time_min, name)
        done = [pair for pair in running if pair[1].done()]
        if not done:
            time.sleep(0.2)
            continue
        running = [pair for pair in running if pair not in done]
        failed += wait(done)
    return failed


@script
def main(argv=None) -> int:
    parser = ArgumentParser(__doc__)
    parser.add_argument("what", choices=["seeds"],
                        help="the run set: seeds, the extra seeds of every prescribed run")
    parser.add_argument("--executor", choices=["slurm", "local"], required=True)
    parser.add_argument("--partition", default=None, help="Slurm partition")
    parser.add_argument("--account", default=None, help="Slurm account")
    parser.add_argument("--cpus-per-task", type=int, default=1,
                        help="cores per job, also its torch threads (default 1, as the "
                             "committed logs)")
    parser.add_argument("--time", type=int, default=None, metavar="MIN",
                        help="time limit of every job in minutes (default: per problem, "
                             "about twice the measured time: "
                             + ", ".join(f"{k} {v}" for k, v in TIME_MIN.items()) + ")")
    parser.add_argument("--mem-gb", type=float, default=MEM_GB,
                        help=f"memory per job (Slurm; default {MEM_GB})")
    parser.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS))
    parser.add_argument("--only", nargs="+", default=[], metavar="RUN",
                        help="only these: problemN or problemN/RUN")
    parser.add_argument("--device", default="auto", help="train.py's --device (default auto)")
    parser.add_argument("--wait", action="store_true",
                        help="wait for every job (local always waits)")
    parser.add_argument("--max-jobs", type=int, default=None,
                        help="local: jobs at a time (default: cores / --cpus-per-task)")
    parser.add_argument("--folder", type=Path, default=Path("build/cluster"),
                        help="submitit's logs and pickles (default build/cluster)")
    parser.add_argument("--dry-run", action="store_true",
                        help="print the runs that would be submitted, submit nothing")
    # for tests: another root for the results, another data folder, extra train.py flags
    parser.add_argument("--root", type=Path, default=REPO_ROOT, help=argparse.SUPPRESS)
    parser.add_argument("--data_dir", type=Path, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--train_args", default="", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.cpus_per_task < 1 or (args.time is not None and args.time < 1):
        raise HomeworkError("--cpus-per-task and --time must be at least 1")
    if min(args.seeds) < 1:
        raise HomeworkError(f"--seeds {min(args.seeds)}: the extra seeds are 1 or more (seed 0 "
                            "is the committed run itself, `make all`)")
    if submitit is None and not args.dry_run:
        raise HomeworkError("submitit is not installed: pip install -r course/requirements.txt")
    root = args.root.resolve()
    runs = plan(args.seeds, args.only, root, args.data_dir and args.data_dir.resolve(),
                args.cpus_per_task, args.device, extra=tuple(shlex.split(args.train_args)))
    data = (args.data_dir or DATA_DIR).resolve()
    for problem in sorted({run.problem for run in runs}):
        if not (data / DATA_FILES[problem]).exists():
            raise HomeworkError(f"{data / DATA_FILES[problem]} not found: run `make data` "
                                "first (the jobs read the data from there)")
    todo = [run for run in runs if not Path(run.cwd, run.target).exists()]
    print(f"{len(runs) - len(todo)} of {len(runs)} runs finished (skipped), "
          f"{len(todo)} to run", flush=True)
    elsewhere = set()  # job names of earlier submissions still queued or running
    if args.executor == "slurm" and not args.dry_run:
        queued = queued_on_slurm()
        elsewhere = {job_name(args.what, run) for run in todo} & queued
        if elsewhere:
            todo = [run for run in todo if job_name(args.what, run) not in queued]
            print(f"{len(elsewhere)} of them queued or running on Slurm already (skipped), "
                  f"{len(todo)} to submit")
    if args.dry_run:
        for run in todo:
            print(f"{run.name}  ({run.minutes} min)  {run.command()}")
        return 0
    failed = []
    if todo:
        root.mkdir(parents=True, exist_ok=True)  # the jobs' working folder
        # the job's interpreter unpickles TrainJob from this repository's course/ package
        os.environ["PYTHONPATH"] = os.pathsep.join(
            [str(REPO_ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
        executor = executor_for(args, args.folder.resolve())
        if args.executor == "local":
            max_jobs = args.max_jobs or max(1, (os.cpu_count() or 1) // args.cpus_per_task)
            failed = run_local(executor, todo, args.time, args.what, max_jobs)
        else:
            jobs = submit(executor, todo, args.time, args.what)
            print(f"submitted {len(jobs)} jobs: {jobs[0][1].job_id} ... {jobs[-1][1].job_id} "
                  f"(logs in {args.folder})", flush=True)
            if args.wait:
                failed = wait(jobs)
    if args.executor == "slurm" and not args.wait:
        print("when they have finished: make seeds (the folders' metrics, analyses and the "
              "bands; every finished run is skipped)")
        return 0
    while elsewhere and elsewhere & queued_on_slurm():  # the earlier submission's jobs
        time.sleep(POLL_S)
    if failed:
        raise HomeworkError(f"{len(failed)} of {len(todo)} jobs failed ({failed[0]} first; "
                            f"logs in {args.folder}): submit again to redo only those")
    missing = [run for run in runs if not Path(run.cwd, run.target).exists()]
    if missing:  # so that `make seeds` afterwards does not train them here
        raise HomeworkError(f"{len(missing)} of {len(runs)} runs have no training log yet "
                            f"({missing[0].name} first): submit again")
    print(f"all {len(runs)} runs done; next: make seeds (skips every finished run)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
