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
    assert out.shape == (3, 2, 4, 5) and weights.shape == (3, 2, 4, 6)
    for b, n in enumerate(lengths):
        expected = F.scaled_dot_product_attention(q[b:b + 1], k[b:b + 1, :, :n], v[b:b + 1, :, :n])
        torch.testing.assert_close(out[b:b + 1], expected)
        assert (weights[b, ..., n:] == 0).all()
    torch.testing.assert_close(weights.sum(-1), torch.ones(3, 2, 4))


def test_causal_mask_keeps_the_first_query_on_the_first_key():
    g = torch.Generator().manual_seed(4)
    q, k, v = (torch.randn(2, 3, 5, 4, generator=g) for _ in range(3))
    out, weights = scaled_dot_product_attention(q, k, v, causal_mask(5))
    assert (weights[..., 0, 0] == 1).all()  # True = attend: query 0 sees key 0 only
    torch.testing.assert_close(out[..., 0, :], v[..., 0, :])
    assert (weights.triu(1) == 0).all()


def test_scale_at_d_k_16_and_float64():
    # q . k = 8 for the first key and 0 for the second; divided by sqrt(16) = 4: scores 2, 0.
    q = torch.full((1, 1, 1, 16), 0.5, dtype=torch.float64)
    k = torch.stack([torch.ones(16), torch.zeros(16)]).double()[None, None]
    v = torch.tensor([[[[3.0, 1.0], [-1.0, 5.0]]]], dtype=torch.float64)
    out, weights = scaled_dot_product_attention(q, k, v)
    w = math.exp(2) / (math.exp(2) + 1)
    assert out.dtype == torch.float64 and weights.dtype == torch.float64
    assert weights[0, 0, 0].tolist() == pytest.approx([w, 1 - w], abs=1e-12)
    assert out[0, 0, 0].tolist() == pytest.approx([3 * w - (1 - w), w + 5 * (1 - w)], abs=1e-12)


def test_split_heads_gives_head_i_its_columns():
    mha = MultiHeadAttention(12, 3)
    x = torch.arange(2 * 5 * 12, dtype=torch.float32).view(2, 5, 12)
    heads = mha.split_heads(x)
    assert heads.shape == (2, 3, 5, 4)
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
    assert out.shape == (2, 3, d_model) and weights.shape == (2, h, 3, 5)
    torch.testing.assert_close(out, ref_out)
    torch.testing.assert_close(weights, ref_weights)
    # the hidden keys of sequence 1 do not matter at all
    changed = memory.clone()
    changed[1, 2:] = torch.randn(3, d_model)
    out2, _ = mha(query, changed, changed, keep[:, None, None, :])
    torch.testing.assert_close(out2, out)


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
