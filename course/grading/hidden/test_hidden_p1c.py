"""Hidden tests, Problem 1 Part C: the post-norm layers against their formulas written out
by hand, dropout on the sublayer outputs only, and the masks passed through."""

import pytest
import torch
import torch.nn.functional as F

from problem1.model import feed_forward
from tests.seam import submission
from tests.tiny_problem1 import TorchAttention, torch_attention  # noqa: F401 (a fixture)

# the layers under test attend with torch's attention, not Part B's (tests/tiny_problem1.py)
pytestmark = [pytest.mark.p1c, pytest.mark.usefixtures("torch_attention")]

model_module = submission("problem1.model")
DecoderLayer = model_module.DecoderLayer
EncoderLayer = model_module.EncoderLayer



class Twin:
    """A layer's sublayers rebuilt here from its state_dict: its attentions (TorchAttention),
    its feed-forward network and its norms' parameters."""

    def __init__(self, layer, d_model=16, num_heads=4, d_ff=32):
        self.state = layer.state_dict()
        self.d_model, self.num_heads, self.d_ff = d_model, num_heads, d_ff

    def part(self, prefix, module):
        module.load_state_dict({name[len(prefix) + 1:]: value for name, value in
                                self.state.items() if name.startswith(prefix + ".")})
        return module.eval()

    def attention(self, name):
        return self.part(name, TorchAttention(self.d_model, self.num_heads))

    @property
    def ffn(self):
        return self.part("ffn", feed_forward(self.d_model, self.d_ff))

    def norm(self, name):
        return self.state[f"{name}.weight"], self.state[f"{name}.bias"]


def layer_norm(x, norm):
    weight, bias = norm
    return F.layer_norm(x, (x.size(-1),), weight, bias, 1e-5)


def tril(size):
    return torch.ones(size, size, dtype=torch.bool).tril()


def perturb(module):
    """Move every parameter (the LayerNorms too) off its initial value."""
    module.load_state_dict({name: p + 0.1 * torch.randn_like(p)
                            for name, p in module.state_dict().items()})


def test_encoder_layer_is_the_post_norm_formula():
    submission("torch").manual_seed(0)
    layer = EncoderLayer(16, 4, 32, dropout=0.1).eval()
    torch.manual_seed(0)
    perturb(layer)
    x = torch.randn(2, 7, 16) * 3 + 1
    out, weights = layer(x)
    twin = Twin(layer)
    with torch.no_grad():
        attended, expected_weights = twin.attention("self_attn")(x, x, x)
        h = layer_norm(x + attended, twin.norm("norm1"))
        expected = layer_norm(h + twin.ffn(h), twin.norm("norm2"))
    torch.testing.assert_close(out, expected, msg=lambda m: (
        "EncoderLayer must be post-norm, a LayerNorm after each sublayer's residual sum: is a "
        f"residual connection missing, or a norm applied before its sublayer?\n{m}"))
    torch.testing.assert_close(weights, expected_weights, msg=lambda m: (
        "EncoderLayer must return its self-attention's weights, computed on its input x: is "
        f"the attention run on a normalized input (pre-norm)?\n{m}"))


