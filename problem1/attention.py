"""Problem 1, Part B: scaled dot-product attention and multi-head attention.

Students: you write the functions marked `raise NotImplementedError`; read the whole file.

Masks are boolean, True where attention is allowed, and broadcast to [B, h, T_q, T_k]:
a [T_q, T_k] mask (e.g. causal_mask) applies to every sequence and head, a [B, 1, 1, T_k]
mask to every head and query of its sequence. A query row must keep at least one key.
"""

import math

import torch
from torch import nn


def scaled_dot_product_attention(q, k, v, mask=None):
    """softmax(q k^T / sqrt(d_k)) v.

    q [B, h, T_q, d_k], k [B, h, T_k, d_k], v [B, h, T_k, d_v], mask broadcastable to
    [B, h, T_q, T_k] (True = attend). Returns (out [B, h, T_q, d_v], weights [B, h, T_q, T_k]);
    masked scores are -inf before the softmax, so their weights are exactly zero.
    """
    # BEGIN SOLUTION
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # [B, h, T_q, T_k]
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(dim=-1)
    return weights @ v, weights
    # END SOLUTION


def causal_mask(size: int, device=None) -> torch.Tensor:
    """[size, size] bool, True on and below the diagonal: query i sees keys 0..i."""
    # BEGIN SOLUTION
    return torch.ones(size, size, dtype=torch.bool, device=device).tril()
    # END SOLUTION


class MultiHeadAttention(nn.Module):
    """h heads of scaled dot-product attention with projections W_q, W_k, W_v, W_o.

    Head i reads columns i*d_k:(i+1)*d_k of the projected queries, keys and values, and its
    output enters W_o through the same input columns (so zeroing those columns of
    W_o.weight removes head i).
    """

    def __init__(self, d_model: int, num_heads: int):
        """Four projections W_q, W_k, W_v, W_o, each nn.Linear(d_model, d_model) with bias,
        and d_k = d_model // num_heads; ValueError if num_heads does not divide d_model."""
        super().__init__()
        # BEGIN SOLUTION
        if d_model % num_heads:
            raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
        self.num_heads = num_heads
        self.d_k = d_model // num_heads
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)
        self.W_o = nn.Linear(d_model, d_model)
        # END SOLUTION

    def split_heads(self, x):
        """[B, T, d_model] -> [B, h, T, d_k]: head i gets columns i*d_k:(i+1)*d_k."""
        # BEGIN SOLUTION
        return x.unflatten(-1, (self.num_heads, self.d_k)).transpose(1, 2)
        # END SOLUTION

    def forward(self, query, key, value, mask=None):
        """query [B, T_q, d_model], key and value [B, T_k, d_model].

        Returns (out [B, T_q, d_model], weights [B, h, T_q, T_k]).
        """
        # BEGIN SOLUTION
        q = self.split_heads(self.W_q(query))
        k = self.split_heads(self.W_k(key))
        v = self.split_heads(self.W_v(value))
        out, weights = scaled_dot_product_attention(q, k, v, mask)  # [B, h, T_q, d_k]
        out = out.transpose(1, 2).flatten(2)  # [B, T_q, d_model], head i in columns i*d_k..
        return self.W_o(out), weights
        # END SOLUTION
