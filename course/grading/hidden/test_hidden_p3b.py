"""Hidden tests, Problem 3 Part B: blocks against the formula written out by hand and against
torch.nn.MultiheadAttention, dropout on the residual branches only, the mask actually used,
and the model's forward pass, position embedding and length limit."""

import math

import pytest
import torch
import torch.nn.functional as F

from tests.seam import submission

pytestmark = pytest.mark.p3b

model_module = submission("problem3.model")
Block = model_module.Block
DecoderLM = model_module.DecoderLM
causal_mask = model_module.causal_mask
sandbox_torch = submission("torch")


def seed(n: int) -> None:
    """Seed torch here and next to the code under test (where the modules are made)."""
    torch.manual_seed(n)
    sandbox_torch.manual_seed(n)


def tril(size):
    return torch.ones(size, size, dtype=torch.bool).tril()


def perturb(module) -> dict:
    """Move every parameter off its initialization (the LayerNorms off the identity too),
    through load_state_dict; the new state dict."""
    state = {name: p + 0.1 * torch.randn_like(p) for name, p in module.state_dict().items()}
    module.load_state_dict(state)
    return state


# The block written out by hand from its state dict (Block's given module names).
def linear(state: dict, name: str, x: torch.Tensor) -> torch.Tensor:
    return F.linear(x, state[f"{name}.weight"], state[f"{name}.bias"])


def layer_norm(state: dict, name: str, x: torch.Tensor) -> torch.Tensor:
    return F.layer_norm(x, x.shape[-1:], state[f"{name}.weight"], state[f"{name}.bias"])


def ffn(state: dict, x: torch.Tensor) -> torch.Tensor:
    return linear(state, "ffn.2", F.gelu(linear(state, "ffn.0", x)))


