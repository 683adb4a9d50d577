"""Problem 3's stand-ins: stub models and helpers that run next to the code under test.

A test reaches them as `submission("tests.tiny_problem3").Name(...)`, so that they live in
the same process as the code they are handed to (a test's own lambda or class cannot cross
the seam, tests/seam.py). Each is made of torch alone and reveals no solution; a test may
also build one on its own side, as a trusted twin whose numbers it computes itself.
"""

import torch

from provided.smiles import EOS
from tests.tiny import modes_during  # noqa: F401  (reached through the seam)


class TinyLM(torch.nn.Module):
    """A stand-in language model with DecoderLM's interface, small enough to follow by hand:
    logits = head(dropout(tok_emb(ids) + pos_emb(positions))), no attention (so it is
    causal at once, and each position's logits depend on its token and position only).

    Like DecoderLM it has max_len, blocks (one, empty) and head (an nn.Linear), and takes
    an optional kv_cache (a list of one dict per block): with it, a call continues the
    positions of the earlier calls, so feeding the whole prefix or only the new tokens gives
    the same logits at the last position. Seeded: every TinyLM of one seed starts alike.
    """

    def __init__(self, vocab_size: int = 12, d_model: int = 16, max_len: int = 12,
                 dropout: float = 0.0, seed: int = 0):
        super().__init__()
        torch.manual_seed(seed)
        self.max_len = max_len
        self.tok_emb = torch.nn.Embedding(vocab_size, d_model)
        self.pos_emb = torch.nn.Embedding(max_len, d_model)
        self.dropout = torch.nn.Dropout(dropout)
        self.blocks = torch.nn.ModuleList([torch.nn.Identity()])  # where a cache would live
        self.head = torch.nn.Linear(d_model, vocab_size)

    def forward(self, input_ids, kv_cache=None):
        T = input_ids.shape[1]
        start = 0
        if kv_cache is not None:
            start = kv_cache[0].get("seen", 0)
            kv_cache[0]["seen"] = start + T
        if start + T > self.max_len:
            raise ValueError(f"TinyLM holds {self.max_len} positions, not {start + T}")
        where = start + torch.arange(T, device=input_ids.device)
        return self.head(self.dropout(self.tok_emb(input_ids) + self.pos_emb(where)))


class ScriptedLM(torch.nn.Module):
    """Emits the ids of `script` in order (then EOS), whatever the temperature.

    The next id depends only on how many positions the sequence holds so far (BOS
    included), so the model gives the same answer whether the sampler re-runs the whole
    prefix each step or, with kv_cache, feeds only the new token: the cache (a list of one
    dict per block, as DecoderLM's) then remembers how many positions it has seen.
    """

    def __init__(self, script, vocab_size):
        super().__init__()
        self.script, self.vocab_size = list(script), vocab_size
        self.blocks = torch.nn.ModuleList([torch.nn.Identity()])  # one block
        self.unused = torch.nn.Parameter(torch.zeros(1))  # so that it has a device to ask

    def forward(self, input_ids, kv_cache=None):
        seen = 0
        if kv_cache is not None:
            seen = kv_cache[0].get("seen", 0)
            kv_cache[0]["seen"] = seen + input_ids.shape[1]
        position = seen + input_ids.shape[1] - 1  # tokens after BOS so far
        next_id = self.script[position] if position < len(self.script) else EOS
        logits = torch.full((input_ids.shape[0], input_ids.shape[1], self.vocab_size), -1e9)
        logits[:, -1, next_id] = 0.0
        return logits


class TableLM(torch.nn.Module):
    """Next-token logits that depend on the current token only: table[token] ([V, V], a
    row of logits per token), at every position. Feeding the whole prefix or, with
    kv_cache, only the new token gives the same logits at the last position."""

    def __init__(self, table):
        super().__init__()
        self.register_buffer("table", torch.as_tensor(table, dtype=torch.float32).clone())
        self.blocks = torch.nn.ModuleList([torch.nn.Identity()])  # for a cache per block
        self.unused = torch.nn.Parameter(torch.zeros(1))  # so that it has a device to ask

    def forward(self, input_ids, kv_cache=None):
        return self.table[input_ids]  # [B, T, V]


class FillsHeadWithNan:
    """A stand-in for problem3.train.train_step: fills the model's head.weight with NaN,
    then takes the step given (the real train_step), so that the run diverges."""

    def __init__(self, step):
        self.step = step

    def __call__(self, model, optimizer, inputs, targets, lr):
        with torch.no_grad():
            model.head.weight.fill_(float("nan"))
        return self.step(model, optimizer, inputs, targets, lr)


class Answers:
    """A stand-in function that answers each argument from a table given as data, e.g.
    Answers({"CCO": True, "CC(": False}); an argument not in the table raises KeyError."""

    def __init__(self, table: dict):
        self.table = dict(table)

    def __call__(self, value):
        return self.table[value]




def inputs_during(module: torch.nn.Module, function, *args, **kwargs) -> tuple[list, object]:
    """(the input of each call of module while function(*args, **kwargs) runs: its first
    positional argument, or the keyword argument x; what function returned)."""
    seen = []

    def record(_, positional, keywords):
        seen.append(positional[0] if positional else keywords["x"])

    hook = module.register_forward_pre_hook(record, with_kwargs=True)
    try:
        result = function(*args, **kwargs)
    finally:
        hook.remove()
    return seen, result
