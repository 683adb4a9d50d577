"""Problem 1's public stand-ins: objects that run next to the code under test (reached as
`submission("tests.tiny_problem1").Name`), and the twins that tests build of them here.

A part's tests use these where they need another part's object only for its interface, so
that a mistake in one part costs points in that part only:

  - TorchAttention: MultiHeadAttention's interface (W_q, W_k, W_v, W_o, num_heads, d_k;
    boolean masks, True = attend), computed by torch's own multi-head attention;
  - causal_mask: torch's own causal mask, as a boolean mask (True = attend);
  - StandInAdder: the provided AdditionTransformer stack (embedding, encode, decode,
    generate) over stand-in layers with their sublayers side by side, no LayerNorm: not the
    homework's post-norm layers, but with their interface and attribute names;
  - Split: an AdditionDataset stand-in made from given tensors, and GivenSplits, which
    makes them where a script makes its AdditionDatasets;
  - ScoreTable: a score over sets of removed heads, from a table, that records its calls;
  - modes_during: the training flags a model's modules ran in during a call.

Nothing here trains or reads data; every class is made of torch's own modules and functions.
"""

import random

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import TensorDataset

from problem1.dataset import BOS, PLUS, VOCAB_SIZE
from problem1.model import AdditionTransformer, feed_forward, position_table
from tests.seam import submission
from tests.tiny import modes_during  # noqa: F401  (reached through the seam)


def causal_mask(size: int, device=None) -> torch.Tensor:
    """[size, size] bool, True where query i may see key j (j <= i), from torch's own
    square subsequent mask."""
    return nn.Transformer.generate_square_subsequent_mask(size, device=device) == 0


class TorchAttention(nn.Module):
    """A stand-in for problem1.attention.MultiHeadAttention: the same parameters (W_q, W_k,
    W_v, W_o, each nn.Linear(d_model, d_model)), attributes num_heads and d_k, call and
    return values (out [B, T_q, d_model], weights [B, h, T_q, T_k]), computed by
    torch.nn.functional.multi_head_attention_forward. Head i reads columns i*d_k:(i+1)*d_k,
    and its output enters W_o through the same columns."""

    def __init__(self, d_model: int, num_heads: int):
        super().__init__()
        self.d_model, self.num_heads, self.d_k = d_model, num_heads, d_model // num_heads
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)
        self.W_o = nn.Linear(d_model, d_model)

    def forward(self, query, key, value, mask=None):
        B, T, S = query.size(0), query.size(1), key.size(1)
        blocked = None  # torch's boolean masks are True where attention is NOT allowed
        if mask is not None:
            blocked = ~mask.expand(B, self.num_heads, T, S).reshape(B * self.num_heads, T, S)
        out, weights = F.multi_head_attention_forward(
            query.transpose(0, 1), key.transpose(0, 1), value.transpose(0, 1),
            self.d_model, self.num_heads, None,
            torch.cat([self.W_q.bias, self.W_k.bias, self.W_v.bias]), None, None, False, 0.0,
            self.W_o.weight, self.W_o.bias, training=self.training, need_weights=True,
            attn_mask=blocked, use_separate_proj_weight=True, q_proj_weight=self.W_q.weight,
            k_proj_weight=self.W_k.weight, v_proj_weight=self.W_v.weight,
            average_attn_weights=False)
        return out.transpose(0, 1), weights


class ResidualEncoderLayer(nn.Module):
    """EncoderLayer's interface (x, mask) -> (x, self weights), with its sublayers side by
    side on the same input (not the homework's layer): x + Drop(SelfAttn(x)) + Drop(FFN(x)),
    no LayerNorm."""

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float):
        super().__init__()
        self.self_attn = TorchAttention(d_model, num_heads)
        self.ffn = feed_forward(d_model, d_ff)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, mask=None):
        out, weights = self.self_attn(x, x, x, mask)
        return x + self.dropout(out) + self.dropout(self.ffn(x)), weights


