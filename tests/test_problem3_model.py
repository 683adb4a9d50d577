"""Problem 3, Part B: the causal mask, pre- and post-norm blocks, and the decoder-only model
(tiny models only)."""

import pytest
import torch

from tests.seam import remote_isinstance, submission

pytestmark = pytest.mark.p3b

model_module = submission("problem3.model")
Block = model_module.Block
causal_mask = model_module.causal_mask
tiny_lm = submission("tests.tiny").tiny_lm  # a 2-layer DecoderLM, built next to the code
sandbox_torch = submission("torch")


def seed(n: int) -> None:
    """Seed torch here and next to the code under test (where the modules are made)."""
    torch.manual_seed(n)
    sandbox_torch.manual_seed(n)


def test_causal_mask():
    assert causal_mask(3).tolist() == [[True, False, False], [True, True, False],
                                       [True, True, True]], (
        "causal_mask must be True on and below the diagonal (position t sees 0..t): is the "
        "diagonal left out, or the triangle flipped?")
    assert causal_mask(4).dtype == torch.bool, "causal_mask must return a bool tensor"


def test_post_block_output_is_normalized_per_token_and_pre_is_not():
    seed(0)
    x = 3 * torch.randn(2, 6, 16) + 1
    post = Block(16, 2, 32, 0.0, "post")(x, causal_mask(6))
    assert post.shape == (2, 6, 16)
    torch.testing.assert_close(post.mean(-1), torch.zeros(2, 6), atol=1e-5, rtol=0)
    torch.testing.assert_close(post.var(-1, unbiased=False), torch.ones(2, 6), atol=1e-3, rtol=0)
    pre = Block(16, 2, 32, 0.0, "pre")(x, causal_mask(6))
    assert pre.shape == (2, 6, 16)
    assert pre.mean(-1).abs().max() > 0.1  # the residual stream is not normalized


@pytest.mark.parametrize("norm", ["pre", "post"])
def test_block_is_causal(norm):
    seed(0)
    block = Block(16, 4, 32, 0.0, norm)
    x = torch.randn(2, 5, 16)
    changed = x.clone()
    changed[:, 3:] += 1.0
    a, b = block(x, causal_mask(5)), block(changed, causal_mask(5))
    torch.testing.assert_close(a[:, :3], b[:, :3], msg=lambda m: (
        "a Block must be causal: changing later tokens changed earlier outputs (is the mask "
        f"not passed to the attention, or are the heads merged without the transpose?)\n{m}"))
    assert not torch.allclose(a[:, 3:], b[:, 3:]), (
        "a Block's output must depend on its own token: changing tokens 3.. changed nothing")


def test_final_layernorm_only_for_pre():
    assert remote_isinstance(tiny_lm(norm="pre").ln_f, "torch.nn.LayerNorm"), (
        "a pre-LN DecoderLM must end in a final LayerNorm ln_f")
    post = tiny_lm(norm="post")
    assert not remote_isinstance(post.ln_f, "torch.nn.LayerNorm"), (
        "a post-LN DecoderLM must have no final LayerNorm (ln_f an nn.Identity): its last "
        "block already ends in one")
    n_norms = sum(remote_isinstance(m, "torch.nn.LayerNorm") for m in post.modules())
    assert n_norms == 4, (  # 2 per block
        "a post-LN DecoderLM must hold two LayerNorms per block and no other")


@pytest.mark.parametrize("norm", ["pre", "post"])
def test_decoder_is_causal(norm):
    model = tiny_lm(norm=norm).eval()
    ids = torch.randint(3, 12, (2, 10))
    changed = ids.clone()
    changed[:, 6:] = torch.randint(3, 12, (2, 4))
    a, b = model(ids), model(changed)
    assert a.shape == (2, 10, 12)
    torch.testing.assert_close(a[:, :6], b[:, :6])
    assert not torch.allclose(a[:, 6:], b[:, 6:])


def test_embeddings_are_not_scaled_and_use_default_init():
    model = tiny_lm().eval()
    ids = torch.tensor([[4, 5]])
    state = model.state_dict()
    x = state["tok_emb.weight"][ids] + state["pos_emb.weight"][:2]
    # the first block's input, passed by position or by name, recorded next to the code
    block_in, _ = submission("tests.tiny_problem3").inputs_during(model.blocks[0], model, ids)
    assert block_in, "DecoderLM must run its first block"
    torch.testing.assert_close(block_in[0], x, msg=lambda m: (
        "the first block's input must be tok_emb(ids) + pos_emb(positions), unscaled: is the "
        f"position embedding left out, or an embedding scaled (by sqrt(d_model))?\n{m}"))
    assert 0.8 < state["tok_emb.weight"].std() < 1.2, (  # nn.Embedding's N(0, 1)
        "tok_emb must keep nn.Embedding's default N(0, 1) initialization")
