"""Alternative solutions for problem3/model.py (instructors only).

No key/value cache: the model accepts the optional kv_cache argument and ignores it, so
every call runs the whole sequence. q, k and v are three separate projections, and the
heads are attended one at a time.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


def causal_mask(size: int, device=None) -> torch.Tensor:
    """[size, size] bool, True on and below the diagonal (query i may attend to keys j <= i)."""
    position = torch.arange(size, device=device)
    return position.unsqueeze(1) >= position.unsqueeze(0)


def _heads_of_mask(mask: torch.Tensor | None, batch: int, num_heads: int, queries: int,
                   keys: int) -> list:
    """One boolean mask per head, each broadcastable to [batch, queries, keys]."""
    if mask is None:
        return [None] * num_heads
    full = torch.broadcast_to(mask, (batch, num_heads, queries, keys))
    return [full[:, head] for head in range(num_heads)]


class Block(nn.Module):
    """One transformer block: causal self-attention and a GELU FFN, each with a residual."""

    def attention(self, x: torch.Tensor, mask: torch.Tensor | None,
                  kv_cache: dict | None = None) -> torch.Tensor:
        """Multi-head causal self-attention: x [B, T, d] -> [B, T, d].

        With kv_cache (a dict, possibly empty), the keys and values of x are appended to
        those cached from earlier calls and x attends to all of them.
        """
        batch, length, width = x.shape
        head_dim = width // self.num_heads
        queries = self.q_proj(x)
        keys = self.k_proj(x)
        values = self.v_proj(x)
        masks = _heads_of_mask(mask, batch, self.num_heads, length, length)
        per_head = []
        for head in range(self.num_heads):
            cols = slice(head * head_dim, (head + 1) * head_dim)
            per_head.append(F.scaled_dot_product_attention(
                queries[..., cols], keys[..., cols], values[..., cols], attn_mask=masks[head]))
        return self.out_proj(torch.cat(per_head, dim=-1))

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None,
                kv_cache: dict | None = None) -> torch.Tensor:
        """x [B, T, d_model], mask bool broadcastable to [B, h, T, T_keys] -> [B, T, d_model]."""
        sublayers = ((self.ln1, lambda y: self.attention(y, mask)), (self.ln2, self.ffn))
        for layer_norm, sublayer in sublayers:
            if self.norm == "post":
                x = layer_norm(x + self.dropout(sublayer(x)))
            else:
                x = x + self.dropout(sublayer(layer_norm(x)))
        return x


class DecoderLM(nn.Module):
    """Decoder-only LM: input_ids [B, T] -> next-token logits [B, T, vocab_size].

    Its modules have these names, which train.py and the tests use: tok_emb and pos_emb
    (nn.Embedding), dropout, blocks (an nn.ModuleList of Block), ln_f (nn.LayerNorm for
    'pre', nn.Identity for 'post') and head (nn.Linear(d_model, vocab_size)).
    """

    def __init__(self, vocab_size: int, d_model: int = 128, num_layers: int = 4,
                 num_heads: int = 4, d_ff: int = 512, max_len: int = 52,
                 dropout: float = 0.1, norm: str = "pre"):
        super().__init__()
        self.max_len = max_len
        self.tok_emb = nn.Embedding(num_embeddings=vocab_size, embedding_dim=d_model)
        self.pos_emb = nn.Embedding(num_embeddings=max_len, embedding_dim=d_model)
        self.dropout = nn.Dropout(p=dropout)
        layers = []
        for _ in range(num_layers):
            layers.append(Block(d_model, num_heads, d_ff, dropout, norm))
        self.blocks = nn.ModuleList(layers)
        if norm == "pre":
            self.ln_f = nn.LayerNorm(d_model)
        else:
            self.ln_f = nn.Identity()
        self.head = nn.Linear(in_features=d_model, out_features=vocab_size)

    def forward(self, input_ids: torch.Tensor,
                kv_cache: list[dict] | None = None) -> torch.Tensor:
        """input_ids [B, T] -> logits [B, T, vocab_size].

        A sequence longer than max_len raises ValueError. kv_cache (optional, see the module
        docstring), a list of one dict per block (empty at the first call), makes the call
        incremental: input_ids are then the tokens that follow those already cached.
        """
        length = input_ids.size(1)
        if length > self.max_len:
            raise ValueError(f"input has {length} positions but the position table only has "
                             f"max_len = {self.max_len} rows")
        where = torch.arange(length, device=input_ids.device).unsqueeze(0)
        hidden = self.dropout(self.tok_emb(input_ids) + self.pos_emb(where))
        allowed = causal_mask(length, device=input_ids.device)
        for block in self.blocks:
            hidden = block(hidden, allowed)
        return self.head(self.ln_f(hidden))
