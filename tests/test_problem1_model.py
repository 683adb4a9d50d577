"""Problem 1, Part C: post-norm encoder and decoder layers, and the stack's shapes."""

import pytest
import torch
import torch.nn.functional as F

from problem1.dataset import BOS, PLUS
from problem1.model import feed_forward
from tests.seam import submission
from tests.tiny_problem1 import (  # noqa: F401 (torch_attention: a fixture)
    TorchAttention,
    causal_mask,
    torch_attention,
)

# the layers under test attend with torch's attention, not Part B's (tests/tiny_problem1.py)
pytestmark = [pytest.mark.p1c, pytest.mark.usefixtures("torch_attention")]

CORRECT = "correct"
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
    try:
        out, self_w, cross_w = layer(x, memory)
    except RuntimeError as error:  # e.g. a shape mismatch inside an attention
        pytest.fail(f"DecoderLayer(x [2, 4, 16], memory [2, 7, 16]) raised {error}: does the "
                    "cross-attention take its queries from the decoder's x and its keys and "
                    "values from memory, and the self-attention a [T, T] mask?")
    assert (tuple(self_w.shape), tuple(cross_w.shape)) != ((2, 4, 4, 7), (2, 4, 4, 4)), (
        "DecoderLayer must return (x, self weights, cross weights) in this order: it returned "
        "the cross-attention weights [B, h, T, S] second and the self-attention weights "
        "[B, h, T, T] third: swap them")
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
    for y, layer, norm in ((out, "EncoderLayer", "norm2"), (out_dec, "DecoderLayer", "norm3")):
        def message(m: str, layer=layer, norm=norm) -> str:
            return (f"{layer}'s output must be its last LayerNorm's ({norm}, whose weight 2 "
                    "and bias 3 are set here): every token with mean 3 and standard deviation "
                    f"2. Is another norm applied last, or a sum returned unnormalized?\n{m}")
        torch.testing.assert_close(y.mean(-1), torch.full((2, 4), 3.0), atol=1e-4, rtol=0,
                                   msg=message)
        torch.testing.assert_close(y.std(-1, unbiased=False), torch.full((2, 4), 2.0),
                                   atol=1e-3, rtol=0, msg=message)


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


# ------------------------------------------- the layers' formulas, written out here
class Twin:
    """A layer's sublayers rebuilt here from its state_dict (attention as TorchAttention,
    the feed-forward network, the norms), to compute what the homework's formula gives and
    what the common mistakes give."""

    def __init__(self, layer, d_model=16, num_heads=4, d_ff=32):
        self.state = layer.state_dict()
        self.d_model, self.num_heads, self.d_ff = d_model, num_heads, d_ff

    def part(self, prefix, module):
        module.load_state_dict({name[len(prefix) + 1:]: value for name, value in
                                self.state.items() if name.startswith(prefix + ".")})
        return module.eval()

    def attention(self, name, query, key, mask=None):
        module = self.part(name, TorchAttention(self.d_model, self.num_heads))
        with torch.no_grad():
            return module(query, key, key, mask)[0]

    def ffn(self, x):
        with torch.no_grad():
            return self.part("ffn", feed_forward(self.d_model, self.d_ff))(x)

    def norm(self, name, x):
        return F.layer_norm(x, (x.size(-1),), self.state[f"{name}.weight"],
                            self.state[f"{name}.bias"])


