"""Problem 1, Part B: attention against PyTorch's own, masks, and the head column layout."""

import pytest
import torch
import torch.nn.functional as F

from problem1.attention import MultiHeadAttention, causal_mask, scaled_dot_product_attention

pytestmark = pytest.mark.p1b


@pytest.fixture
def qkv():
    g = torch.Generator().manual_seed(0)
    q = torch.randn(3, 2, 5, 8, generator=g)
    k = torch.randn(3, 2, 6, 8, generator=g)
    v = torch.randn(3, 2, 6, 4, generator=g)
    return q, k, v


def test_causal_mask():
    expected = torch.tensor([[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]],
                            dtype=torch.bool)
    assert torch.equal(causal_mask(4, "cpu"), expected)
    assert causal_mask(4).dtype == torch.bool


def test_sdpa_matches_torch_without_mask(qkv):
    q, k, v = qkv
    out, weights = scaled_dot_product_attention(q, k, v)
    assert out.shape == (3, 2, 5, 4) and weights.shape == (3, 2, 5, 6)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v))
    torch.testing.assert_close(weights.sum(-1), torch.ones(3, 2, 5))


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
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask))
    full = mask.expand(3, 2, 5, 6)
    assert (weights[~full] == 0).all()  # exactly zero, not just small
    torch.testing.assert_close(weights.sum(-1), torch.ones(3, 2, 5))


def test_sdpa_scales_by_sqrt_dk():
    q = torch.tensor([[[[1.0, 1.0, 1.0, 1.0]]]])  # d_k = 4
    k = torch.tensor([[[[1.0, 1.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0]]]])
    v = torch.tensor([[[[1.0], [0.0]]]])
    _, weights = scaled_dot_product_attention(q, k, v)
    # scores 4 / sqrt(4) = 2 and 0: softmax gives e^2 / (e^2 + 1)
    expected = torch.tensor(2.0).exp() / (torch.tensor(2.0).exp() + 1)
    torch.testing.assert_close(weights[0, 0, 0, 0], expected)


def copy_into_torch(mha: MultiHeadAttention, d_model: int, h: int):
    ref = torch.nn.MultiheadAttention(d_model, h, batch_first=True)
    with torch.no_grad():
        ref.in_proj_weight.copy_(torch.cat([mha.W_q.weight, mha.W_k.weight, mha.W_v.weight]))
        ref.in_proj_bias.copy_(torch.cat([mha.W_q.bias, mha.W_k.bias, mha.W_v.bias]))
        ref.out_proj.weight.copy_(mha.W_o.weight)
        ref.out_proj.bias.copy_(mha.W_o.bias)
    return ref


@pytest.mark.parametrize("masked", [False, True])
def test_mha_matches_torch_multihead_attention(masked):
    torch.manual_seed(0)
    mha = MultiHeadAttention(16, 4)
    for name in ("W_q", "W_k", "W_v", "W_o"):
        assert isinstance(getattr(mha, name), torch.nn.Linear)
        assert getattr(mha, name).weight.shape == (16, 16)
    ref = copy_into_torch(mha, 16, 4)
    x, memory = torch.randn(2, 5, 16), torch.randn(2, 7, 16)
    mask = causal_mask(7)[2:] if masked else None  # [5, 7]
    out, weights = mha(x, memory, memory, mask)
    # torch's boolean attn_mask is True where attention is *not* allowed
    ref_out, ref_weights = ref(x, memory, memory, attn_mask=None if mask is None else ~mask,
                               average_attn_weights=False)
    assert out.shape == (2, 5, 16) and weights.shape == (2, 4, 5, 7)
    torch.testing.assert_close(out, ref_out)
    torch.testing.assert_close(weights, ref_weights)


def test_head_column_layout():
    """Head i reads columns i*d_k:(i+1)*d_k of q, k, v and writes them into W_o's input."""
    torch.manual_seed(0)
    d_model, h = 8, 4
    d_k = d_model // h
    mha = MultiHeadAttention(d_model, h)
    with torch.no_grad():
        for name in ("W_v", "W_o"):  # identity value and output projections
            getattr(mha, name).weight.copy_(torch.eye(d_model))
            getattr(mha, name).bias.zero_()
    x = torch.randn(2, 3, d_model)
    out, weights = mha(x, x, x)
    for i in range(h):
        cols = slice(i * d_k, (i + 1) * d_k)
        torch.testing.assert_close(out[..., cols], weights[:, i] @ x[..., cols])
    # Changing the query projection of head 2's columns only changes head 2's weights.
    with torch.no_grad():
        mha.W_q.weight[2 * d_k:3 * d_k] += 1.0
    _, changed = mha(x, x, x)
    for i in range(h):
        assert torch.allclose(changed[:, i], weights[:, i]) == (i != 2)
