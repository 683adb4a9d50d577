"""Offset retrieval sequences (Problem 2, Part A).

Students: you write OffsetDataset.__init__; the rest is given.

Every sequence holds uniform random tokens in [0, 16). The target at position i is the
token at position i - k (k = 7 in the homework); positions 0 .. k-1 have no target and
carry IGNORE_INDEX, which cross-entropy skips and accuracy does not count.
"""

from pathlib import Path

import numpy as np
import torch
from torch.utils.data import Dataset

from provided.common import (  # IGNORE_INDEX: the homework names it here too
    IGNORE_INDEX,  # noqa: F401
    missing_data_message,
)

VOCAB_SIZE = 16
SPLITS = ("train", "test")
SEQUENCE_LENGTHS = {"train": 64, "test": 128}  # fixed by the homework


def check_offset_file(path: Path, length: int) -> None:
    """Check an offset .npy file before any work is done with it: FileNotFoundError if it is
    missing, ValueError naming the file if it cannot be loaded (corrupt or truncated) or is
    not a 2-D integer array of sequences `length` long with tokens in [0, VOCAB_SIZE)."""
    path = Path(path)
    fix = "run `python generate_datasets.py --only offset --force`"
    if not path.exists():
        raise FileNotFoundError(missing_data_message(path))
    try:
        array = np.load(path, allow_pickle=False)
    except Exception as err:  # numpy raises several kinds for a damaged file
        reason = (str(err).splitlines() or [type(err).__name__])[0]
        raise ValueError(f"{path} is truncated or corrupt ({reason}); {fix}") from None
    if not isinstance(array, np.ndarray):
        raise ValueError(f"{path} holds no single array (an .npz archive?); {fix}")
    if array.ndim != 2 or array.shape[0] < 1:
        raise ValueError(f"{path} holds an array of shape {tuple(array.shape)}, not "
                         f"[sequences, {length}]; {fix}")
    if not np.issubdtype(array.dtype, np.integer):
        raise ValueError(f"{path} holds {array.dtype} values, not integer tokens; {fix}")
    if array.shape[1] != length:
        raise ValueError(f"{path} holds sequences of length {array.shape[1]}, not {length} "
                         f"(shape {tuple(array.shape)}); {fix}")
    low, high = array.min().item(), array.max().item()
    if low < 0 or high >= VOCAB_SIZE:
        raise ValueError(f"{path} holds tokens from {low} to {high}, outside [0, {VOCAB_SIZE})"
                         f"; {fix}")


def check_offset_split(data_dir: Path, split: str) -> None:
    """check_offset_file on data_dir/offset/{split}.npy with the split's homework length."""
    check_offset_file(Path(data_dir) / "offset" / f"{split}.npy", SEQUENCE_LENGTHS[split])


class OffsetDataset(Dataset):
    """(tokens [T], targets [T]) long tensors, one per sequence of data_dir/offset/{split}.npy.

    The whole split is loaded once into self.tokens and self.targets [N, T], so a training
    loop can take a batch by indexing them. targets[:, i] = tokens[:, i - k] for i >= k and
    IGNORE_INDEX for i < k. A split other than 'train' or 'test' raises ValueError, a
    missing file FileNotFoundError.
    """

    def __init__(self, data_dir: Path, split: str, k: int = 7):
        # BEGIN SOLUTION
        if split not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
        path = Path(data_dir) / "offset" / f"{split}.npy"
        if not path.exists():
            raise FileNotFoundError(missing_data_message(path))
        self.k = k
        self.tokens = torch.from_numpy(np.load(path)).long()  # [N, T]
        self.targets = torch.full_like(self.tokens, IGNORE_INDEX)  # [N, T]
        self.targets[:, k:] = self.tokens[:, : self.tokens.shape[1] - k]
        # END SOLUTION

    def __len__(self) -> int:
        return self.tokens.shape[0]

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.tokens[index], self.targets[index]
