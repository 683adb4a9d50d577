"""Problem 1, Part C: post-norm encoder and decoder layers, and the stack's shapes."""

import pytest
import torch

from problem1.dataset import BOS, PLUS
from tests.seam import submission
from tests.tiny_problem1 import causal_mask, torch_attention  # noqa: F401 (a fixture)

# the layers under test attend with torch's attention, not Part B's (tests/tiny_problem1.py)
pytestmark = [pytest.mark.p1c, pytest.mark.usefixtures("torch_attention")]

model_module = submission("problem1.model")
AdditionTransformer = model_module.AdditionTransformer
DecoderLayer = model_module.DecoderLayer
EncoderLayer = model_module.EncoderLayer



def inputs(*shapes, seed=0):
    """Seeded standard normal tensors of these shapes."""
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(*shape, generator=generator) for shape in shapes]


def test_encoder_layer_shapes_and_normalized_output():
    submission("torch").manual_seed(0)
    layer = EncoderLayer(16, 4, 32, dropout=0.1).eval()
    x = inputs((2, 7, 16))[0] * 3 + 1
    out, weights = layer(x)
    assert out.shape == (2, 7, 16) and weights.shape == (2, 4, 7, 7), (
        "EncoderLayer must return out [B, T, d_model] and self-attention weights [B, h, T, T]")
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 4, 7), msg=lambda m: (
        f"EncoderLayer must return the self-attention weights, rows summing to 1\n{m}"))
    # post-norm: the output of every token is normalized, mean 0 and variance 1 under the
    # default LayerNorm initialization
    post_norm = ("post-norm: EncoderLayer's output must come out of a LayerNorm (mean 0, "
                 "variance 1 per token): is a norm applied before its sublayer instead of "
                 "after the residual sum?")
    torch.testing.assert_close(out.mean(-1), torch.zeros(2, 7), atol=1e-5, rtol=0,
                               msg=lambda m: f"{post_norm}\n{m}")
    torch.testing.assert_close(out.var(-1, unbiased=False), torch.ones(2, 7), atol=1e-3, rtol=0,
                               msg=lambda m: f"{post_norm}\n{m}")
    # every source token sees every other one: changing the last one changes the first
    changed = x.clone()
    changed[:, 6] += 1.0
    assert not torch.allclose(layer(changed)[0][:, 0], out[:, 0]), (
        "EncoderLayer's self-attention must read the raw input x (post-norm): shifting the "
        "last token left the first token's output unchanged (is x normalized before the "
        "attention, pre-norm, or is a mask applied?)")


def test_decoder_layer_is_causal_and_normalized():
    submission("torch").manual_seed(0)
    layer = DecoderLayer(16, 4, 32, dropout=0.1).eval()
    x, memory = inputs((2, 4, 16), (2, 7, 16))
    x = x * 3 + 1
    out, self_w, cross_w = layer(x, memory)
    assert out.shape == (2, 4, 16) and self_w.shape == (2, 4, 4, 4), (
        "DecoderLayer must return out [B, T, d_model] and self-attention weights [B, h, T, T]")
    assert cross_w.shape == (2, 4, 4, 7), (
        "the cross-attention weights must be [B, h, T_target, T_source]: queries from the "
        "decoder, keys and values from the memory (are they swapped?)")
    assert (self_w[..., ~causal_mask(4)] == 0).all(), (  # None self_mask means causal
        "with self_mask None the decoder's self-attention must be causal: is the causal mask "
        "left out?")
    torch.testing.assert_close(cross_w.sum(-1), torch.ones(2, 4, 4), msg=lambda m: (
        f"the cross-attention weights must sum to 1 over the source positions\n{m}"))
    post_norm = ("post-norm: DecoderLayer's output must come out of a LayerNorm (mean 0, "
                 "variance 1 per token): is a norm applied before its sublayer instead of "
                 "after the residual sum?")
    torch.testing.assert_close(out.mean(-1), torch.zeros(2, 4), atol=1e-5, rtol=0,
                               msg=lambda m: f"{post_norm}\n{m}")
    torch.testing.assert_close(out.var(-1, unbiased=False), torch.ones(2, 4), atol=1e-3, rtol=0,
                               msg=lambda m: f"{post_norm}\n{m}")
    # a later target token never changes an earlier output
    changed = x.clone()
    changed[:, 3] += 1.0
    out2, _, _ = layer(changed, memory)
    torch.testing.assert_close(out2[:, :3], out[:, :3], msg=lambda m: (
        "a later target token must never change an earlier output: is the decoder's "
        f"self-attention missing its causal mask?\n{m}"))
    # ... while the memory reaches every output through the cross-attention
    out3, _, _ = layer(x, memory + 1.0)
    assert not torch.allclose(out3, out), (
        "the memory must reach the output through the cross-attention: are its keys and "
        "values taken from the decoder instead of the memory?")


def test_layers_return_normalized_tokens_with_learned_affine():
    submission("torch").manual_seed(0)
    encoder = EncoderLayer(16, 4, 32, dropout=0.0)
    decoder = DecoderLayer(16, 4, 32, dropout=0.0)
    for layer, norm in ((encoder, "norm2"), (decoder, "norm3")):  # the last norm sets the scale
        layer.load_state_dict({f"{norm}.weight": torch.full((16,), 2.0),
                               f"{norm}.bias": torch.full((16,), 3.0)}, strict=False)
    x, memory = inputs((2, 4, 16), (2, 7, 16))
    out, _ = encoder(x)
    out_dec, _, _ = decoder(x, memory)
    for y in (out, out_dec):
        torch.testing.assert_close(y.mean(-1), torch.full((2, 4), 3.0), atol=1e-4, rtol=0)
        torch.testing.assert_close(y.std(-1, unbiased=False), torch.full((2, 4), 2.0),
                                   atol=1e-3, rtol=0)


def test_transformer_shapes():
    submission("torch").manual_seed(0)
    model = AdditionTransformer().eval()
    assert len(model.encoder_layers) == 2 and len(model.decoder_layers) == 2
    src = torch.tensor([[3, 9, 1, PLUS, 9, 6, 8], [0, 1, 2, PLUS, 5, 9, 7]])
    tgt_in = torch.tensor([[BOS, 1, 3, 5], [BOS, 0, 6, 0]])
    logits, attention = model(src, tgt_in)
    assert logits.shape == (2, 4, 12)
    assert [w.shape for w in attention["encoder"]] == [(2, 4, 7, 7)] * 2
    assert [w.shape for w in attention["decoder_self"]] == [(2, 4, 4, 4)] * 2
    assert [w.shape for w in attention["decoder_cross"]] == [(2, 4, 4, 7)] * 2
    predicted = model.generate(src)
    assert predicted.shape == (2, 4) and predicted.max().item() <= 9
