"""Instructors only: an alternative solution of problem1/dataset.py's regions.

Written differently from the reference on purpose (csv module, Python lists, string
formatting of the digits) to check that the tests accept any correct AdditionDataset.
provided.handout's --fill splices the region functions below into the handout.
"""

import csv
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch.utils.data import Dataset

if TYPE_CHECKING:  # constants of problem1/dataset.py itself; splice leaves this block out
    from problem1.dataset import BOS, PLUS, SRC_LEN, TGT_LEN


def _operand_rows(csv_path: Path) -> list[tuple[int, int]]:
    """The (a, b) rows of one split's CSV, in file order, through the csv module."""
    with open(csv_path, newline="") as handle:
        reader = csv.reader(handle)
        header = next(reader, None)
        if header is None or [cell.strip() for cell in header] != ["a", "b"]:
            raise ValueError(f"{csv_path} does not start with the header a,b; regenerate it "
                             "with `python generate_datasets.py --only addition --force`")
        rows = []
        for line_number, cells in enumerate(reader, start=2):
            if not cells:
                continue
            if len(cells) != 2:
                raise ValueError(f"{csv_path}, line {line_number}: expected two operands, "
                                 f"found {cells!r}")
            try:
                first, second = int(cells[0]), int(cells[1])
            except ValueError:
                raise ValueError(f"{csv_path}, line {line_number}: {cells!r} is not two "
                                 "integers") from None
            if not (0 <= first <= 999 and 0 <= second <= 999):
                raise ValueError(f"{csv_path}, line {line_number}: an operand lies outside "
                                 "0..999")
            rows.append((first, second))
    return rows


class AdditionDataset(Dataset):
    """The pairs of one split, as (src [7], tgt_in [4], tgt_out [4]) long tensors.

    data_dir is the repository's data folder; the split is read from
    data_dir/addition/{split}.csv. max_pairs keeps the first max_pairs pairs (None: all).
    """

    def __init__(self, data_dir, split: str, digit_order: str = "forward", max_pairs=None):
        # BEGIN SOLUTION
        if digit_order != "forward" and digit_order != "reversed":
            raise ValueError(f"unknown digit_order {digit_order!r}: use 'forward' or 'reversed'")
        if split not in ("train", "val", "test"):
            raise ValueError(f"unknown split {split!r}: use 'train', 'val' or 'test'")
        csv_path = Path(data_dir).joinpath("addition", split + ".csv")
        if not csv_path.is_file():
            raise FileNotFoundError(f"cannot find {csv_path}; create the data first with "
                                    "`python generate_datasets.py` (repository root)")
        rows = _operand_rows(csv_path)
        if max_pairs is not None:
            if max_pairs < 1 or max_pairs > len(rows):
                raise ValueError(f"max_pairs={max_pairs} is not possible: {csv_path} holds "
                                 f"{len(rows)} pairs, so it must be 1 to {len(rows)}")
            rows = rows[:max_pairs]
        self.digit_order = digit_order
        sources, decoder_inputs, decoder_targets = [], [], []
        for first, second in rows:
            total = [int(ch) for ch in format(first + second, "04d")]
            if digit_order == "reversed":
                total.reverse()
            sources.append([int(ch) for ch in format(first, "03d")] + [PLUS]
                           + [int(ch) for ch in format(second, "03d")])
            decoder_targets.append(total)
            decoder_inputs.append([BOS] + total[:TGT_LEN - 1])
        self.src = torch.tensor(sources, dtype=torch.long).reshape(len(rows), SRC_LEN)
        self.tgt_in = torch.tensor(decoder_inputs, dtype=torch.long).reshape(len(rows), TGT_LEN)
        self.tgt_out = torch.tensor(decoder_targets, dtype=torch.long).reshape(len(rows), TGT_LEN)
        # END SOLUTION

    def __len__(self) -> int:
        # BEGIN SOLUTION
        return int(self.src.shape[0])
        # END SOLUTION

    def __getitem__(self, index: int):
        # BEGIN SOLUTION
        return tuple(table[index] for table in (self.src, self.tgt_in, self.tgt_out))
        # END SOLUTION
