"""Problem 1, Part A: the addition dataset, tokenized once into tensors.

Students: you write AdditionDataset's three methods; the constants are given, and
provided/data_files.py's read_pairs reads a split's CSV file.

A pair (a, b) becomes three sequences of token ids (digits 0-9, PLUS = 10, BOS = 11):

    src     a2 a1 a0 + b2 b1 b0        7 tokens, operands zero-padded to three digits
    tgt_out the four digits of a + b   zero-padded, reversed when digit_order is 'reversed'
    tgt_in  BOS + tgt_out[:3]          the decoder's input under teacher forcing

    391 + 968:  src 3 9 1 + 9 6 8,  forward tgt_out 1 3 5 9,  reversed tgt_out 9 5 3 1

The reversed order reverses the sum only, never the operands. The whole split is encoded
once into the long tensors `.src [N, 7]`, `.tgt_in [N, 4]` and `.tgt_out [N, 4]`, so that
training and evaluation index batches straight out of them.
"""

from pathlib import Path

import numpy as np
import torch
from torch.utils.data import Dataset

from provided.common import missing_data_message
from provided.data_files import read_pairs

PLUS = 10
BOS = 11
VOCAB_SIZE = 12
SRC_LEN = 7
TGT_LEN = 4
DIGIT_ORDERS = ("forward", "reversed")
SPLITS = ("train", "val", "test")


class AdditionDataset(Dataset):
    """The pairs of one split, as (src [7], tgt_in [4], tgt_out [4]) long tensors.

    data_dir is the repository's data folder; the split is read from
    data_dir/addition/{split}.csv. max_pairs keeps the first max_pairs pairs (None: all).
    The items are also held whole, as the attributes .src [N, 7], .tgt_in [N, 4] and
    .tgt_out [N, 4] (long tensors, row i = item i), which training and evaluation index.
    A digit_order other than 'forward' or 'reversed', a split other than 'train', 'val'
    or 'test', or a max_pairs outside 1 to the number of pairs in the file, raises
    ValueError; a missing file raises FileNotFoundError.
    """

    def __init__(self, data_dir, split: str, digit_order: str = "forward", max_pairs=None):
        # BEGIN SOLUTION
        if digit_order not in DIGIT_ORDERS:
            raise ValueError(f"digit_order must be one of {DIGIT_ORDERS}, got {digit_order!r}")
        if split not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
        path = Path(data_dir) / "addition" / f"{split}.csv"
        if not path.exists():
            raise FileNotFoundError(missing_data_message(path))
        pairs = read_pairs(path)
        if max_pairs is not None:
            if not 1 <= max_pairs <= len(pairs):
                raise ValueError(f"max_pairs must be between 1 and {len(pairs)} "
                                 f"(the pairs in {path}), got {max_pairs}")
            pairs = pairs[:max_pairs]
        self.digit_order = digit_order
        a = torch.from_numpy(pairs[:, 0])  # [N]
        b = torch.from_numpy(pairs[:, 1])  # [N]
        if ((pairs < 0) | (pairs > 999)).any():
            raise ValueError(f"{path}: operands must lie in 0..999")

        def digits(n: torch.Tensor, width: int) -> torch.Tensor:
            """[N] -> [N, width]: the zero-padded decimal digits, most significant first."""
            powers = 10 ** torch.arange(width - 1, -1, -1)  # [width]
            return n[:, None] // powers % 10

        plus = torch.full((len(a), 1), PLUS)
        self.src = torch.cat([digits(a, 3), plus, digits(b, 3)], dim=1)  # [N, 7]
        self.tgt_out = digits(a + b, 4)  # [N, 4], most significant first
        if digit_order == "reversed":
            self.tgt_out = self.tgt_out.flip(1)
        bos = torch.full((len(a), 1), BOS)
        self.tgt_in = torch.cat([bos, self.tgt_out[:, :-1]], dim=1)  # [N, 4]
        # END SOLUTION

    def __len__(self) -> int:
        # BEGIN SOLUTION
        return len(self.src)
        # END SOLUTION

    def __getitem__(self, index: int):
        # BEGIN SOLUTION
        return self.src[index], self.tgt_in[index], self.tgt_out[index]
        # END SOLUTION
