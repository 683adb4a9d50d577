"""Problem 2's stand-ins: stub models and helpers that run next to the code under test.

A test reaches them as `submission("tests.tiny_problem2").Name(...)`, so that they live in
the same process as the code they are handed to (a test's own lambda or class cannot cross
the seam, tests/seam.py). Each is made of torch alone and reveals no solution; a test may
also build one on its own side, as a trusted twin whose numbers it computes itself.
"""

import torch

from tests.tiny import modes_during  # noqa: F401  (reached through the seam)


class Lookup(torch.nn.Module):
    """A stub offset model small enough to follow by hand: logits = a learned table per
    token, plus dropout (so that its mode matters). Seeded: every Lookup starts alike."""

    def __init__(self, dropout: float = 0.0):
        super().__init__()
        torch.manual_seed(0)
        self.table = torch.nn.Parameter(torch.randn(16, 16))
        self.dropout = torch.nn.Dropout(dropout)

    def forward(self, tokens):
        return self.dropout(self.table[tokens])


class FixedLogits(torch.nn.Module):
    """Stub model: the same logits row at every position, whatever the tokens."""

    def __init__(self, row):
        super().__init__()
        self.row = torch.nn.Parameter(torch.tensor(row))

    def forward(self, tokens, return_attention=False):
        return self.row.expand(*tokens.shape, -1)


class PredictsPositionModThree(torch.nn.Module):
    """Stub model: at position i the argmax is i % 3, whatever the tokens."""

    def __init__(self):
        super().__init__()
        self.unused = torch.nn.Parameter(torch.zeros(1))  # so that it has a device to ask

    def forward(self, tokens, return_attention=False):
        B, T = tokens.shape
        logits = torch.zeros(B, T, 16)
        logits[:, torch.arange(T), torch.arange(T) % 3] = 1.0
        return logits


class PredictsZeroInEvalMode(torch.nn.Module):
    """Stub offset model whose mode shows in its output, as a dropout layer's does: it
    predicts token 0 everywhere in eval mode and token 1 in training mode."""

    def __init__(self):
        super().__init__()
        self.unused = torch.nn.Parameter(torch.zeros(1))  # so that it has a device to ask

    def forward(self, tokens, return_attention=False):
        logits = torch.zeros(*tokens.shape, 16)
        logits[..., 1 if self.training else 0] = 1.0
        return logits


class ScriptedScoreShifts:
    """A stand-in for problem2.positional.score_shift_invariance: each call returns the next
    of the values given for its scheme, e.g. {"rotary": [0.1, 0.3], "sinusoidal": [1.0, 2.0]}."""

    def __init__(self, values: dict):
        self.values = {scheme: iter(list(v)) for scheme, v in values.items()}

    def __call__(self, q, k, shift, scheme, *rest, **positions):
        return next(self.values[scheme])


class RecordsScoreShifts:
    """A stand-in for problem2.positional.score_shift_invariance that records what it is
    asked: each call appends (scheme, shift, q_pos, k_pos) to .calls, as Python ints (the
    positions as passed, by keyword or position, else the documented defaults 10 and 3),
    and q . k to .scores; it returns 0.0."""

    def __init__(self):
        self.calls, self.scores = [], []

    def __call__(self, q, k, shift, scheme, q_pos=10, k_pos=3):
        self.calls.append((str(scheme), int(shift), int(q_pos), int(k_pos)))
        self.scores.append(float(torch.as_tensor(q).double() @ torch.as_tensor(k).double()))
        return 0.0


class GivenOffsetSplit(torch.utils.data.Dataset):
    """An OffsetDataset stand-in made from given tensors: .tokens and .targets [N, T] whole,
    items (tokens[i], targets[i])."""

    def __init__(self, tokens, targets):
        self.tokens, self.targets = tokens, targets

    def __len__(self) -> int:
        return self.tokens.shape[0]

    def __getitem__(self, index: int):
        return self.tokens[index], self.targets[index]


class GivenOffsetSplits:
    """A stand-in for the class OffsetDataset where a script makes its splits:
    GivenOffsetSplits(table)(data_dir, split, k=7) is the GivenOffsetSplit of table[split] =
    (tokens, targets), whatever the folder (the table is data the test made)."""

    def __init__(self, table: dict):
        self.table = {split: tuple(tensors) for split, tensors in table.items()}

    def __call__(self, data_dir, split: str, k: int = 7):
        return GivenOffsetSplit(*self.table[split])


