"""Problem 1, Part C: the encoder-decoder transformer that adds two three-digit numbers.

Students: you write the two layers' forward methods; read the rest, which calls them.

Provided: the layer constructors, the 2 + 2 layer stack, the embedding (one token table and
one fixed position table shared by source and target, sinusoidal at the homework's size)
and greedy `generate`. The layers are post-norm, as in Vaswani et al. (2017), each
returning its attention weights with its output:

    encoder layer   x = LN1(x + Drop(SelfAttn(x)))
                    x = LN2(x + Drop(FFN(x)))
    decoder layer   x = LN1(x + Drop(CausalSelfAttn(x)))
                    x = LN2(x + Drop(CrossAttn(x, memory)))
                    x = LN3(x + Drop(FFN(x)))
"""

import math
from pathlib import Path

import torch
from torch import nn

from problem1.attention import MultiHeadAttention, causal_mask
from problem1.dataset import BOS, VOCAB_SIZE

NUM_DIGITS = 10  # generate picks the next token among the digit ids 0-9 only
POSITION_TABLE = Path(__file__).with_name("position_table.pt")


def position_table(max_len: int, d_model: int) -> torch.Tensor:
    """[max_len, d_model] fixed (not learned) position rows.

    At the homework's size, up to 16 positions of d_model 128, these are the sinusoidal
    table of Problem 2, Part B, read as numbers from position_table.pt beside this file, so
    that this provided stack does not hand over the function Problem 2 asks you to write.
    At any other size (another width, or more positions) they are a fixed random table of
    the same scale (entries N(0, 1/2), as a sinusoidal row's; seeded, so the same for every
    model): the stack then runs and learns at any size, with positions told apart.
    """
    stored = torch.load(POSITION_TABLE, weights_only=True)  # [16, 128]
    if max_len <= stored.shape[0] and d_model == stored.shape[1]:
        return stored[:max_len].clone()
    generator = torch.Generator().manual_seed(max_len * 100_003 + d_model)
    return torch.randn(max_len, d_model, generator=generator) * math.sqrt(0.5)


def feed_forward(d_model: int, d_ff: int) -> nn.Sequential:
    """Linear(d_model -> d_ff) -> ReLU -> Linear(d_ff -> d_model), applied per token."""
    return nn.Sequential(nn.Linear(d_model, d_ff), nn.ReLU(), nn.Linear(d_ff, d_model))


class EncoderLayer(nn.Module):
    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads)
        self.ffn = feed_forward(d_model, d_ff)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, mask=None):
        """x [B, T, d_model] -> (x [B, T, d_model], self-attention weights [B, h, T, T])."""
        # BEGIN SOLUTION
        attended, weights = self.self_attn(x, x, x, mask)
        x = self.norm1(x + self.dropout(attended))
        x = self.norm2(x + self.dropout(self.ffn(x)))
        return x, weights
        # END SOLUTION


class DecoderLayer(nn.Module):
    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads)
        self.cross_attn = MultiHeadAttention(d_model, num_heads)
        self.ffn = feed_forward(d_model, d_ff)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.norm3 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, memory, self_mask=None, memory_mask=None):
        """x [B, T, d_model], memory [B, S, d_model]; self_mask None means causal: build it
        with causal_mask (imported above by that name; the Part C tests swap it, and
        MultiHeadAttention, for torch's, so that a Part B mistake costs no Part C points).

        Returns (x [B, T, d_model], self weights [B, h, T, T], cross weights [B, h, T, S]).
        """
        # BEGIN SOLUTION
        if self_mask is None:
            self_mask = causal_mask(x.size(1), x.device)
        attended, self_weights = self.self_attn(x, x, x, self_mask)
        x = self.norm1(x + self.dropout(attended))
        attended, cross_weights = self.cross_attn(x, memory, memory, memory_mask)
        x = self.norm2(x + self.dropout(attended))
        x = self.norm3(x + self.dropout(self.ffn(x)))
        return x, self_weights, cross_weights
        # END SOLUTION


