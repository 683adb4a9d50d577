"""The runtime every script shares: paths, command-line options, devices, seeding, errors.

Students: given; you need not read it. Your code may raise HomeworkError (or call fail())
for a one-line error, and use IGNORE_INDEX.

Every script in problem1/, problem2/ and problem3/ uses these, so that they all take the
same command-line options (--data_dir, --results_dir, --device, --seed, --threads) and end
the same way on bad input, Ctrl-C or a failing disk: one line, no traceback. How they write
and read results is provided/results.py. Every script has the same shape:

    @script
    def main(argv=None) -> int:
        args = parse_args(argv)
        ...
        return 0

    if __name__ == "__main__":
        raise SystemExit(main())

Each problem's prescribed runs are named once, in RUNS of problemN/config.py, and
`python -m problemN.config --list` prints them (registry_main below).
"""

import argparse
import errno
import functools
import inspect
import os
import random
import sys
import tempfile
from pathlib import Path
from typing import NoReturn

import numpy as np
import torch

REPO_ROOT = Path(__file__).resolve().parents[1]
DATA_DIR = REPO_ROOT / "data"
IGNORE_INDEX = -100  # a target with this id is not scored (cross-entropy's default)
EVAL_BATCH_SIZE = 1000  # sequences per forward pass when a script evaluates without gradients


def results_dir(problem: str) -> Path:
    """The committed results folder of a problem, e.g. results_dir('problem1')."""
    return REPO_ROOT / problem / "results"


class ArgumentParser(argparse.ArgumentParser):
    """argparse's parser with the script's docstring as its help, and a bad flag reported
    in one line (argparse's own error prints the whole usage first)."""

    def __init__(self, doc: str | None, **kwargs):
        super().__init__(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter,
                         **kwargs)

    def error(self, message: str) -> NoReturn:
        fail(f"{message} (see {self.prog} --help)")


def add_common_args(parser: argparse.ArgumentParser, problem: str) -> argparse.ArgumentParser:
    """Add --data_dir, --results_dir, --device, --seed and --threads to a script's parser."""
    parser.add_argument("--data_dir", type=Path, default=DATA_DIR,
                        help="the repository's data folder (default: %(default)s)")
    parser.add_argument("--results_dir", type=Path, default=results_dir(problem),
                        help="where logs, weights and metrics go (default: %(default)s)")
    parser.add_argument("--device", default="auto",
                        help="auto (cuda, then mps, then cpu), cpu, cuda, cuda:N or mps")
    parser.add_argument("--seed", type=seed_int, default=0,
                        help=f"random seed, 0 to {MAX_SEED} (default: 0)")
    parser.add_argument("--threads", type=positive_int, default=None,
                        help="CPU threads for torch, 1 or more (default: torch's own choice, "
                             "or $OMP_NUM_THREADS)")
    return parser


def positive_int(text: str) -> int:
    """argparse type: an integer of at least 1."""
    return _int_at_least(text, 1)


def non_negative_int(text: str) -> int:
    """argparse type: an integer of at least 0."""
    return _int_at_least(text, 0)


MAX_SEED = 2**32 - 1  # NumPy's seeds are 32-bit


def seed_int(text: str) -> int:
    """argparse type: a seed that Python, NumPy and torch all take, 0 to MAX_SEED."""
    value = _int_at_least(text, 0)
    if value > MAX_SEED:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_SEED}, not {value}")
    return value


