"""Results and checkpoints: how every script writes and reads what a run produces.

Students: given; you need not read it.

Results are strict JSON (a non-finite number becomes null), and a checkpoint carries the
configuration that built it. Every file is written to a temporary file beside it first and
then renamed into place, and the files of one run (its log and its weights) are renamed
together, so an interrupted run never leaves a half-written or mismatched result behind. A
file that exists but cannot be used raises BadFileError, whose message names the file and
says what to do.
"""

import dataclasses
import hashlib
import io
import json
import math
import os
import tempfile
from pathlib import Path

import numpy as np
import torch

from provided.common import HomeworkError


class BadFileError(HomeworkError, ValueError):
    """A results file that exists but cannot be used (corrupt, truncated, unfinished)."""


class MissingFileError(HomeworkError, FileNotFoundError):
    """A result that a step needs has not been made yet (its message says which step)."""


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


def save_run(folder: Path, config, log: dict, model: torch.nn.Module, **extra) -> Path:
    """The end of every training run: folder/training_log_{run}.json (log) and
    folder/model_{run}.pth (config, weights, **extra) written together, both or neither,
    for run = config.run. Returns the log's path."""
    log_path = Path(folder) / f"training_log_{config.run}.json"
    write_results({log_path: json_bytes(log),
                   Path(folder) / f"model_{config.run}.pth": checkpoint_bytes(config, model,
                                                                             **extra)})
    return log_path


def write_json(path: Path, obj) -> None:
    """Strict JSON (no NaN/Infinity), indented, written atomically."""
    write_results({path: json_bytes(obj)})


def atomic_write_text(path: Path, text: str) -> None:
    """Write text to a temporary file beside path, then rename it into place."""
    write_results({path: text.encode()})


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write bytes to a temporary file beside path, then rename it into place."""
    write_results({path: data})


def save_checkpoint(path: Path, config, model: torch.nn.Module, **extra) -> None:
    """{'config': the run's config as a dict, 'model': the state dict, **extra}, atomically:
    the checkpoint alone rebuilds the model, no run name is parsed."""
    write_results({path: checkpoint_bytes(config, model, **extra)})


def name_the_file(err: BaseException, path: Path) -> None:
    """Give an OSError without a file name (a failed write: a full disk) the name of the
    result it was writing, so that its one line says which file was not written."""
    if isinstance(err, OSError) and err.filename is None:
        err.filename = str(path)


def unfinished(path: Path) -> Path:
    """Where a run keeps a result while it runs: training_log_x.json -> training_log_x.partial.json.
    It takes its real name only once the run has finished, so that a killed run never
    replaces a finished result (and figures never read a partial one)."""
    path = Path(path)
    return path.with_name(f"{path.stem}.partial{path.suffix}")


def read_json(path: Path):
    """The JSON in path; BadFileError naming the file if it is not valid JSON."""
    path = Path(path)
    try:
        with open(path) as f:
            return json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise BadFileError(f"{path} is not valid JSON ({err}): delete it and re-run the "
                           "step that writes it") from None


def load_checkpoint(path: Path, device, trusted: bool = False) -> dict:
    """A checkpoint written by save_checkpoint (or a resume file, with trusted=True).

    MissingFileError (a FileNotFoundError) if it is missing; BadFileError naming the file if
    it is truncated, corrupt, or not a checkpoint of this repository.
    """
    path = Path(path)
    if not path.exists():
        raise MissingFileError(f"{path} not found: train that run first (see the README)")
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


def load_trained(config_class, path: Path, device) -> tuple[torch.nn.Module, object, dict]:
    """(model in eval mode on device, its config, the checkpoint) from a checkpoint written by
    save_checkpoint: config_class(**saved config).build_model() with the saved weights. Every
    problem's load_model (problemN/config.py) is this; MissingFileError or BadFileError
    naming path as load_checkpoint, config_from_checkpoint and load_state raise them."""
    checkpoint = load_checkpoint(path, device)
    config = config_from_checkpoint(config_class, checkpoint, path)
    model = load_state(config.build_model(), checkpoint, path)
    return model.to(device).eval(), config, checkpoint


def file_fingerprint(path: Path) -> dict:
    """{'name', 'bytes', 'sha1'} of a data file: what a resumed run compares."""
    path = Path(path)
    return {"name": path.name, "bytes": path.stat().st_size,
            "sha1": hashlib.sha1(path.read_bytes()).hexdigest()}
