"""Problem 1, Part B: attention against PyTorch's own, masks, and the head column layout.

When a result is wrong, the test recomputes here what the common mistakes would give
(unscaled scores, a flipped mask, heads split without the transpose, ...) and names the one
your result matches; the scale has its own test, first, since every later test needs it.
"""

import math

import pytest
import torch
import torch.nn.functional as F

from tests.seam import remote_isinstance, submission
from tests.tiny import expect_raises

pytestmark = pytest.mark.p1b

attention = submission("problem1.attention")
MultiHeadAttention = attention.MultiHeadAttention
causal_mask = attention.causal_mask
scaled_dot_product_attention = attention.scaled_dot_product_attention

CORRECT = "correct"


@pytest.fixture
def qkv():
    g = torch.Generator().manual_seed(0)
    q = torch.randn(3, 2, 5, 8, generator=g)
    k = torch.randn(3, 2, 6, 8, generator=g)
    v = torch.randn(3, 2, 6, 4, generator=g)
    return q, k, v


# ------------------------------------------------------------- the mistakes, recomputed here
def attend(q, k, v, mask=None, scale=None, dim=-1, blocked="-inf", flip=False):
    """softmax(q k^T * scale) v written out here, with one mistake at a time: scale (default
    1/sqrt(d_k)), the softmax's dim, what a blocked score becomes ('-inf'; 'zero': the
    scores multiplied by the mask; 'after': the weights zeroed after the softmax), and the
    mask's polarity (flip: True blocks)."""
    scores = q @ k.transpose(-2, -1) * (1 / math.sqrt(q.size(-1)) if scale is None else scale)
    if mask is not None:
        allowed = ~mask if flip else mask
        if blocked == "-inf":
            scores = scores.masked_fill(~allowed, float("-inf"))
        elif blocked == "zero":
            scores = scores * allowed
    weights = scores.softmax(dim=dim)
    if mask is not None and blocked == "after":
        weights = weights.masked_fill(~mask, 0.0)
    return weights @ v, weights


def sdpa_mistakes(q, k, v, mask=None) -> dict:
    """{mistake: (out, weights) it gives}, the right result first (CORRECT)."""
    d_k = q.size(-1)
    found = {CORRECT: attend(q, k, v, mask),
             "the scores are not divided by sqrt(d_k)": attend(q, k, v, mask, scale=1.0),
             "the scores are divided by d_k instead of sqrt(d_k)": attend(q, k, v, mask,
                                                                          scale=1 / d_k),
             "the softmax is taken over the queries (dim -2) instead of the keys (dim -1)":
                 attend(q, k, v, mask, dim=-2)}
    if mask is not None:
        found.update({
            "the mask's polarity is flipped (True must mean attend, not block)":
                attend(q, k, v, mask, flip=True),
            "blocked scores are multiplied by the mask (0) instead of set to -inf":
                attend(q, k, v, mask, blocked="zero"),
            "the mask is applied after the softmax (weights zeroed, rows no longer sum to 1)":
                attend(q, k, v, mask, blocked="after")})
    return found


def matching(result, mistakes: dict, index=None) -> str | None:
    """The mistake whose result equals result (compared whole, or item index), or None."""
    for name, expected in mistakes.items():
        expected = expected if index is None else expected[index]
        if (name != CORRECT and result.shape == expected.shape
                and torch.allclose(result, expected, atol=1e-5, equal_nan=True)):
            return name
    return None


def sdpa_hint(q, k, v, mask=None) -> str:
    """One clause on what is wrong with the code's scaled_dot_product_attention here."""
    out, weights = scaled_dot_product_attention(q, k, v, mask)
    mistakes = sdpa_mistakes(q, k, v, mask)
    found = matching(weights, mistakes, 1) or matching(out, mistakes, 0)
    if found:
        return f"your result is exactly what it gives when {found}"
    return ("your result matches none of the usual mistakes (scale, softmax dimension, mask "
            "polarity); compare it with torch.nn.functional.scaled_dot_product_attention")


def sdpa_is_right() -> bool:
    """Whether the code's scaled_dot_product_attention passes a probe with a mask."""
    g = torch.Generator().manual_seed(9)
    q, k, v = (torch.randn(1, 2, 3, 4, generator=g) for _ in range(3))
    mask = torch.tensor([[True, False, True], [True, True, False], [False, True, True]])
    out, weights = scaled_dot_product_attention(q, k, v, mask)
    expected, expected_weights = attend(q, k, v, mask)
    return (out.shape == expected.shape and weights.shape == expected_weights.shape
            and torch.allclose(out, expected, atol=1e-5)
            and torch.allclose(weights, expected_weights, atol=1e-5))


