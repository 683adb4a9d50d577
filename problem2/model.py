"""The provided model of Problem 2: one causal attention layer with one head.

Students: given; read it: your positional code runs inside it.

    x      = tok_emb(tokens) [+ pos_emb(positions) | + PE[positions]]     [B, T, d]
    q, k, v = W_q x, W_k x, W_v x            (rotary: q, k rotated by their positions)
    a      = softmax(causal(q k^T / sqrt(d))) v
    logits = head(x + W_o a)                                               [B, T, vocab]

No LayerNorm, no feed-forward block, no dropout. The token embedding keeps nn.Embedding's
N(0, 1) initialization and is not scaled by sqrt(d): scaled, the position signal would be an
eighth of the token signal. The only way to find the token seven places back is through
the attention scores, so the position scheme decides whether the task can be solved:

    none        no position information at all
    learned     a trained table of max_len = 128 rows, added to the embedding
    sinusoidal  the fixed sinusoidal table, added to the embedding
    rotary      nothing added; queries and keys rotated (under rotary the biases of W_q and
                W_k are the only token-independent part of q and k)
"""

import math

import torch
from torch import nn

from problem2.dataset import VOCAB_SIZE
from problem2.positional import apply_rotary, sinusoidal_table

POSITIONS = ("none", "learned", "sinusoidal", "rotary")


class OffsetRetrievalModel(nn.Module):
    def __init__(self, position: str, vocab_size: int = VOCAB_SIZE, d_model: int = 64,
                 max_len: int = 128):
        super().__init__()
        if position not in POSITIONS:
            raise ValueError(f"position must be one of {POSITIONS}, got {position!r}")
        self.position, self.d_model, self.max_len = position, d_model, max_len
        self.tok_emb = nn.Embedding(vocab_size, d_model)
        if position == "learned":
            self.pos_emb = nn.Embedding(max_len, d_model)
        if position == "sinusoidal":
            self.register_buffer("pe", sinusoidal_table(max_len, d_model), persistent=False)
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)
        self.W_o = nn.Linear(d_model, d_model)
        self.head = nn.Linear(d_model, vocab_size)

    def forward(self, tokens: torch.Tensor, return_attention: bool = False):
        """tokens [B, T] -> logits [B, T, vocab] (and attention weights [B, T, T])."""
        T = tokens.shape[1]
        if T > self.max_len:
            raise ValueError(f"sequence length {T} exceeds max_len {self.max_len}")
        positions = torch.arange(T, device=tokens.device)
        x = self.tok_emb(tokens)  # [B, T, d]
        if self.position == "learned":
            x = x + self.pos_emb(positions)
        elif self.position == "sinusoidal":
            x = x + self.pe[:T]

        q, k, v = self.W_q(x), self.W_k(x), self.W_v(x)  # [B, T, d] each
        if self.position == "rotary":
            q, k = apply_rotary(q, positions), apply_rotary(k, positions)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_model)  # [B, T, T]
        causal = torch.ones(T, T, dtype=torch.bool, device=tokens.device).tril()
        scores = scores.masked_fill(~causal, float("-inf"))
        weights = torch.softmax(scores, dim=-1)  # [B, T, T], row i over keys 0..i
        logits = self.head(x + self.W_o(weights @ v))
        return (logits, weights) if return_attention else logits
