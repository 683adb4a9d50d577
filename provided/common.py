"""Helpers shared by every problem's scripts: paths, devices, seeding, safe result files.

Students: given; you need not read it. Your code may use fail() for a one-line error, and
IGNORE_INDEX.

Every script in problem1/, problem2/ and problem3/ uses these, so that they all take the
same command-line options (--data_dir, --results_dir, --device, --seed, --threads), end
the same way on bad input or Ctrl-C (one line, no traceback), and write results the same
way: strict JSON (a non-finite number becomes null) and checkpoints that carry the
configuration that built them, each written to a temporary file first and then renamed, so
that an interrupted run never leaves a half-written result behind.

Every script has the same shape:

    @script
    def main(argv=None) -> int:
        args = parse_args(argv)
        ...
        return 0

    if __name__ == "__main__":
        raise SystemExit(main())
"""

import argparse
import dataclasses
import errno
import functools
import hashlib
import inspect
import io
import json
import math
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
    """Stop if a run that is not the prescribed one (reason says why) would write into the
    committed results folder, where it would take a prescribed run's name."""
    if Path(args.results_dir).resolve() == results_dir(problem).resolve():
        fail(f"{reason} is not a prescribed run: give it its own --results_dir "
             "(e.g. --results_dir /tmp/scratch) so that it cannot replace a real run's files")


def setup(args: argparse.Namespace) -> torch.device:
    """Apply --threads and --seed, check that the results folder can be written, and return
    the device: everything a run needs before any work starts."""
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    seed_everything(args.seed)
    check_writable(Path(args.results_dir), "--results_dir")
    return resolve_device(args.device)


def check_writable(folder: Path, flag: str) -> None:
    """Create folder if needed and make sure a file can be written in it, or stop with one
    line: a read-only or full results folder is found before training, not after."""
    if folder.exists() and not folder.is_dir():
        fail(f"{flag} {folder} is a file, not a folder: give a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as err:
        fail(f"{flag} {folder} cannot be written ({err.strerror or err}): "
             "give a writable folder")


def resolve_device(name: str = "auto") -> torch.device:
    """'auto' picks cuda, then mps, then cpu; anything else is passed to torch.device."""
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    try:
        device = torch.device(name)
    except RuntimeError as err:
        fail(f"unknown --device {name!r} ({err}); use auto, cpu, cuda or mps")
    if device.type == "cuda" and not torch.cuda.is_available():
        fail("--device cuda asked for, but torch sees no CUDA GPU; use --device auto or cpu")
    if device.type == "mps" and not torch.backends.mps.is_available():
        fail("--device mps asked for, but MPS is not available; use --device auto or cpu")
    return device


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy and torch (all devices)."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def fail(message: str, code: int = 2) -> NoReturn:
    """Stop a script with one clear line on stderr, no traceback."""
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(code)


INTERRUPTED = "interrupted: finished files are untouched; run the same command again"


def script(main=None, *, interrupted: str = INTERRUPTED):
    """Decorate a script's main(argv=None) -> int so that Ctrl-C and a failing disk end in
    one line (exit 130 and 1) instead of a traceback. `interrupted` is that line for Ctrl-C."""
    if main is None:
        return functools.partial(script, interrupted=interrupted)

    @functools.wraps(main)
    def wrapper(argv=None) -> int:
        check_same_repository(main)
        try:
            return main(argv)
        except KeyboardInterrupt:
            fail(interrupted, code=130)
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


def missing_data_message(path: Path) -> str:
    return f"{path} not found: run `python generate_datasets.py` from the repository root first"


def signature_defaults(callable_) -> dict:
    """{parameter: default} of a function or class constructor (the parameters that have one),
    so that a config can take a model's defaults from its signature instead of a copy."""
    return {name: p.default for name, p in inspect.signature(callable_).parameters.items()
            if p.default is not inspect.Parameter.empty}


def file_fingerprint(path: Path) -> dict:
    """{'name', 'bytes', 'sha1'} of a data file: what a resumed run compares."""
    path = Path(path)
    return {"name": path.name, "bytes": path.stat().st_size,
            "sha1": hashlib.sha1(path.read_bytes()).hexdigest()}


def to_strict_json(obj):
    """Recursively replace non-finite floats with None and tensors/arrays with lists."""
    if isinstance(obj, dict):
        return {str(k): to_strict_json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_strict_json(v) for v in obj]
    if isinstance(obj, (torch.Tensor, np.ndarray)):
        return to_strict_json(obj.tolist())
    if isinstance(obj, (np.floating, np.integer, np.bool_)):
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, Path):
        return str(obj)
    return obj


def atomic_write_text(path: Path, text: str) -> None:
    """Write text to a temporary file beside path, then rename it into place."""
    write_results({path: text.encode()})


