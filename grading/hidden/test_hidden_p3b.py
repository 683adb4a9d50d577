"""Hidden tests, Problem 3 Part B: blocks against the formula written out by hand and against
torch.nn.MultiheadAttention, dropout on the residual branches only, the mask actually used,
and the model's forward pass, position embedding and length limit."""

import math

import pytest
import torch

from problem3.model import Block, DecoderLM, causal_mask

pytestmark = pytest.mark.p3b


def tril(size):
    return torch.ones(size, size, dtype=torch.bool).tril()


def perturb(module):
    with torch.no_grad():  # move the LayerNorms off their identity initialization too
        for p in module.parameters():
            p.add_(0.1 * torch.randn_like(p))


def reference_block(block: Block, x: torch.Tensor) -> torch.Tensor:
    """The block written out by hand: separate projections, explicit masked softmax."""
    def attn(y):
        B, T, d = y.shape
        h = block.num_heads

        def heads(t):
            return t.view(B, T, h, d // h).transpose(1, 2)
        q, k, v = heads(block.q_proj(y)), heads(block.k_proj(y)), heads(block.v_proj(y))
        scores = q @ k.transpose(-2, -1) / math.sqrt(d // h)
        scores = scores.masked_fill(~tril(T), float("-inf"))
        out = (scores.softmax(-1) @ v).transpose(1, 2).reshape(B, T, d)
        return block.out_proj(out)

    if block.norm == "pre":
        x = x + attn(block.ln1(x))
        return x + block.ffn(block.ln2(x))
    x = block.ln1(x + attn(x))
    return block.ln2(x + block.ffn(x))


def torch_attention(block: Block, y: torch.Tensor) -> torch.Tensor:
    """The block's self-attention through torch.nn.MultiheadAttention with its weights."""
    d = y.shape[-1]
    mha = torch.nn.MultiheadAttention(d, block.num_heads, batch_first=True)
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.cat([block.q_proj.weight, block.k_proj.weight,
                                            block.v_proj.weight]))
        mha.in_proj_bias.copy_(torch.cat([block.q_proj.bias, block.k_proj.bias,
                                          block.v_proj.bias]))
        mha.out_proj.weight.copy_(block.out_proj.weight)
        mha.out_proj.bias.copy_(block.out_proj.bias)
    T = y.shape[1]
    return mha(y, y, y, attn_mask=~tril(T), need_weights=False)[0]  # True = not allowed


@pytest.mark.parametrize("norm", ["pre", "post"])
def test_block_matches_the_written_out_formula(norm):
    torch.manual_seed(0)
    block = Block(16, 4, 32, dropout=0.1, norm=norm).eval()
    perturb(block)
    x = torch.randn(2, 5, 16)
    torch.testing.assert_close(block(x, causal_mask(5)), reference_block(block, x), msg=lambda m: (
        f"a {norm}-LN Block must follow its formula (post: LayerNorm of the residual sum; pre: "
        "LayerNorm of the sublayer's input only): is the norm in the wrong place, or the mask, "
        f"scale or head layout of the attention wrong?\n{m}"))


@pytest.mark.parametrize("norm, heads", [("pre", 4), ("post", 2), ("pre", 1)])
def test_block_matches_torch_multihead_attention(norm, heads):
    torch.manual_seed(1)
    block = Block(12, heads, 24, dropout=0.0, norm=norm).eval()
    perturb(block)
    x = torch.randn(3, 7, 12)
    with torch.no_grad():
        if norm == "pre":
            h = x + torch_attention(block, block.ln1(x))
            expected = h + block.ffn(block.ln2(h))
        else:
            h = block.ln1(x + torch_attention(block, x))
            expected = block.ln2(h + block.ffn(h))
        torch.testing.assert_close(block(x, tril(7)), expected, atol=1e-5, rtol=1e-5)


def test_dropout_sits_on_the_residual_branches():
    # p = 1 in training mode zeroes each branch: pre leaves x as it is, post normalizes twice.
    torch.manual_seed(2)
    x = torch.randn(2, 5, 16)
    pre = Block(16, 4, 32, dropout=1.0, norm="pre").train()
    torch.testing.assert_close(pre(x, tril(5)), x)
    post = Block(16, 4, 32, dropout=1.0, norm="post").train()
    perturb(post)
    torch.testing.assert_close(post(x, tril(5)), post.ln2(post.ln1(x)))


def test_block_uses_the_mask_it_is_given():
    torch.manual_seed(3)
    block = Block(16, 2, 32, dropout=0.0, norm="pre").eval()
    x = torch.randn(1, 4, 16)
    changed = x.clone()
    changed[:, 3] = torch.randn(16)  # not a constant shift, which a LayerNorm would undo
    full = torch.ones(4, 4, dtype=torch.bool)  # no longer causal: position 0 sees position 3
    assert not torch.allclose(block(x, full)[:, 0], block(changed, full)[:, 0])
    torch.testing.assert_close(block(x, tril(4))[:, 0], block(changed, tril(4))[:, 0])


def test_model_forward_composes_its_modules():
    torch.manual_seed(4)
    for norm in ("pre", "post"):
        model = DecoderLM(11, d_model=16, num_layers=3, num_heads=2, d_ff=32, max_len=9,
                          dropout=0.1, norm=norm).eval()
        assert len(model.blocks) == 3 and model.head.out_features == 11
        assert model.tok_emb.weight.shape == (11, 16) and model.pos_emb.weight.shape == (9, 16)
        ids = torch.randint(0, 11, (2, 6))
        with torch.no_grad():
            x = model.tok_emb(ids) + model.pos_emb(torch.arange(6))
            for block in model.blocks:
                x = block(x, tril(6))
            expected = model.head(model.ln_f(x))
            torch.testing.assert_close(model(ids), expected)


def test_position_embedding_row_t_reaches_positions_t_onwards():
    torch.manual_seed(5)
    model = DecoderLM(10, d_model=16, num_layers=2, num_heads=2, d_ff=32, max_len=8,
                      dropout=0.0).eval()
    ids = torch.randint(0, 10, (2, 8))
    with torch.no_grad():
        before = model(ids)
        model.pos_emb.weight[3] += torch.randn(16)  # not a constant shift: LayerNorm undoes it
        after = model(ids)
    torch.testing.assert_close(after[:, :3], before[:, :3])
    assert not torch.allclose(after[:, 3], before[:, 3])


def test_sequences_up_to_max_len_and_no_longer():
    model = DecoderLM(10, d_model=8, num_layers=1, num_heads=2, d_ff=16, max_len=6,
                      dropout=0.0).eval()
    assert model(torch.zeros(1, 6, dtype=torch.long)).shape == (1, 6, 10)
    assert model(torch.zeros(3, 1, dtype=torch.long)).shape == (3, 1, 10)
    with pytest.raises(ValueError):
        model(torch.zeros(1, 7, dtype=torch.long))
