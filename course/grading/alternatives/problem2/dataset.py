"""Instructors only: an alternative solution of problem2/dataset.py's region.

The targets are filled column by column in a Python loop instead of one shifted slice.
"""

from pathlib import Path

import numpy as np
import torch
from torch.utils.data import Dataset

from provided.common import IGNORE_INDEX


class OffsetDataset(Dataset):
    """(tokens [T], targets [T]) long tensors, one per sequence of data_dir/offset/{split}.npy.

    The whole split is loaded once into self.tokens and self.targets [N, T], so a training
    loop can take a batch by indexing them. targets[:, i] = tokens[:, i - k] for i >= k and
    IGNORE_INDEX for i < k. A split other than 'train' or 'test' raises ValueError, a
    missing file FileNotFoundError.
    """

    def __init__(self, data_dir: Path, split: str, k: int = 7):
        # BEGIN SOLUTION
        if split != "train" and split != "test":
            raise ValueError(f"OffsetDataset has the splits 'train' and 'test' only, not "
                             f"{split!r}")
        if k < 0:
            raise ValueError(f"the offset k must be 0 or more, got {k}")
        source = Path(data_dir).joinpath("offset", split + ".npy")
        if not source.is_file():
            raise FileNotFoundError(f"cannot find {source}; make it with "
                                    "`python generate_datasets.py` from the repository root")
        sequences = torch.as_tensor(np.load(source), dtype=torch.long)
        shifted = torch.empty_like(sequences)
        for position in range(sequences.shape[1]):
            if position < k:
                shifted[:, position] = IGNORE_INDEX
            else:
                shifted[:, position] = sequences[:, position - k]
        self.tokens = sequences
        self.targets = shifted
        # END SOLUTION