def name_the_file(err: BaseException, path: Path) -> None:
    """Give an OSError without a file name (a failed write: a full disk) the name of the
    result it was writing, so that its one line says which file was not written."""
    if isinstance(err, OSError) and err.filename is None:
        err.filename = str(path)


def write_json(path: Path, obj) -> None:
    """Strict JSON (no NaN/Infinity), indented, written atomically."""
    write_results({path: json_bytes(obj)})


class BadFileError(ValueError):
    """A results file that exists but cannot be used (corrupt, truncated, unfinished)."""


def read_json(path: Path):
    """The JSON in path; BadFileError naming the file if it is not valid JSON."""
    path = Path(path)
    try:
        with open(path) as f:
            return json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise BadFileError(f"{path} is not valid JSON ({err}): delete it and re-run the "
                           "step that writes it") from None


def unfinished(path: Path) -> Path:
    """Where a run keeps a result while it runs: training_log_x.json -> training_log_x.partial.json.
    It takes its real name only once the run has finished, so that a killed run never
    replaces a finished result (and figures never read a partial one)."""
    path = Path(path)
    return path.with_name(f"{path.stem}.partial{path.suffix}")


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write bytes to a temporary file beside path, then rename it into place."""
    write_results({path: data})


def save_checkpoint(path: Path, config, model: torch.nn.Module, **extra) -> None:
    """{'config': the run's config as a dict, 'model': the state dict, **extra}, atomically:
    the checkpoint alone rebuilds the model, no run name is parsed."""
    write_results({path: checkpoint_bytes(config, model, **extra)})


def json_bytes(obj) -> bytes:
    """What write_json writes, as bytes (for write_results)."""
    return (json.dumps(to_strict_json(obj), indent=2, allow_nan=False) + "\n").encode()


def checkpoint_bytes(config, model: torch.nn.Module, **extra) -> bytes:
    """What save_checkpoint writes, as bytes (for write_results). Saved through memory, so
    that the same weights always give the same bytes (torch.save to a file records the
    temporary file's name)."""
    if dataclasses.is_dataclass(config):
        config = dataclasses.asdict(config)
    buffer = io.BytesIO()
    torch.save({"config": config, "model": model.state_dict(), **extra}, buffer)
    return buffer.getvalue()


def write_results(files: dict) -> None:
    """Write the results of one run ({path: bytes}, e.g. its log and its weights) together:
    every file to a temporary file beside it first, and only then all renamed into place, so
    that a failure while writing (a full disk, Ctrl-C) leaves every previous file as it was
    and a new log never sits beside the previous run's weights."""
    staged, path = [], None
    try:
        for path, data in files.items():
            path = Path(path)
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
            staged.append((tmp, path))
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.chmod(tmp, 0o644)  # mkstemp's files are owner-only
        for tmp, path in staged:  # renames: they do not fail for want of space
            os.replace(tmp, path)
    except BaseException as err:
        for tmp, _ in staged:
            Path(tmp).unlink(missing_ok=True)
        name_the_file(err, path)
        raise


def load_checkpoint(path: Path, device, trusted: bool = False) -> dict:
    """A checkpoint written by save_checkpoint (or a resume file, with trusted=True).

    FileNotFoundError if it is missing; BadFileError naming the file if it is truncated,
    corrupt, or not a checkpoint of this repository.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path} not found: train that run first (see the README)")
    try:
        checkpoint = torch.load(path, map_location=device, weights_only=not trusted)
    except Exception as err:  # torch raises many kinds for a damaged zip archive
        raise BadFileError(f"{path} is truncated or corrupt ({type(err).__name__}): delete "
                           "it and re-run the step that writes it") from None
    if not isinstance(checkpoint, dict) or not {"config", "model"} <= checkpoint.keys():
        raise BadFileError(f"{path} is not a checkpoint of this repository (no config): "
                           "delete it and re-run the step that writes it")
    return checkpoint


def config_from_checkpoint(config_class, checkpoint: dict, path: Path):
    """The config_class instance saved in checkpoint, or BadFileError naming path."""
    try:
        return config_class(**checkpoint["config"])
    except TypeError as err:
        raise BadFileError(f"{path} holds another kind of run's config ({err}): delete it "
                           "and re-run") from None


def load_state(model: torch.nn.Module, checkpoint: dict, path: Path) -> torch.nn.Module:
    """model.load_state_dict(checkpoint['model']), with BadFileError naming path on a
    mismatch (weights of another model)."""
    try:
        model.load_state_dict(checkpoint["model"])
    except (RuntimeError, KeyError, TypeError) as err:
        raise BadFileError(f"{path} does not hold weights of this model "
                           f"({str(err).splitlines()[0]}): delete it and re-run") from None
    return model
