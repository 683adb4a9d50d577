"""Hidden tests, Problem 1 Part B: attention from other angles: padding masks with a different
length per sequence, the scale at another d_k, float64, split_heads' promise, and multi-head
cross-attention against torch.nn.MultiheadAttention with a key padding mask."""

import math

import pytest
import torch
import torch.nn.functional as F

from tests.seam import submission

pytestmark = pytest.mark.p1b

attention = submission("problem1.attention")
MultiHeadAttention = attention.MultiHeadAttention
causal_mask = attention.causal_mask
scaled_dot_product_attention = attention.scaled_dot_product_attention


def test_causal_mask_by_hand():
    for size in (1, 2, 5):
        mask = causal_mask(size, "cpu")
        assert mask.dtype == torch.bool and mask.shape == (size, size)
        assert mask.tolist() == [[j <= i for j in range(size)] for i in range(size)]


def test_padding_mask_equals_attention_over_the_kept_keys_only():
    g = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(3, 2, 4, 8, generator=g), torch.randn(3, 2, 6, 8, generator=g),
               torch.randn(3, 2, 6, 5, generator=g))
    lengths = [6, 3, 1]  # keys kept per sequence
    mask = torch.zeros(3, 1, 1, 6, dtype=torch.bool)
    for b, n in enumerate(lengths):
        mask[b, ..., :n] = True
    out, weights = scaled_dot_product_attention(q, k, v, mask)
    assert out.shape == (3, 2, 4, 5) and weights.shape == (3, 2, 4, 6), (
        "scaled_dot_product_attention with a [B, 1, 1, T_k] padding mask must return out "
        f"[3, 2, 4, 5] and weights [3, 2, 4, 6], not {list(out.shape)} and "
        f"{list(weights.shape)}: is the mask broadcast against the scores?")
    for b, n in enumerate(lengths):
        expected = F.scaled_dot_product_attention(q[b:b + 1], k[b:b + 1, :, :n], v[b:b + 1, :, :n])
        leaked = weights[b, ..., n:].abs().sum().item()
        assert leaked == 0, (
            f"sequence {b} keeps its first {n} keys only (a [B, 1, 1, T_k] mask), but the "
            f"masked keys get weight ({leaked:.3g} in all): is the mask applied per sequence (its "
            "batch dimension kept), with -inf before the softmax?")
        torch.testing.assert_close(out[b:b + 1], expected, msg=lambda m, b=b, n=n: (
            f"with a padding mask, sequence {b} must attend exactly as if it had only its first "
            f"{n} keys (softmax over the kept keys only)\n{m}"))
    sums = weights.sum(-1)
    torch.testing.assert_close(sums, torch.ones(3, 2, 4), msg=lambda m: (
        "every query's weights must sum to 1 over the keys (softmax over the last dimension) "
        f"under a padding mask; they sum to {sums.min().item():.3g}..{sums.max().item():.3g}"
        f"\n{m}"))


def test_causal_mask_keeps_the_first_query_on_the_first_key():
    g = torch.Generator().manual_seed(4)
    q, k, v = (torch.randn(2, 3, 5, 4, generator=g) for _ in range(3))
    out, weights = scaled_dot_product_attention(q, k, v, causal_mask(5))
    first = weights[..., 0, 0]
    assert (first == 1).all(), (  # True = attend: query 0 sees key 0 only
        "under causal_mask(5), query 0 sees key 0 only, so its weight there must be 1, not "
        f"{first.min().item():.3g}: is the mask's True read as blocked, or the diagonal hidden?")
    torch.testing.assert_close(out[..., 0, :], v[..., 0, :], msg=lambda m: (
        f"under causal_mask(5), query 0's output must be value 0 exactly\n{m}"))
    assert (weights.triu(1) == 0).all()


def test_scale_at_d_k_16_and_float64():
    # q . k = 8 for the first key and 0 for the second; divided by sqrt(16) = 4: scores 2, 0.
    q = torch.full((1, 1, 1, 16), 0.5, dtype=torch.float64)
    k = torch.stack([torch.ones(16), torch.zeros(16)]).double()[None, None]
    v = torch.tensor([[[[3.0, 1.0], [-1.0, 5.0]]]], dtype=torch.float64)
    out, weights = scaled_dot_product_attention(q, k, v)
    w = math.exp(2) / (math.exp(2) + 1)
    assert out.dtype == torch.float64 and weights.dtype == torch.float64, (
        f"float64 inputs must give float64 out and weights, not {out.dtype} and {weights.dtype}")
    got = weights[0, 0, 0].tolist()
    unscaled = math.exp(8) / (math.exp(8) + 1)
    assert got == pytest.approx([w, 1 - w], abs=1e-12), (
        f"at d_k = 16 the scores q.k = 8 and 0 are divided by sqrt(16) = 4, so the weights are "
        f"[{w:.6f}, {1 - w:.6f}], not {[round(x, 6) for x in got]}"
        + (": the scores are not scaled" if got[0] == pytest.approx(unscaled) else
           ": is the scale 1/d_k or a fixed number instead of 1/sqrt(d_k)?"))
    assert out[0, 0, 0].tolist() == pytest.approx([3 * w - (1 - w), w + 5 * (1 - w)], abs=1e-12), (
        "out must be the weights times v, to float64 precision: is it computed in float32?")


