"""Alternative solutions for problem3/dataset.py (instructors only).

read_smiles is the one problem3/dataset.py imports from provided/data_files.py, hence F821 here.
"""
# ruff: noqa: F821

from itertools import chain
from pathlib import Path

import torch
from torch.utils.data import Dataset

from provided.common import IGNORE_INDEX
from provided.smiles import BOS, EOS, PAD, SmilesVocab, tokenize


def build_vocab(train_path: Path) -> SmilesVocab:
    """The SmilesVocab over every token of the training file."""
    return SmilesVocab(chain.from_iterable(map(tokenize, read_smiles(train_path))))


def _line_ids(smiles: str, vocab: SmilesVocab, max_tokens: int, origin: str) -> list[int]:
    """The token ids of one line, or ValueError naming where the line comes from."""
    try:
        pieces = tokenize(smiles)
    except ValueError as problem:
        raise ValueError(f"{origin} does not tokenize ({problem})") from None
    unknown = [piece for piece in pieces if piece not in vocab.stoi]
    if unknown:
        raise ValueError(f"{origin} holds {unknown[0]}, which the vocabulary lacks")
    if len(pieces) > max_tokens:
        raise ValueError(f"{origin} is {len(pieces)} tokens long; at most {max_tokens} fit "
                         "between BOS and EOS")
    return [vocab.stoi[piece] for piece in pieces]


class SmilesDataset(Dataset):
    """(input_ids [max_len - 1], target_ids [max_len - 1]) long tensors, one per line.

    The whole file is encoded once into self.inputs and self.targets [N, max_len - 1], so a
    training loop can index batches directly. A line that does not tokenize, has a token
    outside the vocabulary, or is longer than max_len - 2 tokens raises ValueError naming
    its line number (from 1).
    """

    def __init__(self, path: Path, vocab: SmilesVocab, max_len: int = 52):
        self.path, self.vocab, self.max_len = Path(path), vocab, max_len
        self.smiles = read_smiles(path)
        input_rows, target_rows = [], []
        for number, line in enumerate(self.smiles, start=1):
            body = _line_ids(line, vocab, max_len - 2, f"line {number} of {self.path}")
            sequence = [BOS, *body, EOS] + [PAD] * (max_len - 2 - len(body))
            input_rows.append(sequence[:-1])
            target_rows.append([IGNORE_INDEX if t == PAD else t for t in sequence[1:]])
        width = max_len - 1
        self.inputs = torch.tensor(input_rows, dtype=torch.long).reshape(-1, width)
        self.targets = torch.tensor(target_rows, dtype=torch.long).reshape(-1, width)