class TableRows:
    """A stand-in for sinusoidal_table: TableRows(tables)(max_len, d_model) is the first
    max_len rows of tables[d_model] (a table the test made), as float32; more rows than it
    holds raise ValueError."""

    def __init__(self, tables: dict):
        self.tables = {int(d): torch.as_tensor(t) for d, t in tables.items()}

    def __call__(self, max_len: int, d_model: int) -> torch.Tensor:
        table = self.tables[int(d_model)]
        if max_len > table.shape[0]:
            raise ValueError(f"TableRows holds {table.shape[0]} rows, not {max_len}")
        return table[:max_len].float().clone()


class PowerTable:
    """Stand-ins for sinusoidal_table and shift_rotation that fit together, though neither is
    the homework's: for a matrix A [d, d] and a vector v [d] given per width d (data the
    test made, A orthogonal), .table(max_len, d) has the rows A^p v, p = 0 .. max_len - 1,
    and .rotation(s, d) is A^s, so that table[p + s] = rotation(s) @ table[p]. float32."""

    def __init__(self, given: dict):
        self.given = {int(d): (torch.as_tensor(A, dtype=torch.float64),
                               torch.as_tensor(v, dtype=torch.float64))
                      for d, (A, v) in given.items()}

    def table(self, max_len: int, d_model: int) -> torch.Tensor:
        A, v = self.given[int(d_model)]
        rows = [v]
        for _ in range(max_len - 1):
            rows.append(A @ rows[-1])
        return torch.stack(rows).float()

    def rotation(self, shift: int, d_model: int) -> torch.Tensor:
        A, _ = self.given[int(d_model)]
        return torch.linalg.matrix_power(A, int(shift)).float()


class LeavesUnrotated:
    """A stand-in for apply_rotary that rotates nothing: x comes back as it is (a model
    built with it runs, without position information)."""

    def __call__(self, x, positions):
        return x


class RecordsDtypes:
    """RecordsDtypes(function)(x, ...) = function(x, ...), recording x's dtype and shape in
    .seen (as strings and lists), e.g. for apply_rotary inside rotary_vs_pairwise_error."""

    def __init__(self, function):
        self.function, self.seen = function, []

    def __call__(self, x, *args, **kwargs):
        self.seen.append((str(x.dtype).removeprefix("torch."), list(x.shape)))
        return self.function(x, *args, **kwargs)


class PlusConstant:
    """PlusConstant(function, c)(x, ...) = function(x, ...) + c, in x's dtype: a stand-in
    that differs from function by exactly c everywhere (e.g. for apply_rotary, next to
    pairwise_rotary)."""

    def __init__(self, function, constant: float):
        self.function, self.constant = function, constant

    def __call__(self, x, *args, **kwargs):
        return (torch.as_tensor(self.function(x, *args, **kwargs)) + self.constant).to(x.dtype)


# ------------------------------------------------------ used by the tests, on their side
def given_offset_splits(data_dir) -> dict:
    """{split: (tokens, targets)} for GivenOffsetSplits: the tokens of data_dir/offset/
    {split}.npy (as tests.tiny.offset_data writes them), the targets random tokens from
    position 7 on and IGNORE_INDEX before (not the offset task's targets: those are Part
    A's to build)."""
    from pathlib import Path

    import numpy as np

    from problem2.dataset import IGNORE_INDEX  # given code

    table = {}
    for seed, split in enumerate(("train", "test")):
        tokens = torch.from_numpy(np.load(Path(data_dir) / "offset" / f"{split}.npy")).long()
        targets = torch.randint(0, 16, tokens.shape, generator=torch.Generator().manual_seed(
            seed))
        targets[:, :7] = IGNORE_INDEX
        table[split] = (tokens, targets)
    return table


def stand_in_dataset(monkeypatch, data_dir, scripts=("problem2.train",)) -> None:
    """Make the scripts under test (their module names) build GivenOffsetSplits of
    given_offset_splits(data_dir) where they make an OffsetDataset, so that an end-to-end
    run uses no code of Part A."""
    from tests.seam import submission

    splits = submission("tests.tiny_problem2").GivenOffsetSplits(given_offset_splits(data_dir))
    for script in scripts:
        monkeypatch.setattr(submission(script), "OffsetDataset", splits)


def orthogonal(d: int, seed: int) -> tuple:
    """(A [d, d] orthogonal, v [d] of norm 1), float64, seeded: what PowerTable takes."""
    generator = torch.Generator().manual_seed(seed)
    A, _ = torch.linalg.qr(torch.randn(d, d, generator=generator, dtype=torch.float64))
    v = torch.randn(d, generator=generator, dtype=torch.float64)
    return A, v / v.norm()
