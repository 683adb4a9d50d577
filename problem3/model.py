"""A GPT-style decoder-only language model over SMILES tokens (Problem 3, Part B).

Students: you write the functions marked `raise NotImplementedError`; read the whole file.

    DecoderLM: token embedding + learned position embedding (neither scaled) -> dropout
               -> num_layers x Block -> final LayerNorm ('pre' only) -> linear head

Block, with norm = 'pre' (GPT-2) or 'post' (Vaswani et al.):
    pre:  x = x + Drop(Attn(LN1(x)));  x = x + Drop(FFN(LN2(x)))
    post: x = LN1(x + Drop(Attn(x)));  x = LN2(x + Drop(FFN(x)))

Attention is F.scaled_dot_product_attention with a boolean causal mask (True = may attend)
and no dropout on the attention weights. Every module keeps PyTorch's default
initialization.

The kv_cache arguments are an optional extension that the homework does not ask for: with
it, sampling costs one position's work per new token instead of re-running the prefix. A
model that ignores kv_cache (and a sampler that never passes it) is just as correct.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

NORMS = ("pre", "post")


def causal_mask(size: int, device=None) -> torch.Tensor:
    """[size, size] bool, True on and below the diagonal (query i may attend to keys j <= i)."""
    # BEGIN SOLUTION
    return torch.ones(size, size, dtype=torch.bool, device=device).tril()
    # END SOLUTION


class Block(nn.Module):
    """One transformer block: causal self-attention and a GELU FFN, each with a residual."""

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float, norm: str):
        super().__init__()
        if norm not in NORMS:
            raise ValueError(f"norm must be one of {NORMS}, got {norm!r}")
        if d_model % num_heads:
            raise ValueError(f"d_model {d_model} is not divisible by num_heads {num_heads}")
        self.norm, self.num_heads = norm, num_heads
        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(d_model, d_model)
        self.v_proj = nn.Linear(d_model, d_model)
        self.out_proj = nn.Linear(d_model, d_model)
        self.ffn = nn.Sequential(nn.Linear(d_model, d_ff), nn.GELU(), nn.Linear(d_ff, d_model))
        self.ln1 = nn.LayerNorm(d_model)
        self.ln2 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def attention(self, x: torch.Tensor, mask: torch.Tensor | None,
                  kv_cache: dict | None = None) -> torch.Tensor:
        """Multi-head causal self-attention: x [B, T, d] -> [B, T, d].

        With kv_cache (a dict, possibly empty), the keys and values of x are appended to
        those cached from earlier calls and x attends to all of them.
        """
        # BEGIN SOLUTION
        B, T, d = x.shape
        h = self.num_heads
        # One matmul for the three projections: [B, T, 3d] -> three [B, h, T, d/h].
        weight = torch.cat([self.q_proj.weight, self.k_proj.weight, self.v_proj.weight])
        bias = torch.cat([self.q_proj.bias, self.k_proj.bias, self.v_proj.bias])
        qkv = F.linear(x, weight, bias).view(B, T, 3, h, d // h).transpose(1, 3)
        q, k, v = qkv.unbind(2)
        if kv_cache is not None:
            if "k" in kv_cache:
                k = torch.cat([kv_cache["k"], k], dim=2)
                v = torch.cat([kv_cache["v"], v], dim=2)
            kv_cache["k"], kv_cache["v"] = k, v
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return self.out_proj(out.transpose(1, 2).reshape(B, T, d))
        # END SOLUTION

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None,
                kv_cache: dict | None = None) -> torch.Tensor:
        """x [B, T, d_model], mask bool broadcastable to [B, h, T, T_keys] -> [B, T, d_model]."""
        # BEGIN SOLUTION
        if self.norm == "pre":
            x = x + self.dropout(self.attention(self.ln1(x), mask, kv_cache))
            x = x + self.dropout(self.ffn(self.ln2(x)))
        else:
            x = self.ln1(x + self.dropout(self.attention(x, mask, kv_cache)))
            x = self.ln2(x + self.dropout(self.ffn(x)))
        return x
        # END SOLUTION


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
        # BEGIN SOLUTION
        self.tok_emb = nn.Embedding(vocab_size, d_model)
        self.pos_emb = nn.Embedding(max_len, d_model)
        self.dropout = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(
            Block(d_model, num_heads, d_ff, dropout, norm) for _ in range(num_layers))
        self.ln_f = nn.LayerNorm(d_model) if norm == "pre" else nn.Identity()
        self.head = nn.Linear(d_model, vocab_size)
        # END SOLUTION

    def forward(self, input_ids: torch.Tensor,
                kv_cache: list[dict] | None = None) -> torch.Tensor:
        """input_ids [B, T] -> logits [B, T, vocab_size].

        A sequence longer than max_len raises ValueError. kv_cache (optional, see the module
        docstring), a list of one dict per block (empty at the first call), makes the call
        incremental: input_ids are then the tokens that follow those already cached.
        """
        # BEGIN SOLUTION
        B, T = input_ids.shape
        start = 0 if not kv_cache or "k" not in kv_cache[0] else kv_cache[0]["k"].shape[2]
        if start + T > self.max_len:
            raise ValueError(f"sequence of {start + T} positions exceeds max_len {self.max_len}")
        positions = torch.arange(start, start + T, device=input_ids.device)
        x = self.dropout(self.tok_emb(input_ids) + self.pos_emb(positions))
        # New queries sit at positions start..start+T-1 and may see keys 0..their own.
        mask = causal_mask(start + T, input_ids.device)[start:]
        for i, block in enumerate(self.blocks):
            x = block(x, mask, None if kv_cache is None else kv_cache[i])
        return self.head(self.ln_f(x))
        # END SOLUTION