def test_split_heads_gives_head_i_its_columns():
    mha = MultiHeadAttention(12, 3)
    x = torch.arange(2 * 5 * 12, dtype=torch.float32).view(2, 5, 12)
    heads = mha.split_heads(x)
    assert heads.shape == (2, 3, 5, 4), (
        f"split_heads of [2, 5, 12] with 3 heads must be [2, 3, 5, 4], not {list(heads.shape)}")
    for i in range(3):
        assert torch.equal(heads[:, i], x[..., 4 * i:4 * (i + 1)])


def test_cross_attention_with_key_padding_matches_torch():
    d_model, h = 12, 3
    submission("torch").manual_seed(5)
    mha = MultiHeadAttention(d_model, h)
    torch.manual_seed(5)
    ref = torch.nn.MultiheadAttention(d_model, h, batch_first=True)
    state = mha.state_dict()
    with torch.no_grad():
        ref.in_proj_weight.copy_(torch.cat([state[f"W_{p}.weight"] for p in "qkv"]))
        ref.in_proj_bias.copy_(torch.cat([state[f"W_{p}.bias"] for p in "qkv"]))
        ref.out_proj.weight.copy_(state["W_o.weight"])
        ref.out_proj.bias.copy_(state["W_o.bias"])
    query, memory = torch.randn(2, 3, d_model), torch.randn(2, 5, d_model)
    keep = torch.tensor([[True] * 5, [True, True, False, False, False]])
    out, weights = mha(query, memory, memory, keep[:, None, None, :])
    ref_out, ref_weights = ref(query, memory, memory, key_padding_mask=~keep,
                               average_attn_weights=False)
    assert out.shape == (2, 3, d_model) and weights.shape == (2, h, 3, 5), (
        f"cross-attention of 3 queries over 5 keys must return out [2, 3, {d_model}] and weights "
        f"[2, {h}, 3, 5], not {list(out.shape)} and {list(weights.shape)}")
    torch.testing.assert_close(weights, ref_weights, msg=lambda m: (
        "MultiHeadAttention's weights must equal torch.nn.MultiheadAttention's (same weights, "
        "key padding mask) head by head: are the masked keys given weight, or the heads split "
        f"differently?\n{m}"))
    torch.testing.assert_close(out, ref_out, msg=lambda m: (
        "MultiHeadAttention's output must equal torch.nn.MultiheadAttention's (same weights) "
        "while its weights do: are the heads merged in another order before W_o, or W_o "
        f"skipped?\n{m}"))
    # the hidden keys of sequence 1 do not matter at all
    changed = memory.clone()
    changed[1, 2:] = torch.randn(3, d_model)
    out2, _ = mha(query, changed, changed, keep[:, None, None, :])
    torch.testing.assert_close(out2, out, msg=lambda m: (
        "changing only masked-out keys and values must not change MultiHeadAttention's output: "
        f"does the mask reach scaled_dot_product_attention?\n{m}"))


def test_mha_keys_and_values_may_differ():
    submission("torch").manual_seed(6)
    mha = MultiHeadAttention(8, 2)
    torch.manual_seed(6)
    query, key, value = torch.randn(1, 2, 8), torch.randn(1, 4, 8), torch.randn(1, 4, 8)
    out, weights = mha(query, key, value)
    state = mha.state_dict()

    def project(name, x):  # the projection W_name of MultiHeadAttention, here
        return F.linear(x, state[f"{name}.weight"], state[f"{name}.bias"])

    q = project("W_q", query).view(1, 2, 2, 4).transpose(1, 2)
    k = project("W_k", key).view(1, 4, 2, 4).transpose(1, 2)
    v = project("W_v", value).view(1, 4, 2, 4).transpose(1, 2)
    expected = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(1, 2, 8)
    torch.testing.assert_close(out, project("W_o", expected), msg=lambda m: (
        "MultiHeadAttention must project the query, key and value inputs each with its own "
        f"projection: are the values projected from the key input?\n{m}"))
    assert weights.shape == (1, 2, 2, 4), (
        "MultiHeadAttention's weights must be [B, h, T_q, T_k], T_k the key input's length")
