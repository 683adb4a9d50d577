"""Problem 3, Part B: the causal mask, pre- and post-norm blocks, and the decoder-only model
(tiny models only)."""

import math

import pytest
import torch
import torch.nn.functional as F

from tests.seam import remote_isinstance, submission
from tests.tiny import expect_raises

pytestmark = pytest.mark.p3b

model_module = submission("problem3.model")
Block = model_module.Block
causal_mask = model_module.causal_mask
tiny_lm = submission("tests.tiny").tiny_lm  # a 2-layer DecoderLM, built next to the code
sandbox_torch = submission("torch")
stubs = submission("tests.tiny_problem3")  # helpers that run next to the model


def seed(n: int) -> None:
    """Seed torch here and next to the code under test (where the modules are made)."""
    torch.manual_seed(n)
    sandbox_torch.manual_seed(n)


def test_causal_mask():
    got = causal_mask(3).tolist()
    ones = torch.ones(3, 3, dtype=torch.bool)
    readings = {  # what the usual mistakes give
        "the diagonal is left out (tril(-1)): a position cannot see itself":
            ones.tril(-1).tolist(),
        "the triangle is flipped (triu): positions see the future": ones.triu().tolist(),
        "it is torch's convention (True = blocked, triu(1)), not True = attend":
            ones.triu(1).tolist()}
    same = [why for why, values in readings.items() if got == values]
    assert got == ones.tril().tolist(), (
        "causal_mask must be True on and below the diagonal (position t sees 0..t), not "
        f"{got}: " + (same[0] if same else "it is none of: " + "; ".join(readings)))
    assert causal_mask(4).dtype == torch.bool, "causal_mask must return a bool tensor"


# ------------------------------------------------ the block's formula, written out here
def linear(state: dict, name: str, x: torch.Tensor) -> torch.Tensor:
    return F.linear(x, state[f"{name}.weight"], state[f"{name}.bias"])


def layer_norm(state: dict, name: str, x: torch.Tensor) -> torch.Tensor:
    return F.layer_norm(x, x.shape[-1:], state[f"{name}.weight"], state[f"{name}.bias"])


