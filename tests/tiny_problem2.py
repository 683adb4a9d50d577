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