FIX_SDPA_FIRST = ("MultiHeadAttention gives the wrong result, and scaled_dot_product_attention "
                  "fails its own tests too: fix scaled_dot_product_attention first (see "
                  "test_sdpa_scales_by_sqrt_dk and test_sdpa_matches_torch_without_mask), then "
                  "run this test again")


# ---------------------------------------------------------------------------- the tests
def test_causal_mask():
    expected = torch.tensor([[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]],
                            dtype=torch.bool)
    mask = causal_mask(4, "cpu")
    assert mask.dtype == torch.bool, (
        f"causal_mask must return a bool tensor (True = attend), not {mask.dtype}")
    known = {"it is True above the diagonal, False on and below: torch's convention (True = "
             "blocked, triu(1)) instead of True = attend": ~expected,
             "it is True on and above the diagonal (triu instead of tril): queries see the "
             "future": expected.T,
             "the diagonal is left out (tril(-1)): a query cannot see its own position":
                 expected.tril(-1)}
    why = next((why for why, wrong in known.items() if torch.equal(mask, wrong)),
               "it is not tril of a matrix of ones")
    assert torch.equal(mask, expected), (
        f"causal_mask must be True on and below the diagonal (query i sees keys 0..i): {why}")
    assert causal_mask(4).dtype == torch.bool, "causal_mask must return a bool tensor"


def test_sdpa_scales_by_sqrt_dk():
    q = torch.tensor([[[[1.0, 1.0, 1.0, 1.0]]]])  # d_k = 4
    k = torch.tensor([[[[1.0, 1.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0]]]])
    v = torch.tensor([[[[1.0, 1.0], [0.0, 0.0]]]])  # d_v = 2: sqrt(d_v) is not sqrt(d_k)
    _, weights = scaled_dot_product_attention(q, k, v)
    # scores 4 / sqrt(4) = 2 and 0: softmax gives e^2 / (e^2 + 1)
    expected = math.exp(2) / (math.exp(2) + 1)
    got = float(weights[0, 0, 0, 0])
    scales = {math.exp(4) / (math.exp(4) + 1): "the scores are not divided by sqrt(d_k)",
              math.exp(1) / (math.exp(1) + 1): "the scores are divided by d_k instead of "
                                               "sqrt(d_k)",
              1 / (1 + math.exp(-4 / math.sqrt(2))): "the scores are divided by sqrt(d_v) "
                                                     "(v's last size) instead of sqrt(d_k)",
              1.0: "the softmax is taken over the queries (dim -2, one query here) instead of "
                   "the keys (dim -1)"}
    wrong = next((why for value, why in scales.items() if got == pytest.approx(value)), None)
    assert got == pytest.approx(expected, rel=1e-5), (
        "scaled_dot_product_attention must divide the scores q . k by sqrt(d_k) before a "
        f"softmax over the keys (score 4 / sqrt(4) = 2 here, weight {expected:.4f}); got "
        f"{got:.4f}: " + (wrong or "is the scale or the softmax wrong?"))


def test_sdpa_matches_torch_without_mask(qkv):
    q, k, v = qkv
    out, weights = scaled_dot_product_attention(q, k, v)
    assert out.shape == (3, 2, 5, 4) and weights.shape == (3, 2, 5, 6), (
        "scaled_dot_product_attention must return out [..., T_q, d_v] and weights "
        "[..., T_q, T_k]")
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v), msg=lambda m: (
        "scaled_dot_product_attention must compute softmax(q k^T / sqrt(d_k)) v, as "
        f"torch.nn.functional.scaled_dot_product_attention does: {sdpa_hint(q, k, v)}\n{m}"))
    torch.testing.assert_close(weights.sum(-1), torch.ones(3, 2, 5), msg=lambda m: (
        "the attention weights of each query must sum to 1 over the keys: is the softmax "
        f"taken over the wrong dimension?\n{m}"))


