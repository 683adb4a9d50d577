"""Hidden tests, Problem 1 Part C: the post-norm layers against their formulas written out
by hand, dropout on the sublayer outputs only, and the masks passed through."""

import pytest
import torch
import torch.nn.functional as F

from problem1.model import DecoderLayer, EncoderLayer

pytestmark = pytest.mark.p1c


def layer_norm(x, norm):
    return F.layer_norm(x, (x.size(-1),), norm.weight, norm.bias, norm.eps)


def tril(size):
    return torch.ones(size, size, dtype=torch.bool).tril()


def perturb(module):
    """Move every parameter (the LayerNorms too) off its initial value."""
    with torch.no_grad():
        for p in module.parameters():
            p.add_(0.1 * torch.randn_like(p))


def test_encoder_layer_is_the_post_norm_formula():
    torch.manual_seed(0)
    layer = EncoderLayer(16, 4, 32, dropout=0.1).eval()
    perturb(layer)
    x = torch.randn(2, 7, 16) * 3 + 1
    out, weights = layer(x)
    attended, expected_weights = layer.self_attn(x, x, x)
    h = layer_norm(x + attended, layer.norm1)
    torch.testing.assert_close(out, layer_norm(h + layer.ffn(h), layer.norm2), msg=lambda m: (
        "EncoderLayer must be post-norm, a LayerNorm after each sublayer's residual sum: is a "
        f"residual connection missing, or a norm applied before its sublayer?\n{m}"))
    torch.testing.assert_close(weights, expected_weights, msg=lambda m: (
        "EncoderLayer must return its self-attention's weights, computed on its input x: is "
        f"the attention run on a normalized input (pre-norm)?\n{m}"))


def test_decoder_layer_is_the_post_norm_formula():
    torch.manual_seed(0)
    layer = DecoderLayer(16, 4, 32, dropout=0.1).eval()
    perturb(layer)
    x, memory = torch.randn(2, 4, 16) * 3 + 1, torch.randn(2, 7, 16)
    out, self_w, cross_w = layer(x, memory)
    attended, expected_self = layer.self_attn(x, x, x, tril(4))
    h = layer_norm(x + attended, layer.norm1)
    attended, expected_cross = layer.cross_attn(h, memory, memory)
    h = layer_norm(h + attended, layer.norm2)
    torch.testing.assert_close(out, layer_norm(h + layer.ffn(h), layer.norm3), msg=lambda m: (
        "DecoderLayer must be post-norm, a LayerNorm after each of its three sublayers' "
        "residual sums: is a residual connection missing, a norm misplaced, or the causal "
        f"mask or the memory not used?\n{m}"))
    torch.testing.assert_close(self_w, expected_self, msg=lambda m: (
        "DecoderLayer must return its causal self-attention's weights: is the causal mask "
        f"left out?\n{m}"))
    torch.testing.assert_close(cross_w, expected_cross, msg=lambda m: (
        "DecoderLayer must return its cross-attention's weights, queries from the decoder and "
        f"keys from the memory: are they swapped?\n{m}"))


def test_dropout_sits_on_the_sublayer_outputs():
    # With p = 1 in training mode, dropout zeroes whatever it is applied to: only the
    # residual path and the norms remain, x -> LN2(LN1(x)) and x -> LN3(LN2(LN1(x))).
    torch.manual_seed(1)
    encoder = EncoderLayer(16, 4, 32, dropout=1.0).train()
    decoder = DecoderLayer(16, 4, 32, dropout=1.0).train()
    perturb(encoder)
    perturb(decoder)
    x, memory = torch.randn(2, 5, 16), torch.randn(2, 7, 16)
    out, weights = encoder(x)
    dropout_place = ("must act on each sublayer's output before its residual sum, and nowhere "
                     "else: is it applied to the layer's output after the norm, or to the "
                     "residual path?")
    torch.testing.assert_close(out, layer_norm(layer_norm(x, encoder.norm1), encoder.norm2),
                               msg=lambda m: f"EncoderLayer's dropout {dropout_place}\n{m}")
    torch.testing.assert_close(  # no dropout on weights
        weights.sum(-1), torch.ones(2, 4, 5), msg=lambda m: (
            "EncoderLayer must return the attention weights without dropout, rows summing to "
            f"1\n{m}"))
    out, self_w, cross_w = decoder(x, memory)
    expected = layer_norm(layer_norm(layer_norm(x, decoder.norm1), decoder.norm2), decoder.norm3)
    torch.testing.assert_close(out, expected,
                               msg=lambda m: f"DecoderLayer's dropout {dropout_place}\n{m}")
    torch.testing.assert_close(cross_w.sum(-1), torch.ones(2, 4, 5), msg=lambda m: (
        "DecoderLayer must return the cross-attention weights without dropout, rows summing "
        f"to 1\n{m}"))


def test_decoder_passes_its_masks_on():
    torch.manual_seed(2)
    layer = DecoderLayer(16, 4, 32, dropout=0.0).eval()
    x, memory = torch.randn(2, 4, 16), torch.randn(2, 6, 16)
    # an explicit all-True self mask: no longer causal, a later token reaches position 0
    full = torch.ones(4, 4, dtype=torch.bool)
    out, self_w, _ = layer(x, memory, self_mask=full)
    assert (self_w[..., 0, 1:] > 0).all()
    changed = x.clone()
    changed[:, 3] += 1.0
    assert not torch.allclose(layer(changed, memory, self_mask=full)[0][:, 0], out[:, 0])
    # a memory mask that hides source positions 3.. of sequence 0
    keep = torch.ones(2, 1, 1, 6, dtype=torch.bool)
    keep[0, ..., 3:] = False
    out, _, cross_w = layer(x, memory, memory_mask=keep)
    assert (cross_w[0, ..., 3:] == 0).all() and (cross_w[1] > 0).all()
    other = memory.clone()
    other[0, 3:] = torch.randn(3, 16)
    torch.testing.assert_close(layer(x, other, memory_mask=keep)[0], out)


def test_encoder_passes_its_mask_on():
    torch.manual_seed(3)
    layer = EncoderLayer(16, 4, 32, dropout=0.0).eval()
    x = torch.randn(2, 5, 16)
    keep = torch.ones(2, 1, 1, 5, dtype=torch.bool)
    keep[1, ..., 2:] = False
    out, weights = layer(x, keep)
    assert (weights[1, ..., 2:] == 0).all()
    changed = x.clone()
    changed[1, 4] += 1.0  # a hidden key: positions 0..3 of sequence 1 do not see it
    torch.testing.assert_close(layer(changed, keep)[0][1, :4], out[1, :4])