class AdditionTransformer(nn.Module):
    """Encoder-decoder transformer: src [B, 7] and tgt_in [B, T] -> logits [B, T, vocab]."""

    def __init__(self, vocab_size: int = VOCAB_SIZE, d_model: int = 128, num_heads: int = 4,
                 d_ff: int = 256, num_layers: int = 2, dropout: float = 0.1, max_len: int = 16):
        super().__init__()
        self.d_model = d_model
        # Token embedding with std d_model^-1/2, scaled by sqrt(d_model) in embed(): the token
        # signal then has unit scale, like the sinusoidal table. PyTorch's default N(0, 1) with
        # the same multiply would make the position signal a tenth of the token signal.
        self.embedding = nn.Embedding(vocab_size, d_model)
        nn.init.normal_(self.embedding.weight, std=d_model ** -0.5)
        self.register_buffer("position_table", position_table(max_len, d_model),
                             persistent=False)
        self.dropout = nn.Dropout(dropout)
        self.encoder_layers = nn.ModuleList(
            EncoderLayer(d_model, num_heads, d_ff, dropout) for _ in range(num_layers))
        self.decoder_layers = nn.ModuleList(
            DecoderLayer(d_model, num_heads, d_ff, dropout) for _ in range(num_layers))
        self.output = nn.Linear(d_model, vocab_size)

    def embed(self, tokens):
        """tokens [B, T] -> [B, T, d_model]; source and target both start at position 0 of
        the one shared table."""
        x = self.embedding(tokens) * math.sqrt(self.d_model)
        return self.dropout(x + self.position_table[:tokens.size(1)])

    def encode(self, src):
        """src [B, S] -> (memory [B, S, d_model], [per layer self weights [B, h, S, S]])."""
        x = self.embed(src)
        weights = []
        for layer in self.encoder_layers:
            x, w = layer(x)
            weights.append(w)
        return x, weights

    def decode(self, tgt_in, memory):
        """tgt_in [B, T], memory [B, S, d_model] -> (logits [B, T, vocab], self w, cross w)."""
        x = self.embed(tgt_in)
        self_weights, cross_weights = [], []
        for layer in self.decoder_layers:
            x, w_self, w_cross = layer(x, memory)
            self_weights.append(w_self)
            cross_weights.append(w_cross)
        return self.output(x), self_weights, cross_weights

    def forward(self, src, tgt_in):
        """Teacher forcing. Returns (logits [B, T, vocab], attention), with attention =
        {'encoder': [per layer [B, h, S, S]], 'decoder_self': [per layer [B, h, T, T]],
        'decoder_cross': [per layer [B, h, T, S]]}."""
        memory, encoder_weights = self.encode(src)
        logits, self_weights, cross_weights = self.decode(tgt_in, memory)
        attention = {"encoder": encoder_weights, "decoder_self": self_weights,
                     "decoder_cross": cross_weights}
        return logits, attention

    @torch.no_grad()
    def generate(self, src, steps: int = 4, memory=None):
        """Greedy decoding from BOS: src [B, S] -> [B, steps] digit ids.

        The encoder runs once (or not at all when the caller passes its output as memory
        [B, S, d_model]); each step runs the decoder over the prefix decoded so far and
        appends the argmax over the ten digit logits of its last position. Re-running the
        prefix (at most 4 positions) instead of caching keys and values keeps generate on
        the layer interfaces the students implement. Call model.eval() first.
        """
        if memory is None:
            memory, _ = self.encode(src)
        prefix = torch.full((src.size(0), 1), BOS, dtype=torch.long, device=src.device)
        for _ in range(steps):
            logits, _, _ = self.decode(prefix, memory)
            token = logits[:, -1:, :NUM_DIGITS].argmax(dim=-1)  # [B, 1]
            prefix = torch.cat([prefix, token], dim=1)
        return prefix[:, 1:]


def score_predictions(predicted, target) -> tuple[float, float]:
    """predicted, target [N, 4] -> (exact match: the fraction of rows with all four digits
    right, token accuracy: the fraction of digits right), as Python floats."""
    correct = predicted == target  # [N, 4]
    return correct.all(dim=1).sum().item() / len(correct), correct.sum().item() / correct.numel()