class ResidualDecoderLayer(nn.Module):
    """DecoderLayer's interface (x, memory, self_mask=None: causal, memory_mask) -> (x, self
    weights, cross weights), its three sublayers side by side on the same input (not the
    homework's layer), no LayerNorm."""

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float):
        super().__init__()
        self.self_attn = TorchAttention(d_model, num_heads)
        self.cross_attn = TorchAttention(d_model, num_heads)
        self.ffn = feed_forward(d_model, d_ff)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, memory, self_mask=None, memory_mask=None):
        causal = causal_mask(x.size(1), x.device) if self_mask is None else self_mask
        own, self_weights = self.self_attn(x, x, x, causal)
        read, cross_weights = self.cross_attn(x, memory, memory, memory_mask)
        out = x + self.dropout(own) + self.dropout(read) + self.dropout(self.ffn(x))
        return out, self_weights, cross_weights


class StandInAdder(AdditionTransformer):
    """A stand-in for AdditionTransformer: the provided stack's embedding, encode, decode,
    forward and generate (inherited) over ResidualEncoderLayer and ResidualDecoderLayer,
    whose attentions are TorchAttention; the same state_dict names but for the norms."""

    def __init__(self, vocab_size: int = VOCAB_SIZE, d_model: int = 128, num_heads: int = 4,
                 d_ff: int = 256, num_layers: int = 2, dropout: float = 0.1, max_len: int = 16):
        nn.Module.__init__(self)
        self.d_model = d_model
        self.embedding = nn.Embedding(vocab_size, d_model)
        nn.init.normal_(self.embedding.weight, std=d_model ** -0.5)
        self.register_buffer("position_table", position_table(max_len, d_model),
                             persistent=False)
        self.dropout = nn.Dropout(dropout)
        self.encoder_layers = nn.ModuleList(
            ResidualEncoderLayer(d_model, num_heads, d_ff, dropout) for _ in range(num_layers))
        self.decoder_layers = nn.ModuleList(
            ResidualDecoderLayer(d_model, num_heads, d_ff, dropout) for _ in range(num_layers))
        self.output = nn.Linear(d_model, vocab_size)


class Split(TensorDataset):
    """A stand-in for AdditionDataset: items (src, tgt_in, tgt_out) of the tensors given,
    which it also holds whole as .src [N, 7], .tgt_in [N, 4] and .tgt_out [N, 4]."""

    def __init__(self, src, tgt_in, tgt_out):
        super().__init__(src, tgt_in, tgt_out)
        self.src, self.tgt_in, self.tgt_out = src, tgt_in, tgt_out


class GivenSplits:
    """A stand-in for the class AdditionDataset where a script makes its splits:
    GivenSplits(table)(data_dir, split, digit_order, max_pairs=None) is the Split of the
    tensors table[(split, digit_order)] (src, tgt_in, tgt_out), whatever the folder. The
    table is data the test made (not read from the folder, not sums worked out here)."""

    def __init__(self, table: dict):
        self.table = {key: tuple(tensors) for key, tensors in table.items()}

    def __call__(self, data_dir, split: str, digit_order: str = "forward", max_pairs=None):
        return Split(*self.table[(split, digit_order)])


class ScoreTable:
    """score(removed heads) -> table[frozenset(removed)] (default for a set not in the
    table, if given); .calls lists the sets it was asked for, in order, each as a list. One
    head name alone (a string, not a list of names) is refused with a TypeError."""

    def __init__(self, table: dict, default=None):
        self.table, self.default, self.calls = dict(table), default, []

    def __call__(self, removed) -> float:
        if isinstance(removed, str):
            raise TypeError(f"score was given the head name {removed!r} alone: it takes a "
                            f"list of the heads removed, score([{removed!r}])")
        self.calls.append(list(removed))
        key = frozenset(removed)
        return self.table[key] if key in self.table or self.default is None else self.default


class CountingScore(ScoreTable):
    """score(removed heads) -> step * the number of its calls so far (0.1, 0.2, ... by
    default); .calls lists the sets it was asked for, in order."""

    def __init__(self, step: float = 0.1):
        super().__init__({})
        self.step = step

    def __call__(self, removed) -> float:
        self.calls.append(list(removed))
        return self.step * len(self.calls)




