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
from provided.data_files import check_offset_file

VOCAB_SIZE = 16
SPLITS = ("train", "test")
SEQUENCE_LENGTHS = {"train": 64, "test": 128}  # fixed by the homework


def check_offset_split(data_dir: Path, split: str) -> None:
    """check_offset_file on data_dir/offset/{split}.npy with the split's homework length."""
    check_offset_file(Path(data_dir) / "offset" / f"{split}.npy", SEQUENCE_LENGTHS[split],
                      VOCAB_SIZE)


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