def encoder_by_formula(twin: Twin, x, mask=None) -> dict:
    """{mistake: output}: EncoderLayer's formula (CORRECT) and the common mistakes."""
    A = lambda y: twin.attention("self_attn", y, y, mask)  # noqa: E731
    h = twin.norm("norm1", x + A(x))
    pre = x + A(twin.norm("norm1", x))
    found = {CORRECT: twin.norm("norm2", h + twin.ffn(h)),
             "it is pre-norm (a norm before each sublayer) instead of post-norm":
                 pre + twin.ffn(twin.norm("norm2", pre)),
             "the feed-forward residual is missing: LN2(FFN(h)) instead of LN2(h + FFN(h))":
                 twin.norm("norm2", twin.ffn(h)),
             "the attention residual is missing: LN1(Attn(x)) instead of LN1(x + Attn(x))":
                 twin.norm("norm2", twin.norm("norm1", A(x)) + twin.ffn(twin.norm("norm1", A(x)))),
             "the feed-forward residual adds the layer's input x instead of h = LN1(x + "
             "Attn(x))": twin.norm("norm2", x + twin.ffn(h)),
             "the feed-forward network reads x instead of h = LN1(x + Attn(x))":
                 twin.norm("norm2", h + twin.ffn(x)),
             "norm1 is used again for the feed-forward sum instead of norm2":
                 twin.norm("norm1", h + twin.ffn(h))}
    if mask is not None:
        found["the mask is not passed to the self-attention"] = encoder_by_formula(twin, x)[
            CORRECT]
    return found


def decoder_by_formula(twin: Twin, x, memory, self_mask=None, memory_mask=None) -> dict:
    """{mistake: output}: DecoderLayer's formula (CORRECT) and the common mistakes."""
    causal = causal_mask(x.size(1)) if self_mask is None else self_mask
    S = lambda y, m=causal: twin.attention("self_attn", y, y, m)  # noqa: E731
    C = lambda y, m=memory_mask: twin.attention("cross_attn", y, memory, m)  # noqa: E731
    h1 = twin.norm("norm1", x + S(x))
    h2 = twin.norm("norm2", h1 + C(h1))
    crossed_early = twin.norm("norm2", h1 + C(x))
    found = {CORRECT: twin.norm("norm3", h2 + twin.ffn(h2)),
             "the cross-attention's queries come from the layer's input x instead of "
             "h1 = LN1(x + SelfAttn(x))": twin.norm("norm3", crossed_early
                                                     + twin.ffn(crossed_early)),
             "the cross-attention residual is missing": twin.norm(
                 "norm3", twin.norm("norm2", C(h1)) + twin.ffn(twin.norm("norm2", C(h1)))),
             "the feed-forward residual is missing": twin.norm("norm3", twin.ffn(h2)),
             "norm2 is used again for the feed-forward sublayer instead of norm3":
                 twin.norm("norm2", h2 + twin.ffn(h2)),
             "the self-attention is not causal (no mask)": None}
    no_mask = twin.norm("norm1", x + S(x, None))
    no_mask = twin.norm("norm2", no_mask + C(no_mask))
    found["the self-attention is not causal (no mask)"] = twin.norm(
        "norm3", no_mask + twin.ffn(no_mask))
    if self_mask is not None:
        h = twin.norm("norm1", x + S(x, causal_mask(x.size(1))))
        h = twin.norm("norm2", h + C(h))
        found["an explicit self_mask is ignored (the causal mask used instead)"] = twin.norm(
            "norm3", h + twin.ffn(h))
    if memory_mask is not None:
        h = twin.norm("norm2", h1 + C(h1, None))
        found["memory_mask is not passed to the cross-attention"] = twin.norm(
            "norm3", h + twin.ffn(h))
    return found


def which(out, found: dict) -> str:
    """The clause naming the mistake whose output equals out."""
    for why, expected in found.items():
        if why != CORRECT and expected is not None and torch.allclose(out, expected, atol=1e-5):
            return f"your output is exactly what it is when {why}"
    return "it matches none of the usual mistakes: compare it with the formula step by step"


def perturb(layer, seed: int) -> None:
    """Move every parameter (the norms too) off its initial value."""
    generator = torch.Generator().manual_seed(seed)
    layer.load_state_dict({name: p + 0.2 * torch.randn(p.shape, generator=generator)
                           for name, p in layer.state_dict().items()})


ENCODER = "EncoderLayer must be x = LN1(x + Drop(SelfAttn(x))); x = LN2(x + Drop(FFN(x)))"
DECODER = ("DecoderLayer must be x = LN1(x + Drop(CausalSelfAttn(x))); x = LN2(x + "
           "Drop(CrossAttn(x, memory))); x = LN3(x + Drop(FFN(x)))")