def reference_block(state: dict, norm: str, h: int, x: torch.Tensor) -> torch.Tensor:
    """The block written out by hand: separate projections, explicit masked softmax."""
    def attn(y):
        B, T, d = y.shape

        def heads(t):
            return t.view(B, T, h, d // h).transpose(1, 2)
        q, k, v = (heads(linear(state, name, y)) for name in ("q_proj", "k_proj", "v_proj"))
        scores = q @ k.transpose(-2, -1) / math.sqrt(d // h)
        scores = scores.masked_fill(~tril(T), float("-inf"))
        out = (scores.softmax(-1) @ v).transpose(1, 2).reshape(B, T, d)
        return linear(state, "out_proj", out)

    if norm == "pre":
        x = x + attn(layer_norm(state, "ln1", x))
        return x + ffn(state, layer_norm(state, "ln2", x))
    x = layer_norm(state, "ln1", x + attn(x))
    return layer_norm(state, "ln2", x + ffn(state, x))


def torch_attention(state: dict, h: int, y: torch.Tensor) -> torch.Tensor:
    """The block's self-attention through torch.nn.MultiheadAttention with its weights."""
    d = y.shape[-1]
    mha = torch.nn.MultiheadAttention(d, h, batch_first=True)
    with torch.no_grad():
        for part in ("weight", "bias"):
            getattr(mha, f"in_proj_{part}").copy_(torch.cat(
                [state[f"{name}.{part}"] for name in ("q_proj", "k_proj", "v_proj")]))
        mha.out_proj.weight.copy_(state["out_proj.weight"])
        mha.out_proj.bias.copy_(state["out_proj.bias"])
    T = y.shape[1]
    return mha(y, y, y, attn_mask=~tril(T), need_weights=False)[0]  # True = not allowed


@pytest.mark.parametrize("norm", ["pre", "post"])
def test_block_matches_the_written_out_formula(norm):
    seed(0)
    block = Block(16, 4, 32, dropout=0.1, norm=norm).eval()
    state = perturb(block)
    x = torch.randn(2, 5, 16)
    torch.testing.assert_close(block(x, causal_mask(5)), reference_block(state, norm, 4, x),
                               msg=lambda m: (
        f"a {norm}-LN Block must follow its formula (post: LayerNorm of the residual sum; pre: "
        "LayerNorm of the sublayer's input only): is the norm in the wrong place, or the mask, "
        f"scale or head layout of the attention wrong?\n{m}"))


@pytest.mark.parametrize("norm, heads", [("pre", 4), ("post", 2), ("pre", 1)])
def test_block_matches_torch_multihead_attention(norm, heads):
    seed(1)
    block = Block(12, heads, 24, dropout=0.0, norm=norm).eval()
    state = perturb(block)
    x = torch.randn(3, 7, 12)
    with torch.no_grad():
        if norm == "pre":
            h = x + torch_attention(state, heads, layer_norm(state, "ln1", x))
            expected = h + ffn(state, layer_norm(state, "ln2", h))
        else:
            h = layer_norm(state, "ln1", x + torch_attention(state, heads, x))
            expected = layer_norm(state, "ln2", h + ffn(state, h))
    torch.testing.assert_close(block(x, tril(7)), expected, atol=1e-5, rtol=1e-5, msg=lambda m: (
        f"a {norm}-LN Block with {heads} head(s) must equal its formula written out with "
        "torch's multi-head attention from its own weights: are the heads split or merged in "
        f"another layout, the output projection skipped, or the scale not 1/sqrt(d_head)?\n{m}"))


def test_dropout_sits_on_the_residual_branches():
    # p = 1 in training mode zeroes each branch: pre leaves x as it is, post normalizes twice.
    seed(2)
    x = torch.randn(2, 5, 16)
    pre = Block(16, 4, 32, dropout=1.0, norm="pre").train()
    torch.testing.assert_close(pre(x, tril(5)), x, msg=lambda m: (
        "a pre-LN Block with dropout 1 in training mode must return x unchanged (both branches "
        "dropped, the residual path untouched): is dropout applied to the residual path or "
        f"after a LayerNorm?\n{m}"))
    post = Block(16, 4, 32, dropout=1.0, norm="post").train()
    state = perturb(post)
    torch.testing.assert_close(post(x, tril(5)),
                               layer_norm(state, "ln2", layer_norm(state, "ln1", x)),
                               msg=lambda m: (
        "a post-LN Block with dropout 1 in training mode must return LN2(LN1(x)) (both "
        "branches dropped): is dropout applied to the residual sum or after a norm?\n" + m))


def test_block_uses_the_mask_it_is_given():
    seed(3)
    block = Block(16, 2, 32, dropout=0.0, norm="pre").eval()
    x = torch.randn(1, 4, 16)
    changed = x.clone()
    changed[:, 3] = torch.randn(16)  # not a constant shift, which a LayerNorm would undo
    full = torch.ones(4, 4, dtype=torch.bool)  # no longer causal: position 0 sees position 3
    assert not torch.allclose(block(x, full)[:, 0], block(changed, full)[:, 0]), (
        "with a mask that lets position 0 see position 3, changing position 3 must change "
        "position 0's output: does the Block ignore the mask it is given (a causal mask of "
        "its own)?")
    torch.testing.assert_close(block(x, tril(4))[:, 0], block(changed, tril(4))[:, 0],
                               msg=lambda m: (
        "under a causal mask, changing position 3 must not change position 0's output: is the "
        f"mask passed to the attention, with True = may attend?\n{m}"))


def test_model_forward_composes_its_modules():
    seed(4)
    for norm in ("pre", "post"):
        model = DecoderLM(11, d_model=16, num_layers=3, num_heads=2, d_ff=32, max_len=9,
                          dropout=0.1, norm=norm).eval()
        assert len(model.blocks) == 3 and model.head.out_features == 11
        state = model.state_dict()
        assert state["tok_emb.weight"].shape == (11, 16)
        assert state["pos_emb.weight"].shape == (9, 16)
        ids = torch.randint(0, 11, (2, 6))
        # the model written out by hand from its weights, each block by the formula
        x = state["tok_emb.weight"][ids] + state["pos_emb.weight"][:6]
        for i in range(3):
            prefix = f"blocks.{i}."
            x = reference_block({name.removeprefix(prefix): value for name, value in
                                 state.items() if name.startswith(prefix)}, norm, 2, x)
        if norm == "pre":
            x = layer_norm(state, "ln_f", x)
        expected = linear(state, "head", x)
        torch.testing.assert_close(model(ids), expected, msg=lambda m, norm=norm: (
            f"a {norm}-LN DecoderLM must equal tok_emb + pos_emb, its blocks, "
            + ("ln_f" if norm == "pre" else "no final norm") + " and the head, written out "
            "from its own weights: are the embeddings scaled, the positions offset, or the "
            f"final norm misplaced?\n{m}"))


def test_position_embedding_row_t_reaches_positions_t_onwards():
    seed(5)
    model = DecoderLM(10, d_model=16, num_layers=2, num_heads=2, d_ff=32, max_len=8,
                      dropout=0.0).eval()
    ids = torch.randint(0, 10, (2, 8))
    before = model(ids)
    weight = model.pos_emb.weight
    weight[3] += torch.randn(16)  # not a constant shift: LayerNorm undoes it
    model.load_state_dict({"pos_emb.weight": weight}, strict=False)
    after = model(ids)
    torch.testing.assert_close(after[:, :3], before[:, :3], msg=lambda m: (
        "changing position embedding row 3 must not change the logits at positions 0-2 (a "
        "causal model reads row t at position t only): are the positions offset (from 1), or "
        f"the mask not causal?\n{m}"))
    assert not torch.allclose(after[:, 3], before[:, 3]), (
        "changing position embedding row 3 must change the logits at position 3: is pos_emb "
        "left out, or indexed from 1?")


def test_sequences_up_to_max_len_and_no_longer():
    model = DecoderLM(10, d_model=8, num_layers=1, num_heads=2, d_ff=16, max_len=6,
                      dropout=0.0).eval()
    assert model(torch.zeros(1, 6, dtype=torch.long)).shape == (1, 6, 10)
    assert model(torch.zeros(3, 1, dtype=torch.long)).shape == (3, 1, 10)
    with pytest.raises(ValueError):
        model(torch.zeros(1, 7, dtype=torch.long))
