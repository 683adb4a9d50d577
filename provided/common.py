"""Helpers shared by every problem's scripts: paths, devices, seeding, safe result files.

Every script in problem1/, problem2/ and problem3/ uses these, so that they all take the
same command-line options (--data_dir, --results_dir, --device, --seed, --threads) and
write results the same way: strict JSON (a non-finite number becomes null), written to a
temporary file first and then renamed, so that an interrupted run never leaves a
half-written result behind.
"""

import argparse
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


def results_dir(problem: str) -> Path:
    """The committed results folder of a problem, e.g. results_dir('problem1')."""
    return REPO_ROOT / problem / "results"


def add_common_args(parser: argparse.ArgumentParser, problem: str) -> argparse.ArgumentParser:
    """Add --data_dir, --results_dir, --device, --seed and --threads to a script's parser."""
    parser.add_argument("--data_dir", type=Path, default=DATA_DIR,
                        help="the repository's data folder (default: %(default)s)")
    parser.add_argument("--results_dir", type=Path, default=results_dir(problem),
                        help="where logs, weights and metrics go (default: %(default)s)")
    parser.add_argument("--device", default="auto",
                        help="auto (cuda, then mps, then cpu), cpu, cuda, cuda:N or mps")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    parser.add_argument("--threads", type=int, default=None,
                        help="CPU threads for torch (default: torch's own choice, or "
                             "$OMP_NUM_THREADS)")
    return parser


def setup(args: argparse.Namespace) -> torch.device:
    """Apply --threads and --seed, create the results folder, and return the device."""
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    seed_everything(args.seed)
    args.results_dir.mkdir(parents=True, exist_ok=True)
    return resolve_device(args.device)


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


def missing_data_message(path: Path) -> str:
    return f"{path} not found: run `python generate_datasets.py` from the repository root first"


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
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.chmod(tmp, 0o644)  # mkstemp's files are owner-only
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json(path: Path, obj) -> None:
    """Strict JSON (no NaN/Infinity), indented, written atomically."""
    text = json.dumps(to_strict_json(obj), indent=2, allow_nan=False)
    atomic_write_text(path, text + "\n")


def read_json(path: Path):
    with open(path) as f:
        return json.load(f)


def atomic_torch_save(obj, path: Path) -> None:
    """torch.save to a temporary file beside path, then rename it into place."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        torch.save(obj, tmp)
        os.chmod(tmp, 0o644)  # mkstemp's files are owner-only
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load_weights(path: Path, device: torch.device):
    """torch.load a saved state dict, with a clear message when it is missing."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path} not found: train that run first (see the README)")
    return torch.load(path, map_location=device, weights_only=True)