def test_encoder_layer_matches_its_formula():
    submission("torch").manual_seed(4)
    layer = EncoderLayer(16, 4, 32, dropout=0.1).eval()
    perturb(layer, 4)
    x = inputs((2, 6, 16), seed=4)[0] * 2 - 1
    out, _ = layer(x)
    found = encoder_by_formula(Twin(layer), x)
    torch.testing.assert_close(out, found[CORRECT], msg=lambda m: (
        f"{ENCODER} (eval mode, no dropout): {which(out, found)}\n{m}"))


def test_decoder_layer_matches_its_formula():
    submission("torch").manual_seed(5)
    layer = DecoderLayer(16, 4, 32, dropout=0.1).eval()
    perturb(layer, 5)
    x, memory = inputs((2, 4, 16), (2, 6, 16), seed=5)
    out, _, _ = layer(x, memory)
    found = decoder_by_formula(Twin(layer), x, memory)
    torch.testing.assert_close(out, found[CORRECT], msg=lambda m: (
        f"{DECODER} (eval mode, no dropout): {which(out, found)}\n{m}"))


def test_layers_pass_their_masks_on():
    submission("torch").manual_seed(6)
    encoder = EncoderLayer(16, 4, 32, dropout=0.0).eval()
    decoder = DecoderLayer(16, 4, 32, dropout=0.0).eval()
    perturb(encoder, 6)
    perturb(decoder, 7)
    x, memory = inputs((2, 5, 16), (2, 6, 16), seed=6)
    keep = torch.ones(2, 1, 1, 5, dtype=torch.bool)
    keep[1, ..., 3:] = False  # sequence 1 hides its last two positions
    out, _ = encoder(x, keep)
    found = encoder_by_formula(Twin(encoder), x, keep)
    torch.testing.assert_close(out, found[CORRECT], msg=lambda m: (
        f"EncoderLayer(x, mask) must attend with the mask given: {which(out, found)}\n{m}"))
    full = torch.ones(5, 5, dtype=torch.bool)  # an explicit self_mask: every position
    memory_keep = torch.ones(2, 1, 1, 6, dtype=torch.bool)
    memory_keep[0, ..., 2:] = False
    out, _, _ = decoder(x, memory, self_mask=full, memory_mask=memory_keep)
    found = decoder_by_formula(Twin(decoder), x, memory, full, memory_keep)
    torch.testing.assert_close(out, found[CORRECT], msg=lambda m: (
        "DecoderLayer(x, memory, self_mask, memory_mask) must attend with the masks given "
        f"(a None self_mask only means causal): {which(out, found)}\n{m}"))


def test_dropout_sits_on_the_sublayer_outputs():
    # With p = 1 in training mode dropout zeroes whatever it is applied to: only the
    # residual path and the norms remain, x -> LN2(LN1(x)) and x -> LN3(LN2(LN1(x))).
    submission("torch").manual_seed(8)
    encoder = EncoderLayer(16, 4, 32, dropout=1.0).train()
    decoder = DecoderLayer(16, 4, 32, dropout=1.0).train()
    perturb(encoder, 8)
    perturb(decoder, 9)
    x, memory = inputs((2, 3, 16), (2, 5, 16), seed=8)
    where = ("must act on each sublayer's output before its residual sum, and nowhere else: "
             "with dropout 1 in training mode the layer must reduce to its norms of the "
             "residual path (is dropout applied after a norm, or on the residual x?)")
    twin = Twin(encoder)
    out, weights = encoder(x)
    torch.testing.assert_close(out, twin.norm("norm2", twin.norm("norm1", x)), msg=lambda m: (
        f"EncoderLayer's dropout {where}\n{m}"))
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 4, 3), msg=lambda m: (
        f"EncoderLayer must return the attention weights without dropout\n{m}"))
    twin = Twin(decoder)
    out, _, _ = decoder(x, memory)
    expected = twin.norm("norm3", twin.norm("norm2", twin.norm("norm1", x)))
    torch.testing.assert_close(out, expected, msg=lambda m: (
        f"DecoderLayer's dropout {where}\n{m}"))