def block_by_formula(state: dict, norm: str, h: int, x: torch.Tensor,
                     mistake: str | None = None) -> torch.Tensor:
    """The Block's formula from its state dict (explicit masked softmax, separate
    projections), or what one mistake makes of it."""
    def attn(y):
        B, T, d = y.shape

        def heads(t):
            return t.view(B, T, h, d // h).transpose(1, 2)
        q, k, v = (heads(linear(state, name, y)) for name in ("q_proj", "k_proj", "v_proj"))
        scale = {"unscaled": 1.0, "d_model scale": 1 / math.sqrt(d),
                 "d_head scale": 1 / (d // h)}.get(mistake, 1 / math.sqrt(d // h))
        scores = q @ k.transpose(-2, -1) * scale
        if mistake != "no mask":
            allowed = torch.ones(T, T, dtype=torch.bool).tril()
            scores = scores.masked_fill(allowed if mistake == "flipped mask" else ~allowed,
                                        -math.inf)
        out = scores.softmax(-1) @ v
        out = out.reshape(B, T, d) if mistake == "merge" else out.transpose(1, 2).reshape(B, T, d)
        return out if mistake == "no out_proj" else linear(state, "out_proj", out)

    def ffn(y):
        return linear(state, "ffn.2", F.gelu(linear(state, "ffn.0", y)))

    if mistake == "placement":  # the other placement's formula
        norm = "post" if norm == "pre" else "pre"
    if mistake == "mixed" and norm == "post":  # attention pre-norm, feed-forward post-norm
        x = x + attn(layer_norm(state, "ln1", x))
        return layer_norm(state, "ln2", x + ffn(x))
    if mistake == "mixed":  # attention post-norm, feed-forward pre-norm
        x = layer_norm(state, "ln1", x + attn(x))
        return x + ffn(layer_norm(state, "ln2", x))
    if norm == "pre":
        x = x + attn(layer_norm(state, "ln1", x))
        base = layer_norm(state, "ln2", x) if mistake == "normed residual" else x
        return base + ffn(layer_norm(state, "ln1" if mistake == "ln1 twice" else "ln2", x))
    x = layer_norm(state, "ln1", x + attn(x))
    return layer_norm(state, "ln1" if mistake == "ln1 twice" else "ln2", x + ffn(x))


BLOCK_MISTAKES = {
    "unscaled": "the attention scores are not divided by sqrt(d_head)",
    "d_model scale": "the attention scores are divided by sqrt(d_model), not by sqrt(d_head) "
                     "= sqrt(d_model / num_heads)",
    "d_head scale": "the attention scores are divided by d_head, not by sqrt(d_head)",
    "no mask": "the causal mask is not used",
    "flipped mask": "the mask's meaning is flipped (True must mean 'may attend'; in "
                    "nn.MultiheadAttention True blocks)",
    "merge": "the heads are merged back by a plain reshape without the transpose",
    "no out_proj": "the attention's output projection out_proj is skipped",
    "placement": "the LayerNorms are placed as in the other norm (pre for post, or post for "
                 "pre)",
    "mixed": "the two sublayers have different placements (one normalizes its input, the "
             "other the residual sum)",
    "normed residual": "the feed-forward residual adds LN2(x) instead of x",
    "ln1 twice": "ln1 normalizes both sublayers (ln2 unused)",
}


@pytest.mark.parametrize("norm", ["pre", "post"])
def test_block_matches_its_formula(norm):
    seed(6)
    block = Block(12, 3, 24, 0.1, norm).eval()
    generator = torch.Generator().manual_seed(6)
    state = {name: p + 0.2 * torch.randn(p.shape, generator=generator)  # norms off identity
             for name, p in block.state_dict().items()}
    block.load_state_dict(state)
    x = torch.randn(2, 5, 12, generator=generator)
    out = block(x, torch.ones(5, 5, dtype=torch.bool).tril())  # causal_mask has its test
    expected = block_by_formula(state, norm, 3, x)
    formula = {"pre": "x = x + Drop(Attn(LN1(x))); x = x + Drop(FFN(LN2(x)))",
               "post": "x = LN1(x + Drop(Attn(x))); x = LN2(x + Drop(FFN(x)))"}[norm]

    def hint() -> str:
        for mistake, why in BLOCK_MISTAKES.items():
            recomputed = block_by_formula(state, norm, 3, x, mistake)
            # flipped, the last query sees no key: NaN or 0 there, by implementation
            rows = slice(0, -1) if mistake == "flipped mask" else slice(None)
            if torch.allclose(out[:, rows], recomputed[:, rows], atol=1e-5):
                return f"your output is exactly what it is when {why}"
        gap = (out - expected).abs().max().item()
        return (f"it differs from the formula's by up to {gap:.3g}, and from what it is when "
                + ", or when ".join(BLOCK_MISTAKES.values())
                + ": compare it with the formula step by step")
    torch.testing.assert_close(out, expected, msg=lambda m: (
        f"a {norm}-LN Block must compute {formula} with softmax(q k^T / sqrt(d_head)) "
        f"causal attention (eval mode, no dropout): {hint()}\n{m}"))
    unmasked = block_by_formula(state, norm, 3, x, "no mask")
    everything = block(x, torch.ones(5, 5, dtype=torch.bool))  # every key seen
    torch.testing.assert_close(everything, unmasked, msg=lambda m: (
        "a Block must attend as the mask it is given says (all True here: every query sees "
        f"every key), not by a causal mask of its own (is_causal=True)\n{m}"))


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
    changed[:, 3:] = torch.randn(2, 2, 16)  # not a constant shift, which a LayerNorm undoes
    mask = torch.ones(5, 5, dtype=torch.bool).tril()  # made here: causal_mask has its test
    a, b = block(x, mask), block(changed, mask)
    torch.testing.assert_close(a[:, :3], b[:, :3], msg=lambda m: (
        "a Block must be causal: changing later tokens changed earlier outputs (is the mask "
        "not passed to the attention, or its meaning flipped (True = may attend), or are the "
        f"heads merged without the transpose?)\n{m}"))
    assert not torch.allclose(a[:, 3:], b[:, 3:]), (
        "a Block's output must depend on its own token: changing tokens 3.. changed nothing")
    earlier = x.clone()
    earlier[:, 0] = torch.randn(2, 16)  # token 0 is seen by every later query
    c = block(earlier, mask)
    assert not torch.allclose(c[:, 2], a[:, 2]), (
        "a Block's output at position 2 must depend on the earlier token 0 (self-attention "
        "mixes the tokens a query sees): is x returned as it is, or is the attention's output "
        "not added to the residual stream?")


@pytest.mark.parametrize("norm", ["pre", "post"])
def test_decoder_lm_backpropagates(norm):
    """train.py trains the model: its logits' backward must run."""
    error = submission("tests.tiny_problem3").backward_error(tiny_lm(norm=norm),
                                                           torch.randint(3, 12, (2, 6)))
    assert error is None, (
        f"a {norm}-LN DecoderLM must backpropagate (train.py trains it), but backward raised "
        f"{error!r}: is a tensor autograd saved changed in place (x += ... instead of "
        "x = x + ...)?")


def test_final_layernorm_only_for_pre():
    assert remote_isinstance(tiny_lm(norm="pre").ln_f, "torch.nn.LayerNorm"), (
        "a pre-LN DecoderLM must end in a final LayerNorm ln_f")
    post = tiny_lm(norm="post")
    assert not remote_isinstance(post.ln_f, "torch.nn.LayerNorm"), (
        "a post-LN DecoderLM must have no final LayerNorm (ln_f an nn.Identity): its last "
        "block already ends in one")
    n_blocks = sum(remote_isinstance(m, "problem3.model.Block") for m in post.modules())
    assert n_blocks == 2, (
        f"DecoderLM(num_layers=2) must hold 2 Blocks as modules, not {n_blocks}: "
        + ("is blocks a plain list (an nn.ModuleList registers them)?" if n_blocks == 0 else
           "is one Block repeated ([Block(...)] * num_layers)?"))
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
    torch.testing.assert_close(a[:, :6], b[:, :6], msg=lambda m: (
        f"{mask_note()}DecoderLM must be causal: changing tokens 6.. changed the logits of "
        "positions 0..5 (does forward pass causal_mask to every block, and each block to its "
        f"attention, True = attend?)\n{m}"))
    assert not torch.allclose(a[:, 6:], b[:, 6:]), (
        "DecoderLM's logits at positions 6.. must depend on the tokens there")


def mask_note() -> str:
    """The model relies on causal_mask: a sentence that says to fix it first if it fails its
    own test (a probe, so that the grader's message says it too), else ''."""
    mask = causal_mask(5)
    if mask.dtype == torch.bool and torch.equal(mask, torch.ones(5, 5, dtype=torch.bool).tril()):
        return ""
    return ("your causal_mask fails its own test (test_causal_mask: a bool tensor, True on "
            "and below the diagonal): fix it first, DecoderLM masks with it. ")


def test_embeddings_are_not_scaled_and_use_default_init():
    model = tiny_lm().eval()
    ids = torch.tensor([[4, 5]])
    state = model.state_dict()
    x = state["tok_emb.weight"][ids] + state["pos_emb.weight"][:2]
    # the first block's input, passed by position or by name, recorded next to the code
    block_in, _ = submission("tests.tiny_problem3").inputs_during(model.blocks[0], model, ids)
    assert block_in, "DecoderLM must run its first block"
    shifted = [start for start in range(1, 4) if torch.allclose(  # positions from 1, 2, 3
        block_in[0], state["tok_emb.weight"][ids] + state["pos_emb.weight"][start:start + 2],
        atol=1e-5)]
    why = (f"its positions start at {shifted[0]}, not 0: positions are arange(start, "
           "start + T), start 0 without a cache" if shifted else
           "is the position embedding left out, or an embedding scaled (by sqrt(d_model))?")
    torch.testing.assert_close(block_in[0], x, msg=lambda m: (
        f"the first block's input must be tok_emb(ids) + pos_emb(positions), unscaled: {why}"
        f"\n{m}"))
    assert 0.8 < state["tok_emb.weight"].std() < 1.2, (  # nn.Embedding's N(0, 1)
        "tok_emb must keep nn.Embedding's default N(0, 1) initialization")


def lm_by_formula(state: dict, norm: str, ids: torch.Tensor,
                  final_norm: bool | None = None) -> torch.Tensor:
    """A 2-block, 2-head DecoderLM's logits from its state dict, written out (no dropout):
    head(ln_f(blocks(tok_emb(ids) + pos_emb(positions)))), ln_f for pre-LN unless
    final_norm says otherwise."""
    x = state["tok_emb.weight"][ids] + state["pos_emb.weight"][:ids.shape[1]]
    for i in range(2):
        prefix = f"blocks.{i}."
        x = block_by_formula({name.removeprefix(prefix): value for name, value in
                              state.items() if name.startswith(prefix)}, norm, 2, x)
    final_norm = norm == "pre" if final_norm is None else final_norm
    return linear(state, "head", layer_norm(state, "ln_f", x) if final_norm else x)


@pytest.mark.parametrize("norm", ["pre", "post"])
def test_eval_mode_turns_every_dropout_off(norm):
    """The module docstring's dropout is nn.Dropout's: on in training mode only. In eval mode
    a DecoderLM with dropout 0.5 gives its formula's logits, with no dropout, at every call."""
    model = tiny_lm(vocab_size=9, norm=norm, dropout=0.5, seed=9).eval()
    ids = torch.randint(0, 9, (2, 7), generator=torch.Generator().manual_seed(9))
    first, second = model(ids), model(ids)
    why = ("two calls in eval mode gave different logits, so dropout still draws there: is "
           "a dropout written F.dropout(x, p) (training=True unless told), or an nn.Dropout "
           "made inside forward (a new module is in training mode)? Use self.dropout or "
           "F.dropout(x, p, self.training)" if not torch.equal(first, second) else
           "two calls in eval mode agree, so no dropout draws there; if "
           "test_decoder_lm_composes_its_modules fails too, fix what it names first")
    torch.testing.assert_close(first, lm_by_formula(model.state_dict(), norm, ids),
                               msg=lambda m: (
        f"a {norm}-LN DecoderLM with dropout 0.5 must give its formula's logits in eval mode, "
        f"with no dropout: {why}\n{m}"))


@pytest.mark.parametrize("norm", ["pre", "post"])
def test_decoder_lm_composes_its_modules(norm):
    model = tiny_lm(vocab_size=9, norm=norm, seed=7).eval()  # 2 blocks of width 16, 2 heads
    state = model.state_dict()
    ids = torch.randint(0, 9, (2, 7), generator=torch.Generator().manual_seed(7))
    logits = model(ids)
    hint = ("is the final LayerNorm ln_f skipped in forward?" if norm == "pre" and
            torch.allclose(logits, lm_by_formula(state, norm, ids, final_norm=False),
                           atol=1e-5) else
            "if test_block_matches_its_formula fails too, fix Block first; else is a module "
            "skipped or applied twice?")
    torch.testing.assert_close(logits, lm_by_formula(state, norm, ids), msg=lambda m: (
        f"{mask_note()}"
        "DecoderLM(ids) must be head(ln_f(blocks(tok_emb(ids) + pos_emb(positions)))), ln_f "
        f"for pre-LN only: {hint}\n{m}"))


@pytest.mark.parametrize("norm", ["pre", "post"])
def test_dropout_on_the_embeddings_and_the_residual_branches(norm):
    # With p = 1 in training mode dropout zeroes what it acts on: the embedding sum and
    # every sublayer's output. Pre-LN: x stays 0 through the blocks, logits head(ln_f(0));
    # post-LN: each block is x -> LN2(LN1(x)) from x = 0.
    model = tiny_lm(vocab_size=9, norm=norm, dropout=1.0, seed=8).train()
    generator = torch.Generator().manual_seed(8)
    state = {name: p + 0.2 * torch.randn(p.shape, generator=generator)
             for name, p in model.state_dict().items()}
    model.load_state_dict(state)
    ids = torch.randint(0, 9, (2, 5), generator=generator)
    x = torch.zeros(2, 5, 16)
    if norm == "pre":
        x = layer_norm(state, "ln_f", x)
    else:
        for i in range(2):
            x = layer_norm(state, f"blocks.{i}.ln2", layer_norm(state, f"blocks.{i}.ln1", x))
    torch.testing.assert_close(model(ids), linear(state, "head", x), msg=lambda m: (
        f"a {norm}-LN DecoderLM in training mode must apply dropout to the embedding sum "
        "tok_emb + pos_emb and to each sublayer's output before its residual sum, nowhere "
        "else (with dropout 1 they vanish): is the embeddings' dropout missing, or a "
        f"residual branch without its dropout?\n{m}"))


def test_no_dropout_on_the_attention_weights():
    # The module docstring: dropout acts on the embedding sum and on each sublayer's output,
    # never on the attention weights. With the feed-forward sublayer zeroed, a pre-LN Block
    # in training mode is x + Drop(Attn(LN1(x))): each entry of out - x is either 0 (dropped)
    # or the eval-mode Attn(LN1(x)) entry divided by 1 - p (kept). Dropout inside the
    # attention (on its weights, e.g. F.scaled_dot_product_attention's dropout_p) changes the
    # kept entries too.
    p = 0.5
    seed(9)
    block = Block(12, 3, 24, p, "pre")
    generator = torch.Generator().manual_seed(9)
    state = {name: value + 0.2 * torch.randn(value.shape, generator=generator)
             for name, value in block.state_dict().items()}
    state["ffn.2.weight"] = torch.zeros_like(state["ffn.2.weight"])
    state["ffn.2.bias"] = torch.zeros_like(state["ffn.2.bias"])
    block.load_state_dict(state)
    x = torch.randn(4, 6, 12, generator=generator)
    mask = torch.ones(6, 6, dtype=torch.bool).tril()
    attended = block.eval()(x, mask) - x  # Attn(LN1(x)), no dropout anywhere
    seed(10)
    branch = block.train()(x, mask) - x  # Drop(Attn(LN1(x))) if only the branch is dropped
    dropped = torch.isclose(branch, torch.zeros_like(branch), atol=1e-5, rtol=0)
    kept = torch.isclose(branch, attended / (1 - p), atol=1e-5, rtol=1e-4)
    wrong = ~(dropped | kept)
    assert not wrong.any(), (
        f"a Block in training mode (dropout {p}) must drop whole entries of the attention "
        "sublayer's output and nothing inside the attention: with the FFN zeroed, each entry "
        "of block(x) - x must be 0 or the eval-mode attention output / (1 - p), but "
        f"{int(wrong.sum())} of {wrong.numel()} entries are neither. Is dropout applied to the "
        "attention weights (dropout_p passed to F.scaled_dot_product_attention, or a dropout "
        "on the softmax), which the model's docstring rules out?")
    assert (dropped & ~kept).any() and (kept & ~dropped).any(), (
        f"a Block in training mode with dropout {p} must drop some entries of the attention "
        "sublayer's output and keep (rescale) the others, a nonzero attention output: is the "
        "Block's dropout missing, its mode ignored, or the attention sublayer's output zero?")


def test_decoder_lm_takes_max_len_positions_and_rejects_more():
    """DecoderLM.forward: a sequence longer than max_len raises ValueError; max_len itself
    (12 here) is allowed."""
    model = tiny_lm()
    model.eval()
    try:
        logits = model(torch.zeros(1, 12, dtype=torch.long))
    except ValueError as error:
        pytest.fail(f"DecoderLM(max_len=12) must take a sequence of 12 positions, but it "
                    f"raised ValueError ({error}): is the check start + T >= max_len instead "
                    "of > max_len?", pytrace=False)
    except IndexError as error:
        pytest.fail(f"DecoderLM(max_len=12) must take a sequence of 12 positions, but it "
                    f"raised IndexError ({error}): does pos_emb have max_len rows, one for "
                    "each position 0 .. max_len - 1?", pytrace=False)
    assert tuple(logits.shape) == (1, 12, 12)
    expect_raises(ValueError, model, torch.zeros(1, 13, dtype=torch.long),
                  what="DecoderLM(max_len=12) on 13 positions")


def test_kv_cache_if_used_gives_the_full_forward_logits():
    """Block.attention with kv_cache: the new keys and values are appended to the cached
    ones, so one token at a time gives the logits of the whole sequence at once. A model
    that leaves the cache empty (kv_cache ignored, which the homework allows) passes."""
    model = tiny_lm(seed=3)
    model.eval()
    ids = torch.randint(0, 12, (2, 7), generator=torch.Generator().manual_seed(0))
    stepped = stubs.incremental_logits(model, ids)
    if stepped is None:
        return
    full = model(ids)
    worst = (stepped - full).abs().amax(dim=(0, 2))  # per position
    assert torch.allclose(stepped, full, atol=1e-5), (
        "with kv_cache, feeding one token at a time must give the same logits as the whole "
        f"sequence at once; they differ from position {int((worst > 1e-5).nonzero()[0])} on "
        f"(max {worst.max():.3g}): does the cache keep every earlier key and value (appended "
        "along the positions), not only the newest, and do the new positions start after "
        "the cached ones?")
