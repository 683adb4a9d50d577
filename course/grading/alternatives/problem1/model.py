"""Instructors only: an alternative solution of problem1/model.py's regions.

The same post-norm maths as the reference, written as a loop over (sublayer, norm) pairs
that share one residual-plus-norm step; the constructors' modules are used as provided.
"""

import torch
from torch import nn

from problem1.attention import causal_mask


class EncoderLayer(nn.Module):
    def forward(self, x, mask=None):
        """x [B, T, d_model] -> (x [B, T, d_model], self-attention weights [B, h, T, T])."""
        # BEGIN SOLUTION
        kept = {}

        def self_attention(h: torch.Tensor) -> torch.Tensor:
            mixed, kept["self"] = self.self_attn(h, h, h, mask=mask)
            return mixed

        stream = x
        for sublayer, norm in ((self_attention, self.norm1), (self.ffn, self.norm2)):
            update = self.dropout(sublayer(stream))
            stream = norm(update + stream)
        return stream, kept["self"]
        # END SOLUTION


class DecoderLayer(nn.Module):
    def forward(self, x, memory, self_mask=None, memory_mask=None):
        """x [B, T, d_model], memory [B, S, d_model]; self_mask None means causal.

        Returns (x [B, T, d_model], self weights [B, h, T, T], cross weights [B, h, T, S]).
        """
        # BEGIN SOLUTION
        target_mask = causal_mask(x.shape[1], device=x.device) if self_mask is None else self_mask
        kept = {}

        def masked_self_attention(h: torch.Tensor) -> torch.Tensor:
            mixed, kept["self"] = self.self_attn(h, h, h, mask=target_mask)
            return mixed

        def memory_attention(h: torch.Tensor) -> torch.Tensor:
            mixed, kept["cross"] = self.cross_attn(h, memory, memory, mask=memory_mask)
            return mixed

        stream = x
        stages = ((masked_self_attention, self.norm1), (memory_attention, self.norm2),
                  (self.ffn, self.norm3))
        for sublayer, norm in stages:
            stream = norm(self.dropout(sublayer(stream)) + stream)
        return stream, kept["self"], kept["cross"]
        # END SOLUTION