@pytest.mark.parametrize("shape", ["query_key", "per_sequence"])
def test_sdpa_masks(qkv, shape):
    q, k, v = qkv
    g = torch.Generator().manual_seed(1)
    if shape == "query_key":  # [T_q, T_k], shared by every sequence and head
        mask = torch.rand(5, 6, generator=g) > 0.4
        mask[:, 2] = True
    else:  # [B, 1, 1, T_k], a padding-style mask per sequence
        mask = torch.rand(3, 1, 1, 6, generator=g) > 0.4
        mask[..., 0] = True
    out, weights = scaled_dot_product_attention(q, k, v, mask)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    torch.testing.assert_close(out, expected, msg=lambda m: (
        "a boolean mask must let each query attend where it is True and nowhere else, the "
        f"scores scaled as without a mask: {sdpa_hint(q, k, v, mask)}\n{m}"))
    full = mask.expand(3, 2, 5, 6)
    assert (weights[~full] == 0).all(), (  # exactly zero, not just small
        "masked-out keys must get a weight of exactly 0: fill their scores with -inf before "
        "the softmax (is the mask polarity flipped, or a finite fill value used?)")
    torch.testing.assert_close(weights.sum(-1), torch.ones(3, 2, 5), msg=lambda m: (
        "masked attention weights must still sum to 1 over the keys: is the mask applied "
        f"after the softmax?\n{m}"))


def copy_into_torch(mha, d_model: int, h: int):
    ref = torch.nn.MultiheadAttention(d_model, h, batch_first=True)
    with torch.no_grad():
        ref.in_proj_weight.copy_(torch.cat([mha.W_q.weight, mha.W_k.weight, mha.W_v.weight]))
        ref.in_proj_bias.copy_(torch.cat([mha.W_q.bias, mha.W_k.bias, mha.W_v.bias]))
        ref.out_proj.weight.copy_(mha.W_o.weight)
        ref.out_proj.bias.copy_(mha.W_o.bias)
    return ref