def _int_at_least(text: str, low: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < low:
        raise argparse.ArgumentTypeError(f"must be at least {low}, not {value}")
    return value


def explicit_results_dir(args: argparse.Namespace, problem: str, reason: str) -> None:
    """HomeworkError if a run that is not the prescribed one (reason says why) would write
    into the committed results folder, where it would take a prescribed run's name."""
    if Path(args.results_dir).resolve() == results_dir(problem).resolve():
        raise HomeworkError(f"{reason} is not a prescribed run: give it its own --results_dir "
                            "(e.g. --results_dir /tmp/scratch) so that it cannot replace a real "
                            "run's files")


def setup(args: argparse.Namespace) -> torch.device:
    """Apply --threads and --seed, check that the results folder can be written, and return
    the device: everything a run needs before any work starts."""
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    seed_everything(args.seed)
    check_writable(Path(args.results_dir), "--results_dir")
    return resolve_device(args.device)


def check_writable(folder: Path, flag: str) -> None:
    """Create folder if needed and make sure a file can be written in it, or HomeworkError:
    a read-only or full results folder is found before training, not after."""
    if folder.exists() and not folder.is_dir():
        raise HomeworkError(f"{flag} {folder} is a file, not a folder: give a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as err:
        raise HomeworkError(f"{flag} {folder} cannot be written ({err.strerror or err}): "
                            "give a writable folder") from None


def resolve_device(name: str = "auto") -> torch.device:
    """'auto' picks cuda, then mps, then cpu; anything else is passed to torch.device
    (HomeworkError if it names no device, or one this machine does not have)."""
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    try:
        device = torch.device(name)
    except RuntimeError as err:
        raise HomeworkError(f"unknown --device {name!r} ({err}); use auto, cpu, cuda or "
                            "mps") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise HomeworkError("--device cuda asked for, but torch sees no CUDA GPU; use --device "
                            "auto or cpu")
    if device.type == "mps" and not torch.backends.mps.is_available():
        raise HomeworkError("--device mps asked for, but MPS is not available; use --device "
                            "auto or cpu")
    return device


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy and torch (all devices)."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


class HomeworkError(Exception):
    """Bad input that the user can fix: a missing, damaged or mismatched file, or a flag that
    does not fit. Its message is one line that names the file or flag and says what to do;
    @script prints it (exit 2) instead of a traceback."""


def fail(message: str, code: int = 2) -> NoReturn:
    """Stop a script with one clear line on stderr, no traceback."""
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(code)


INTERRUPTED = "interrupted: finished files are untouched; run the same command again"


def script(main=None, *, interrupted: str = INTERRUPTED):
    """Decorate a script's main(argv=None) -> int so that bad input (HomeworkError), Ctrl-C
    and a failing disk end in one line (exit 2, 130 and 1) instead of a traceback.
    `interrupted` is that line for Ctrl-C."""
    if main is None:
        return functools.partial(script, interrupted=interrupted)

    @functools.wraps(main)
    def wrapper(argv=None) -> int:
        check_same_repository(main)
        try:
            return main(argv)
        except HomeworkError as err:
            fail(str(err))
        except KeyboardInterrupt:
            fail(interrupted, code=130)
        except BrokenPipeError:  # `... | head`: the reader has stopped, which is no error
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no flush error
            raise SystemExit(1) from None
        except OSError as err:
            fail(os_error_message(err), code=1)
    return wrapper


def check_same_repository(main) -> None:
    """When main's file is the script being run, stop if it lies outside REPO_ROOT, the copy
    of the repository that `provided` was imported from. That happens with a virtual
    environment set up (`pip install -e .`) in another clone: the script would read and
    write that other clone's data and results."""
    script_file = Path(inspect.getfile(main)).resolve()
    if Path(sys.argv[0]).resolve() == script_file and REPO_ROOT not in script_file.parents:
        fail(f"{script_file} would run with the code, data and results of another copy of "
             f"this repository, {REPO_ROOT}, where its virtual environment was set up; run "
             "`pip install -e .` in this script's copy, or use an environment of its own")


def os_error_message(err: OSError) -> str:
    """One line for a failed file operation, naming the path and what to do."""
    where = err.filename or "a file"
    if err.errno == errno.ENOSPC:
        return f"the disk is full while writing {where}; free some space and run again " \
               "(the previous file, if any, is untouched)"
    if err.errno in (errno.EACCES, errno.EROFS, errno.EPERM):
        return f"{where} cannot be written ({err.strerror}); check its permissions"
    return f"{where}: {err.strerror or err}"


def registry_main(runs: dict[str, dict], groups: dict[str, list[str]] | None = None,
                  argv=None) -> int:
    """The command line of a problem's run registry, `python -m problemN.config`.

    runs maps each prescribed run's name to the train.py options that make it, e.g.
    {'forward_n1000': {'digit_order': 'forward', 'train_size': 1000}}; groups names subsets.

        --list [GROUP]     the names, one per line
        --flags NAME       the train.py flags of one run: --digit_order forward --train_size 1000
        --make PREFIX      all of it as Makefile variables: PREFIX_RUNS, PREFIX_<GROUP> and
                           PREFIX_FLAGS_<name> (the Makefile includes this, so that it never
                           parses a run's name back into flags)
    """
    groups = groups or {}

    @script
    def main(argv=None) -> int:
        parser = ArgumentParser(registry_main.__doc__.split("\n\n")[0])
        action = parser.add_mutually_exclusive_group(required=True)
        action.add_argument("--list", nargs="?", const="all", choices=["all", *groups],
                            metavar="GROUP")
        action.add_argument("--flags", choices=list(runs), metavar="NAME")
        action.add_argument("--make", metavar="PREFIX")
        args = parser.parse_args(argv)
        if args.list:
            lines = groups.get(args.list, list(runs))
        elif args.flags:
            lines = [run_flags(runs[args.flags])]
        else:
            lines = [f"{args.make}_RUNS := {' '.join(runs)}"]
            lines += [f"{args.make}_{group.upper()} := {' '.join(names)}"
                      for group, names in groups.items()]
            lines += [f"{args.make}_FLAGS_{name} := {run_flags(options)}"
                      for name, options in runs.items()]
        print("\n".join(lines))
        return 0
    return main(argv)


def run_flags(options: dict) -> str:
    """train.py's flags for a run's options: {'norm': 'pre', 'lr': 0.001} gives
    '--norm pre --lr 0.001'."""
    return " ".join(f"--{key} {value}" for key, value in options.items())


def missing_data_message(path: Path) -> str:
    return f"{path} not found: run `python generate_datasets.py` from the repository root first"
