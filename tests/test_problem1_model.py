"""Problem 1, Part C: post-norm layers, the stack's shapes, and greedy generation."""

import pytest
import torch
import torch.nn.functional as F

from problem1.attention import causal_mask
from problem1.dataset import BOS, PLUS
from problem1.model import AdditionTransformer, DecoderLayer, EncoderLayer


def layer_norm(x, norm):
    return F.layer_norm(x, (x.size(-1),), norm.weight, norm.bias, norm.eps)


def test_encoder_layer_is_post_norm():
    torch.manual_seed(0)
    layer = EncoderLayer(16, 4, 32, dropout=0.1).eval()
    x = torch.randn(2, 7, 16) * 3 + 1
    out, weights = layer(x)
    assert out.shape == (2, 7, 16) and weights.shape == (2, 4, 7, 7)
    attended, _ = layer.self_attn(x, x, x)
    h = layer_norm(x + attended, layer.norm1)
    torch.testing.assert_close(out, layer_norm(h + layer.ffn(h), layer.norm2))
    # the output of every token is normalized: mean 0, variance 1 under the default LN init
    torch.testing.assert_close(out.mean(-1), torch.zeros(2, 7), atol=1e-5, rtol=0)
    torch.testing.assert_close(out.var(-1, unbiased=False), torch.ones(2, 7), atol=1e-3, rtol=0)


def test_decoder_layer_is_post_norm_and_causal():
    torch.manual_seed(0)
    layer = DecoderLayer(16, 4, 32, dropout=0.1).eval()
    x, memory = torch.randn(2, 4, 16) * 3 + 1, torch.randn(2, 7, 16)
    out, self_w, cross_w = layer(x, memory)
    assert out.shape == (2, 4, 16) and self_w.shape == (2, 4, 4, 4)
    assert cross_w.shape == (2, 4, 4, 7)
    attended, _ = layer.self_attn(x, x, x, causal_mask(4))
    h = layer_norm(x + attended, layer.norm1)
    attended, _ = layer.cross_attn(h, memory, memory)
    h = layer_norm(h + attended, layer.norm2)
    torch.testing.assert_close(out, layer_norm(h + layer.ffn(h), layer.norm3))
    assert (self_w[..., ~causal_mask(4)] == 0).all()  # None self_mask means causal
    torch.testing.assert_close(out.var(-1, unbiased=False), torch.ones(2, 4), atol=1e-3, rtol=0)
    # a later target token never changes an earlier output
    changed = x.clone()
    changed[:, 3] += 1.0
    out2, _, _ = layer(changed, memory)
    torch.testing.assert_close(out2[:, :3], out[:, :3])


def test_layers_return_normalized_tokens_with_learned_affine():
    torch.manual_seed(0)
    encoder = EncoderLayer(16, 4, 32, dropout=0.0)
    decoder = DecoderLayer(16, 4, 32, dropout=0.0)
    with torch.no_grad():
        for norm in (encoder.norm2, decoder.norm3):  # the last norm sets the output scale
            norm.weight.fill_(2.0)
            norm.bias.fill_(3.0)
    x = torch.randn(2, 4, 16)
    out, _ = encoder(x)
    out_dec, _, _ = decoder(x, torch.randn(2, 7, 16))
    for y in (out, out_dec):
        torch.testing.assert_close(y.mean(-1), torch.full((2, 4), 3.0), atol=1e-4, rtol=0)
        torch.testing.assert_close(y.std(-1, unbiased=False), torch.full((2, 4), 2.0),
                                   atol=1e-3, rtol=0)


def test_transformer_shapes_and_embedding():
    torch.manual_seed(0)
    model = AdditionTransformer().eval()
    assert len(model.encoder_layers) == 2 and len(model.decoder_layers) == 2
    std = model.embedding.weight.std().item()
    assert abs(std - 128 ** -0.5) < 0.01  # not PyTorch's default N(0, 1)
    src = torch.tensor([[3, 9, 1, PLUS, 9, 6, 8], [0, 1, 2, PLUS, 5, 9, 7]])
    tgt_in = torch.tensor([[BOS, 1, 3, 5], [BOS, 0, 6, 0]])
    logits, attention = model(src, tgt_in)
    assert logits.shape == (2, 4, 12)
    assert [w.shape for w in attention["encoder"]] == [(2, 4, 7, 7)] * 2
    assert [w.shape for w in attention["decoder_self"]] == [(2, 4, 4, 4)] * 2
    assert [w.shape for w in attention["decoder_cross"]] == [(2, 4, 4, 7)] * 2


def reference_greedy(model, src, steps=4):
    """Greedy decoding the slow way: the whole prefix through the teacher-forced path."""
    tokens = torch.full((src.size(0), 1), BOS)
    for _ in range(steps):
        logits, _ = model(src, tokens)
        tokens = torch.cat([tokens, logits[:, -1, :10].argmax(-1, keepdim=True)], dim=1)
    return tokens[:, 1:]


@pytest.mark.parametrize("seed", [0, 1])
def test_generate_matches_teacher_forced_greedy(seed):
    torch.manual_seed(seed)
    model = AdditionTransformer().eval()
    src = torch.randint(0, 10, (64, 7))
    src[:, 3] = PLUS
    predicted = model.generate(src)
    assert predicted.shape == (64, 4) and predicted.dtype == torch.long
    assert torch.equal(predicted, reference_greedy(model, src))
    assert predicted.unique().numel() > 1  # a random model's predictions vary


def test_generate_only_emits_digits():
    torch.manual_seed(0)
    model = AdditionTransformer().eval()
    with torch.no_grad():
        model.output.bias[PLUS] = 100.0  # PLUS and BOS would win an argmax over the vocabulary
        model.output.bias[BOS] = 100.0
    src = torch.tensor([[3, 9, 1, PLUS, 9, 6, 8]])
    assert model.generate(src).max().item() <= 9