def mha_mistakes(state: dict, h: int, query, key, value, mask=None) -> dict:
    """{mistake: (out, weights)} of multi-head attention written out here from a state dict
    (W_q, W_k, W_v, W_o), with one mistake of the head layout at a time; CORRECT first."""
    def project(name, x):
        return F.linear(x, state[f"{name}.weight"], state[f"{name}.bias"])

    def split(x, how):
        B, T, d = x.shape
        if how == "reshape":  # [B, T, d] read as [B, h, T, d_k]
            return x.reshape(B, h, T, d // h)
        if how == "strided":  # head i gets columns i, i + h, ...
            return x.view(B, T, d // h, h).permute(0, 3, 1, 2)
        return x.view(B, T, h, d // h).transpose(1, 2)

    def merge(x, how):
        B, _, T, d_k = x.shape
        if how == "reshape":
            return x.reshape(B, T, h * d_k)
        return x.transpose(1, 2).reshape(B, T, h * d_k)

    def mha(split_how="block", merge_how="transpose", values_from=value, output=True,
            masked=True):
        q, k = split(project("W_q", query), split_how), split(project("W_k", key), split_how)
        v = split(project("W_v", values_from), split_how)
        out, weights = attend(q, k, v, mask if masked else None)
        out = merge(out, merge_how)
        return (project("W_o", out) if output else out), weights

    found = {CORRECT: mha(),
             "the heads are split by a plain reshape [B, T, d] -> [B, h, T, d_k] without the "
             "transpose (tokens mixed across heads)": mha(split_how="reshape"),
             "the heads are merged back by a plain reshape [B, h, T, d_k] -> [B, T, d] "
             "without the transpose": mha(merge_how="reshape"),
             "both the split and the merge of the heads are plain reshapes without the "
             "transpose": mha(split_how="reshape", merge_how="reshape"),
             "head i gets the strided columns i, i + h, ... instead of the block "
             "i*d_k:(i+1)*d_k": mha(split_how="strided"),
             "the output projection W_o is skipped": mha(output=False)}
    if mask is not None:
        found["the mask is not passed on to scaled_dot_product_attention"] = mha(masked=False)
    if not torch.equal(key, value):
        found["the values are projected from the key input instead of the value input"] = (
            mha(values_from=key))
    return found


def mha_hint(mha, h: int, query, key, value, mask=None) -> str:
    """One clause on what is wrong with the code's MultiHeadAttention here."""
    if not sdpa_is_right():
        return FIX_SDPA_FIRST
    out, weights = mha(query, key, value, mask)
    mistakes = mha_mistakes(mha.state_dict(), h, query, key, value, mask)
    found = matching(out, mistakes, 0)
    if found:
        return f"MultiHeadAttention's output is exactly what it gives when {found}"
    found = matching(weights, mistakes, 1)
    if found:
        return f"MultiHeadAttention's weights are exactly what they are when {found}"
    return ("it matches none of the usual mistakes (heads split or merged without the "
            "transpose, W_o skipped, the mask not passed on); compare it step by step with "
            "torch.nn.MultiheadAttention")


def test_mha_constructor_keeps_its_contract():
    """MultiHeadAttention.__init__'s docstring: four nn.Linear(d_model, d_model) with bias,
    and ValueError when num_heads does not divide d_model. It names no attribute for d_k
    (head_dim, d_head, ... are as good): the head width is checked by what forward returns
    (test_mha_matches_torch_multihead_attention)."""
    mha = MultiHeadAttention(12, 3)
    for name in ("W_q", "W_k", "W_v", "W_o"):
        layer = getattr(mha, name)
        assert tuple(layer.weight.shape) == (12, 12), (
            f"MultiHeadAttention(12, 3).{name} must be nn.Linear(12, 12): its weight is "
            f"{tuple(layer.weight.shape)}")
        assert layer.bias is not None and tuple(layer.bias.shape) == (12,), (
            f"MultiHeadAttention's {name} must have a bias (nn.Linear's default): is it made "
            "with bias=False?")
    expect_raises(ValueError, MultiHeadAttention, 10, 4,
                  what="MultiHeadAttention(10, 4) (4 heads do not divide 10)")


@pytest.mark.parametrize("masked", [False, True])
def test_mha_matches_torch_multihead_attention(masked):
    torch.manual_seed(0)
    mha = MultiHeadAttention(16, 4)
    for name in ("W_q", "W_k", "W_v", "W_o"):
        assert remote_isinstance(getattr(mha, name), "torch.nn.Linear"), (
            f"MultiHeadAttention.{name} must be an nn.Linear")
        assert getattr(mha, name).weight.shape == (16, 16), (
            f"MultiHeadAttention.{name} must map d_model to d_model")
    ref = copy_into_torch(mha, 16, 4)
    x, memory = torch.randn(2, 5, 16), torch.randn(2, 7, 16)
    # a causal mask made here: the code's own causal_mask has its test (test_causal_mask)
    mask = torch.ones(7, 7, dtype=torch.bool).tril()[2:] if masked else None  # [5, 7]
    out, weights = mha(x, memory, memory, mask)
    # torch's boolean attn_mask is True where attention is *not* allowed
    ref_out, ref_weights = ref(x, memory, memory, attn_mask=None if mask is None else ~mask,
                               average_attn_weights=False)
    assert out.shape == (2, 5, 16) and weights.shape == (2, 4, 5, 7), (
        "MultiHeadAttention must return out [B, T_q, d_model] and weights [B, h, T_q, T_k]")
    torch.testing.assert_close(out, ref_out, msg=lambda m: (
        "MultiHeadAttention must match torch.nn.MultiheadAttention with the same weights: "
        f"{mha_hint(mha, 4, x, memory, memory, mask)}\n{m}"))
    torch.testing.assert_close(weights, ref_weights, msg=lambda m: (
        "each head's attention weights must match torch.nn.MultiheadAttention's: "
        f"{mha_hint(mha, 4, x, memory, memory, mask)}\n{m}"))


def test_mha_projects_keys_and_values_from_their_own_inputs():
    torch.manual_seed(1)
    mha = MultiHeadAttention(16, 4)
    ref = copy_into_torch(mha, 16, 4)
    query, key, value = torch.randn(2, 3, 16), torch.randn(2, 6, 16), torch.randn(2, 6, 16)
    out, _ = mha(query, key, value)
    ref_out, _ = ref(query, key, value)
    torch.testing.assert_close(out, ref_out, msg=lambda m: (
        "MultiHeadAttention(query, key, value) must project each input with its own "
        f"projection (W_q query, W_k key, W_v value): {mha_hint(mha, 4, query, key, value)}"
        f"\n{m}"))


def test_head_column_layout():
    """Head i reads columns i*d_k:(i+1)*d_k of q, k, v and writes them into W_o's input."""
    torch.manual_seed(0)
    d_model, h = 8, 4
    d_k = d_model // h
    mha = MultiHeadAttention(d_model, h)
    identity = {f"{name}.{p}": torch.eye(d_model) if p == "weight" else torch.zeros(d_model)
                for name in ("W_v", "W_o") for p in ("weight", "bias")}
    mha.load_state_dict(identity, strict=False)  # identity value and output projections
    x = torch.randn(2, 3, d_model)
    out, weights = mha(x, x, x)
    for i in range(h):
        cols = slice(i * d_k, (i + 1) * d_k)
        torch.testing.assert_close(out[..., cols], weights[:, i] @ x[..., cols])
    # Changing the query projection of head 2's columns only changes head 2's weights.
    w_q = mha.W_q.weight
    w_q[2 * d_k:3 * d_k] += 1.0
    mha.load_state_dict({"W_q.weight": w_q}, strict=False)
    _, changed = mha(x, x, x)
    for i in range(h):
        assert torch.allclose(changed[:, i], weights[:, i]) == (i != 2)
