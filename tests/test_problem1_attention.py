"""Problem 1, Part B: attention against PyTorch's own, masks, and the head column layout."""

import pytest
import torch
import torch.nn.functional as F

from tests.seam import remote_isinstance, submission

pytestmark = pytest.mark.p1b

attention = submission("problem1.attention")
MultiHeadAttention = attention.MultiHeadAttention
causal_mask = attention.causal_mask
scaled_dot_product_attention = attention.scaled_dot_product_attention


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
    assert torch.equal(causal_mask(4, "cpu"), expected), (
        "causal_mask must be True on and below the diagonal (query i sees keys 0..i): is it "
        "triu instead of tril, or is the diagonal left out?")
    assert causal_mask(4).dtype == torch.bool, "causal_mask must return a bool tensor"


def test_sdpa_matches_torch_without_mask(qkv):
    q, k, v = qkv
    out, weights = scaled_dot_product_attention(q, k, v)
    assert out.shape == (3, 2, 5, 4) and weights.shape == (3, 2, 5, 6), (
        "scaled_dot_product_attention must return out [..., T_q, d_v] and weights "
        "[..., T_q, T_k]")
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v), msg=lambda m: (
        "scaled_dot_product_attention must compute softmax(q k^T / sqrt(d_k)) v: scores not "
        "divided by sqrt(d_k) (or divided by d_k), or the softmax taken over the queries "
        f"instead of the keys?\n{m}"))
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
        "a boolean mask must let each query attend where it is True and nowhere else: is the "
        f"mask polarity flipped (True blocking), or is it not broadcast?\n{m}"))
    full = mask.expand(3, 2, 5, 6)
    assert (weights[~full] == 0).all(), (  # exactly zero, not just small
        "masked-out keys must get a weight of exactly 0: fill their scores with -inf before "
        "the softmax (is the mask polarity flipped, or a finite fill value used?)")
    torch.testing.assert_close(weights.sum(-1), torch.ones(3, 2, 5), msg=lambda m: (
        "masked attention weights must still sum to 1 over the keys: is the mask applied "
        f"after the softmax?\n{m}"))


def test_sdpa_scales_by_sqrt_dk():
    q = torch.tensor([[[[1.0, 1.0, 1.0, 1.0]]]])  # d_k = 4
    k = torch.tensor([[[[1.0, 1.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0]]]])
    v = torch.tensor([[[[1.0], [0.0]]]])
    _, weights = scaled_dot_product_attention(q, k, v)
    # scores 4 / sqrt(4) = 2 and 0: softmax gives e^2 / (e^2 + 1)
    expected = torch.tensor(2.0).exp() / (torch.tensor(2.0).exp() + 1)
    torch.testing.assert_close(weights[0, 0, 0, 0], expected)


def copy_into_torch(mha, d_model: int, h: int):
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
        assert remote_isinstance(getattr(mha, name), "torch.nn.Linear"), (
            f"MultiHeadAttention.{name} must be an nn.Linear")
        assert getattr(mha, name).weight.shape == (16, 16), (
            f"MultiHeadAttention.{name} must map d_model to d_model")
    ref = copy_into_torch(mha, 16, 4)
    x, memory = torch.randn(2, 5, 16), torch.randn(2, 7, 16)
    mask = causal_mask(7)[2:] if masked else None  # [5, 7]
    out, weights = mha(x, memory, memory, mask)
    # torch's boolean attn_mask is True where attention is *not* allowed
    ref_out, ref_weights = ref(x, memory, memory, attn_mask=None if mask is None else ~mask,
                               average_attn_weights=False)
    assert out.shape == (2, 5, 16) and weights.shape == (2, 4, 5, 7), (
        "MultiHeadAttention must return out [B, T_q, d_model] and weights [B, h, T_q, T_k]")
    torch.testing.assert_close(out, ref_out, msg=lambda m: (
        "MultiHeadAttention must match torch.nn.MultiheadAttention with the same weights: are "
        "the heads split by a plain reshape without the transpose, or is the output "
        f"projection W_o skipped?\n{m}"))
    torch.testing.assert_close(weights, ref_weights, msg=lambda m: (
        "each head's attention weights must match torch.nn.MultiheadAttention's: are the "
        "heads split by a plain reshape without the transpose (tokens mixed across heads), "
        f"or is the mask polarity flipped?\n{m}"))


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
