"""The provided SMILES tokenizer and vocabulary (Problem 3).

Students: given; read tokenize() and SmilesVocab (Problem 3 uses both).

tokenize() splits a SMILES string with the regular expression of Schwaller et al. (2019,
Molecular Transformer), so that multi-character atoms such as Cl, Br and bracket atoms such
as [nH] are single tokens. Joining the tokens gives the string back.

SmilesVocab maps tokens to ids: PAD = 0, BOS = 1, EOS = 2, then the chemistry tokens in
sorted order.
"""

import re
from collections.abc import Iterable
from pathlib import Path

from provided.results import BadFileError, read_json, write_json

PAD, BOS, EOS = 0, 1, 2
SPECIALS = ["<pad>", "<bos>", "<eos>"]

# the 22 tokens of the homework's MOSES strings: generate_datasets.py keeps the strings made of
# these, and a training file with another token is not the homework's
HOMEWORK_TOKENS = frozenset("# ( ) - 1 2 3 4 5 = Br C Cl F N O S [nH] c n o s".split())

SMILES_PATTERN = re.compile(
    r"(\[[^\]]+]|Br?|Cl?|N|O|S|P|F|I|b|c|n|o|s|p|\(|\)|\.|=|#|-|\+|\\|\/|:|~|@|\?|>|\*|\$|"
    r"\%[0-9]{2}|[0-9])"
)


def tokenize(smiles: str) -> list[str]:
    """Split a SMILES string into tokens; raise ValueError if a character is not covered.

    >>> tokenize("CC(=O)c1ccc[nH]1Cl")
    ['C', 'C', '(', '=', 'O', ')', 'c', '1', 'c', 'c', 'c', '[nH]', '1', 'Cl']
    """
    tokens = SMILES_PATTERN.findall(smiles)
    if "".join(tokens) != smiles:
        position = _first_mismatch(smiles, tokens)
        raise ValueError(
            f"cannot tokenize SMILES {smiles!r}: character {smiles[position]!r} at "
            f"position {position} is not part of any SMILES token"
        )
    return tokens


def _first_mismatch(smiles: str, tokens: list[str]) -> int:
    """Index of the first character of smiles that the regex matches skipped."""
    position = 0
    for match in SMILES_PATTERN.finditer(smiles):
        if match.start() != position:
            return position
        position = match.end()
    return position


class SmilesVocab:
    """Token <-> id mapping: PAD, BOS, EOS first, then the chemistry tokens sorted."""

    def __init__(self, tokens: Iterable[str]):
        chemistry = sorted(set(tokens) - set(SPECIALS))
        self.itos: list[str] = SPECIALS + chemistry
        self.stoi: dict[str, int] = {tok: i for i, tok in enumerate(self.itos)}

    def __len__(self) -> int:
        return len(self.itos)

    @property
    def chemistry_tokens(self) -> list[str]:
        return self.itos[len(SPECIALS):]

    def encode(self, smiles: str) -> list[int]:
        """Token ids of a SMILES string, without BOS/EOS; KeyError names an unknown token."""
        ids = []
        for tok in tokenize(smiles):
            if tok not in self.stoi:
                raise KeyError(f"token {tok!r} of {smiles!r} is not in the vocabulary")
            ids.append(self.stoi[tok])
        return ids

    def decode(self, ids: Iterable[int]) -> str:
        """Join the tokens of ids, stopping at the first EOS and skipping PAD and BOS."""
        out = []
        for i in ids:
            i = int(i)
            if i == EOS:
                break
            if i in (PAD, BOS):
                continue
            out.append(self.itos[i])
        return "".join(out)

    def save(self, path: Path) -> None:
        write_json(path, {"tokens": self.itos})

    @classmethod
    def load(cls, path: Path) -> "SmilesVocab":
        """The vocabulary saved by save(); BadFileError (a ValueError) naming path if the
        file is not one."""
        saved = read_json(path)
        itos = saved.get("tokens") if isinstance(saved, dict) else None
        if not isinstance(itos, list) or itos[: len(SPECIALS)] != SPECIALS:
            raise BadFileError(f"{path} is not a SmilesVocab file (a 'tokens' list that starts "
                               f"with {SPECIALS}): delete it and re-run a training run")
        return cls(itos[len(SPECIALS):])

    def __eq__(self, other) -> bool:
        return isinstance(other, SmilesVocab) and self.itos == other.itos

    def __repr__(self) -> str:
        return f"SmilesVocab({len(self)} ids: {' '.join(self.chemistry_tokens)})"