def test_decoder_layer_is_the_post_norm_formula():
    submission("torch").manual_seed(0)
    layer = DecoderLayer(16, 4, 32, dropout=0.1).eval()
    torch.manual_seed(0)
    perturb(layer)
    x, memory = torch.randn(2, 4, 16) * 3 + 1, torch.randn(2, 7, 16)
    out, self_w, cross_w = layer(x, memory)
    twin = Twin(layer)
    with torch.no_grad():
        attended, expected_self = twin.attention("self_attn")(x, x, x, tril(4))
        h = layer_norm(x + attended, twin.norm("norm1"))
        attended, expected_cross = twin.attention("cross_attn")(h, memory, memory)
        h = layer_norm(h + attended, twin.norm("norm2"))
        expected = layer_norm(h + twin.ffn(h), twin.norm("norm3"))
    torch.testing.assert_close(out, expected, msg=lambda m: (
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
    submission("torch").manual_seed(1)
    encoder = EncoderLayer(16, 4, 32, dropout=1.0).train()
    decoder = DecoderLayer(16, 4, 32, dropout=1.0).train()
    torch.manual_seed(1)
    perturb(encoder)
    perturb(decoder)
    x, memory = torch.randn(2, 5, 16), torch.randn(2, 7, 16)
    encoder_norms, decoder_norms = Twin(encoder), Twin(decoder)
    out, weights = encoder(x)
    dropout_place = ("must act on each sublayer's output before its residual sum, and nowhere "
                     "else: is it applied to the layer's output after the norm, or to the "
                     "residual path?")
    expected = layer_norm(layer_norm(x, encoder_norms.norm("norm1")), encoder_norms.norm("norm2"))
    torch.testing.assert_close(out, expected,
                               msg=lambda m: f"EncoderLayer's dropout {dropout_place}\n{m}")
    torch.testing.assert_close(  # no dropout on weights
        weights.sum(-1), torch.ones(2, 4, 5), msg=lambda m: (
            "EncoderLayer must return the attention weights without dropout, rows summing to "
            f"1\n{m}"))
    out, self_w, cross_w = decoder(x, memory)
    expected = layer_norm(layer_norm(layer_norm(x, decoder_norms.norm("norm1")),
                                     decoder_norms.norm("norm2")), decoder_norms.norm("norm3"))
    torch.testing.assert_close(out, expected,
                               msg=lambda m: f"DecoderLayer's dropout {dropout_place}\n{m}")
    torch.testing.assert_close(cross_w.sum(-1), torch.ones(2, 4, 5), msg=lambda m: (
        "DecoderLayer must return the cross-attention weights without dropout, rows summing "
        f"to 1\n{m}"))


def test_decoder_passes_its_masks_on():
    submission("torch").manual_seed(2)
    layer = DecoderLayer(16, 4, 32, dropout=0.0).eval()
    torch.manual_seed(2)
    x, memory = torch.randn(2, 4, 16), torch.randn(2, 6, 16)
    # an explicit all-True self mask: no longer causal, a later token reaches position 0
    full = torch.ones(4, 4, dtype=torch.bool)
    out, self_w, _ = layer(x, memory, self_mask=full)
    assert (self_w[..., 0, 1:] > 0).all(), (
        "DecoderLayer given an all-True self_mask must let query 0 see every key; its weights "
        "on keys 1.. are 0: does it build a causal mask even when self_mask is given? (None "
        "alone means causal)")
    changed = x.clone()
    changed[:, 3] += 1.0
    assert not torch.allclose(layer(changed, memory, self_mask=full)[0][:, 0], out[:, 0]), (
        "with an all-True self_mask, changing token 3 must change position 0's output: is the "
        "given self_mask replaced by a causal one?")
    # a memory mask that hides source positions 3.. of sequence 0
    keep = torch.ones(2, 1, 1, 6, dtype=torch.bool)
    keep[0, ..., 3:] = False
    out, _, cross_w = layer(x, memory, memory_mask=keep)
    assert (cross_w[0, ..., 3:] == 0).all() and (cross_w[1] > 0).all(), (
        "DecoderLayer's cross-attention must apply memory_mask: sequence 0's source positions "
        "3.. must get weight 0 and sequence 1's none: is memory_mask passed to cross_attn?")
    other = memory.clone()
    other[0, 3:] = torch.randn(3, 16)
    torch.testing.assert_close(layer(x, other, memory_mask=keep)[0], out, msg=lambda m: (
        "changing only masked-out memory positions must not change DecoderLayer's output: "
        f"is memory_mask passed to the cross-attention?\n{m}"))


def test_encoder_passes_its_mask_on():
    submission("torch").manual_seed(3)
    layer = EncoderLayer(16, 4, 32, dropout=0.0).eval()
    torch.manual_seed(3)
    x = torch.randn(2, 5, 16)
    keep = torch.ones(2, 1, 1, 5, dtype=torch.bool)
    keep[1, ..., 2:] = False
    out, weights = layer(x, keep)
    twin = Twin(layer)
    with torch.no_grad():
        _, expected_weights = twin.attention("self_attn")(x, x, x, keep)
    torch.testing.assert_close(weights, expected_weights, msg=lambda m: (
        "EncoderLayer(x, mask) must return its self-attention's weights [B, h, T, T] computed "
        "with that mask, zero on the hidden keys and rows summing to 1: is the mask not "
        f"passed to the attention?\n{m}"))
    changed = x.clone()
    changed[1, 4] += 1.0  # a hidden key: positions 0..3 of sequence 1 do not see it
    again = layer(changed, keep)[0]
    torch.testing.assert_close(again[1, :4], out[1, :4], msg=lambda m: (
        "EncoderLayer(x, mask): positions that do not see a hidden key must not change when "
        f"it changes: is the mask not passed to the attention?\n{m}"))
    assert not torch.allclose(again[1, 4], out[1, 4]), (
        "EncoderLayer's output at a position must change with that position's own input "
        "(the residual path): is something constant returned?")
