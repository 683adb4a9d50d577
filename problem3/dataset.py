"""SMILES strings as next-token prediction examples (Problem 3, Part A).

Students: you write build_vocab and SmilesDataset.__init__; the rest is given.

Each string becomes [BOS, tokens..., EOS] padded with PAD to max_len ids; the input is every
id but the last and the target every id but the first, so target[t] = input[t + 1], with
IGNORE_INDEX where the target is PAD (the loss never scores padding).
"""

from pathlib import Path

import torch
from torch.utils.data import Dataset

from provided.common import IGNORE_INDEX  # noqa: F401 (the homework names it here too)
from provided.data_files import read_smiles
from provided.smiles import BOS, EOS, PAD, SmilesVocab, tokenize


def build_vocab(train_path: Path) -> SmilesVocab:
    """The SmilesVocab over every token of the training file."""
    # BEGIN SOLUTION
    tokens = set()
    for smiles in read_smiles(train_path):
        tokens.update(tokenize(smiles))
    return SmilesVocab(tokens)
    # END SOLUTION


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
        # BEGIN SOLUTION
        ids = torch.full((len(self.smiles), max_len), PAD, dtype=torch.long)
        for row, smiles in enumerate(self.smiles):
            encoded = self._encode_line(smiles, row + 1)
            ids[row, : len(encoded)] = torch.tensor(encoded)
        self.inputs = ids[:, :-1].clone()
        self.targets = ids[:, 1:].clone()
        self.targets[self.targets == PAD] = IGNORE_INDEX
        # END SOLUTION

    def _encode_line(self, smiles: str, line: int) -> list[int]:
        """[BOS, token ids..., EOS], or ValueError naming the line of the file."""
        where = f"{self.path}, line {line}"
        try:
            ids = self.vocab.encode(smiles)
        except (ValueError, KeyError) as err:
            raise ValueError(f"{where}: {err.args[0]}") from None
        if len(ids) > self.max_len - 2:
            raise ValueError(f"{where}: {len(ids)} tokens, more than max_len - 2 = "
                             f"{self.max_len - 2}")
        return [BOS] + ids + [EOS]

    def __len__(self) -> int:
        return len(self.smiles)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.inputs[index], self.targets[index]
