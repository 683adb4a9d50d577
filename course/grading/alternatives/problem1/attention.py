"""Instructors only: an alternative solution of problem1/attention.py's regions.

einsum scores, the dtype's minimum for masked scores with a hand-written softmax, a causal
mask from index comparison, and multi-head attention as an explicit loop over the heads.
"""

import math

import torch
from torch import nn


def _head_slice(mask, head: int):
    """The part of a mask (broadcastable to [B, h, T_q, T_k]) that applies to one head, kept
    broadcastable to [B, 1, T_q, T_k]."""
    if mask is None or mask.dim() < 3 or mask.shape[-3] == 1:
        return mask
    return mask[..., head:head + 1, :, :]


def scaled_dot_product_attention(q, k, v, mask=None):
    """softmax(q k^T / sqrt(d_k)) v.

    q [B, h, T_q, d_k], k [B, h, T_k, d_k], v [B, h, T_k, d_v], mask broadcastable to
    [B, h, T_q, T_k] (True = attend). Returns (out [B, h, T_q, d_v], weights [B, h, T_q, T_k]);
    masked scores are -inf before the softmax, so their weights are exactly zero.
    """
    # BEGIN SOLUTION
    inverse_scale = 1.0 / math.sqrt(k.shape[-1])
    logits = torch.einsum("...id,...jd->...ij", q, k) * inverse_scale
    if mask is not None:
        lowest = torch.finfo(logits.dtype).min
        logits = torch.where(mask, logits, torch.full_like(logits, lowest))
    # softmax written out: subtract the row maximum, exponentiate, normalize
    shifted = logits - logits.amax(dim=-1, keepdim=True)
    unnormalized = torch.exp(shifted)  # exp(min - max) underflows to exactly 0
    attn = unnormalized / unnormalized.sum(dim=-1, keepdim=True)
    mixed = torch.einsum("...ij,...jd->...id", attn, v)
    return mixed, attn
    # END SOLUTION


def causal_mask(size: int, device=None) -> torch.Tensor:
    """[size, size] bool, True on and below the diagonal: query i sees keys 0..i."""
    # BEGIN SOLUTION
    index = torch.arange(size, device=device)
    return index.unsqueeze(1) >= index.unsqueeze(0)
    # END SOLUTION


class MultiHeadAttention(nn.Module):
    """h heads of scaled dot-product attention with projections W_q, W_k, W_v, W_o.

    Head i reads columns i*d_k:(i+1)*d_k of the projected queries, keys and values, and its
    output enters W_o through the same input columns (so zeroing those columns of
    W_o.weight removes head i).
    """

    def __init__(self, d_model: int, num_heads: int):
        super().__init__()
        # BEGIN SOLUTION
        if num_heads < 1 or d_model % num_heads != 0:
            raise ValueError(f"num_heads={num_heads} must divide d_model={d_model} evenly")
        self._head_count = num_heads
        self._head_width = d_model // num_heads
        for projection in ("W_q", "W_k", "W_v", "W_o"):
            setattr(self, projection, nn.Linear(d_model, d_model))
        # END SOLUTION

    def split_heads(self, x):
        """[B, T, d_model] -> [B, h, T, d_k]: head i gets columns i*d_k:(i+1)*d_k."""
        # BEGIN SOLUTION
        width = self._head_width
        columns = [x[..., head * width:(head + 1) * width] for head in range(self._head_count)]
        return torch.stack(columns, dim=1)
        # END SOLUTION

    def forward(self, query, key, value, mask=None):
        """query [B, T_q, d_model], key and value [B, T_k, d_model].

        Returns (out [B, T_q, d_model], weights [B, h, T_q, T_k]).
        """
        # BEGIN SOLUTION
        queries = self.split_heads(self.W_q(query))
        keys = self.split_heads(self.W_k(key))
        values = self.split_heads(self.W_v(value))
        head_outputs, head_weights = [], []
        for head in range(self._head_count):
            one = slice(head, head + 1)
            mixed, attn = scaled_dot_product_attention(queries[:, one], keys[:, one],
                                                       values[:, one], _head_slice(mask, head))
            head_outputs.append(mixed[:, 0])  # [B, T_q, d_k]
            head_weights.append(attn)  # [B, 1, T_q, T_k]
        concatenated = torch.cat(head_outputs, dim=-1)  # head i in columns i*d_k:(i+1)*d_k
        return self.W_o(concatenated), torch.cat(head_weights, dim=1)
        # END SOLUTION