# ------------------------------------------------------ used by the tests, on their side
def adder_and_twin(seed: int = 0, **options):
    """(a StandInAdder made next to the code under test, its twin here): the twin's weights,
    drawn here from seed, are loaded into the other, so that the twin computes what the
    right behaviour of the code under test gives. options: StandInAdder's arguments."""
    torch.manual_seed(seed)
    twin = StandInAdder(**options)
    model = submission("tests.tiny_problem1").StandInAdder(**options)
    model.load_state_dict(twin.state_dict())
    return model, twin


def reversed_sums(n: int = 6, seed: int = 0) -> tuple:
    """(src [n, 7], tgt_in [n, 4], tgt_out [n, 4]) of n random sums in reversed order, built
    by hand (not by AdditionDataset)."""
    rng = random.Random(seed)
    src, tgt_in, tgt_out = [], [], []
    for _ in range(n):
        a, b = rng.randint(0, 999), rng.randint(0, 999)
        out = [int(c) for c in f"{a + b:04d}"][::-1]
        src.append([int(c) for c in f"{a:03d}"] + [PLUS] + [int(c) for c in f"{b:03d}"])
        tgt_out.append(out)
        tgt_in.append([BOS] + out[:3])
    return torch.tensor(src), torch.tensor(tgt_in), torch.tensor(tgt_out)


def random_items(n: int, seed: int) -> tuple:
    """(src [n, 7], tgt_in [n, 4], tgt_out [n, 4]) of random digits, seeded: src has PLUS in
    the middle, tgt_in is BOS then random digits, tgt_out random digits (none of them a
    sum: the tests that use them need only the shapes and the tokens)."""
    generator = torch.Generator().manual_seed(seed)
    src = torch.randint(0, 10, (n, 7), generator=generator)
    src[:, 3] = PLUS
    tgt_in = torch.randint(0, 10, (n, 4), generator=generator)
    tgt_in[:, 0] = BOS
    return src, tgt_in, torch.randint(0, 10, (n, 4), generator=generator)


def split(src, tgt_in, tgt_out):
    """A Split made next to the code under test, of these tensors."""
    return submission("tests.tiny_problem1").Split(src, tgt_in, tgt_out)


def stand_in_scripts(monkeypatch, train_size: int = 4000, n_eval: int = 24) -> None:
    """Make train.py and evaluate.py, under test, run on stand-ins of Parts A-C: their
    AdditionDatasets are GivenSplits of random items (the reversed training and validation
    splits, the test split in both orders) and the model they build or load is a
    StandInAdder (problem1.config's AdditionTransformer), so that an end-to-end run of Part
    D or E uses no code of the other parts."""
    table = {("train", "reversed"): random_items(train_size, seed=10),
             ("val", "reversed"): random_items(n_eval, seed=11),
             ("test", "reversed"): random_items(n_eval, seed=12),
             ("test", "forward"): random_items(n_eval, seed=13)}
    tiny = submission("tests.tiny_problem1")
    for script in ("problem1.train", "problem1.evaluate"):
        monkeypatch.setattr(submission(script), "AdditionDataset", tiny.GivenSplits(table))
    monkeypatch.setattr(submission("problem1.config"), "AdditionTransformer", tiny.StandInAdder)


@pytest.fixture
def torch_attention(monkeypatch):
    """Imported by a test module with autouse: the layers under test attend with torch's
    multi-head attention (TorchAttention) and its causal mask, not Part B's, so that a
    mistake in Part B costs no points there."""
    use_torch_attention(monkeypatch)


def use_torch_attention(monkeypatch) -> None:
    """Make problem1.model's layers, under test, build TorchAttention instead of the
    submission's MultiHeadAttention, and see torch's causal mask as causal_mask (where the
    submission's model.py imports it: the handout's does not)."""
    model, tiny = submission("problem1.model"), submission("tests.tiny_problem1")
    monkeypatch.setattr(model, "MultiHeadAttention", tiny.TorchAttention)
    monkeypatch.setattr(model, "causal_mask", tiny.causal_mask, raising=False)
