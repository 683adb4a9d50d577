"""Problem 3: dataset, model, training step and schedule, sampling, well-formedness, metrics.

Nothing here trains for real: the model tests use tiny models, and the end-to-end test runs
a few steps on 400 training strings (tests/fixtures) in a temporary folder.
"""

import json
import math
import shutil
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

import problem3.evaluate as ev
import problem3.train as tr
from problem3.config import CLIP_NORM, run_name
from problem3.dataset import IGNORE_INDEX, SmilesDataset, build_vocab
from problem3.model import Block, DecoderLM, causal_mask
from problem3.sample import generate
from provided.smiles import BOS, EOS, PAD, SmilesVocab
from provided.visualize import main as visualize_main

FIXTURES = Path(__file__).parent / "fixtures"
TRAIN_FIXTURE = FIXTURES / "smiles_train.txt"


@pytest.fixture
def vocab() -> SmilesVocab:
    return build_vocab(TRAIN_FIXTURE)


@pytest.fixture
def data_dir(tmp_path) -> Path:
    """A data folder holding the 400 + 100 fixture strings as the SMILES splits."""
    smiles = tmp_path / "data" / "smiles"
    smiles.mkdir(parents=True)
    shutil.copy(TRAIN_FIXTURE, smiles / "train.txt")
    shutil.copy(FIXTURES / "smiles_val.txt", smiles / "val.txt")
    return tmp_path / "data"


def tiny_lm(vocab_size=12, norm="pre", dropout=0.0, seed=0) -> DecoderLM:
    torch.manual_seed(seed)
    return DecoderLM(vocab_size, d_model=16, num_layers=2, num_heads=2, d_ff=32, max_len=12,
                     dropout=dropout, norm=norm)


# ------------------------------------------------------------------------------ dataset
def test_build_vocab_has_the_22_tokens_and_specials(vocab):
    assert len(vocab) == 25 and vocab.itos[:3] == ["<pad>", "<bos>", "<eos>"]
    assert vocab.chemistry_tokens == sorted(vocab.chemistry_tokens)
    assert {"Cl", "Br", "[nH]", "c"} <= set(vocab.chemistry_tokens)


def test_dataset_item_layout(tmp_path, vocab):
    path = tmp_path / "s.txt"
    path.write_text("CCO\n")
    inputs, targets = SmilesDataset(path, vocab, max_len=8)[0]
    C, O = vocab.stoi["C"], vocab.stoi["O"]
    assert inputs.dtype == targets.dtype == torch.long and inputs.shape == targets.shape == (7,)
    assert inputs.tolist() == [BOS, C, C, O, EOS, PAD, PAD]
    assert targets.tolist() == [C, C, O, EOS, IGNORE_INDEX, IGNORE_INDEX, IGNORE_INDEX]
    # The longest allowed string (max_len - 2 = 9 tokens) fills every position; no PAD.
    path.write_text("c1ccccc1Cl\n")
    inputs, targets = SmilesDataset(path, vocab, max_len=11)[0]
    assert inputs[0] == BOS and inputs[-1] == vocab.stoi["Cl"]
    assert targets[-1] == EOS and (targets != IGNORE_INDEX).all()


def test_dataset_target_is_input_shifted_by_one(vocab):
    ds = SmilesDataset(TRAIN_FIXTURE, vocab)
    assert ds.inputs.shape == ds.targets.shape == (400, 51)
    real = ds.targets != IGNORE_INDEX
    assert torch.equal(ds.targets[:, :-1][real[:, :-1]], ds.inputs[:, 1:][real[:, :-1]])
    # IGNORE_INDEX exactly where the target would be PAD: after EOS, never before or at it.
    eos_at = (ds.targets == EOS).float().argmax(dim=1)
    positions = torch.arange(51)
    assert torch.equal(~real, positions[None, :] > eos_at[:, None])
    assert (ds.targets[real] != PAD).all()


def test_dataset_rejects_lines_with_their_number(tmp_path, vocab):
    path = tmp_path / "bad.txt"
    path.write_text("CCO\nCC[Se]C\n")
    with pytest.raises(ValueError, match=r"bad.txt, line 2: .*\[Se\]"):
        SmilesDataset(path, vocab)
    path.write_text("CCO\nCCO\n" + "C" * 11 + "\n")
    with pytest.raises(ValueError, match=r"line 3: 11 tokens, more than max_len - 2 = 10"):
        SmilesDataset(path, vocab, max_len=12)
    path.write_text("CC!O\n")
    with pytest.raises(ValueError, match="line 1"):
        SmilesDataset(path, vocab)


def test_dataset_missing_file_says_what_to_run(tmp_path, vocab):
    with pytest.raises(FileNotFoundError, match="generate_datasets.py"):
        SmilesDataset(tmp_path / "none.txt", vocab)


# -------------------------------------------------------------------------------- model
def test_causal_mask():
    assert causal_mask(3).tolist() == [[True, False, False], [True, True, False],
                                       [True, True, True]]
    assert causal_mask(4).dtype == torch.bool


def reference_block(block: Block, x: torch.Tensor) -> torch.Tensor:
    """The block written out by hand: separate projections, explicit masked softmax."""
    def attn(y):
        B, T, d = y.shape
        h = block.num_heads

        def heads(t):
            return t.view(B, T, h, d // h).transpose(1, 2)
        q, k, v = heads(block.q_proj(y)), heads(block.k_proj(y)), heads(block.v_proj(y))
        scores = q @ k.transpose(-2, -1) / math.sqrt(d // h)
        scores = scores.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
        out = (scores.softmax(-1) @ v).transpose(1, 2).reshape(B, T, d)
        return block.out_proj(out)

    if block.norm == "pre":
        x = x + attn(block.ln1(x))
        return x + block.ffn(block.ln2(x))
    x = block.ln1(x + attn(x))
    return block.ln2(x + block.ffn(x))


@pytest.mark.parametrize("norm", ["pre", "post"])
def test_block_matches_the_written_out_formula(norm):
    torch.manual_seed(0)
    block = Block(16, 4, 32, dropout=0.1, norm=norm).eval()
    for p in block.parameters():  # move LayerNorms off their identity initialization
        p.data.add_(0.1 * torch.randn_like(p))
    x = torch.randn(2, 5, 16)
    torch.testing.assert_close(block(x, causal_mask(5)), reference_block(block, x))
    assert isinstance(block.ffn[1], torch.nn.GELU)


def test_post_block_output_is_normalized_per_token_and_pre_is_not():
    torch.manual_seed(0)
    x = 3 * torch.randn(2, 6, 16) + 1
    post = Block(16, 2, 32, 0.0, "post")(x, causal_mask(6))
    torch.testing.assert_close(post.mean(-1), torch.zeros(2, 6), atol=1e-5, rtol=0)
    torch.testing.assert_close(post.var(-1, unbiased=False), torch.ones(2, 6), atol=1e-3, rtol=0)
    pre = Block(16, 2, 32, 0.0, "pre")(x, causal_mask(6))
    assert pre.mean(-1).abs().max() > 0.1  # the residual stream is not normalized


def test_final_layernorm_only_for_pre():
    assert isinstance(tiny_lm(norm="pre").ln_f, torch.nn.LayerNorm)
    post = tiny_lm(norm="post")
    assert not any(isinstance(m, torch.nn.LayerNorm) for m in [post.ln_f])
    assert sum(isinstance(m, torch.nn.LayerNorm) for m in post.modules()) == 4  # 2 per block


def test_bad_norm_raises():
    with pytest.raises(ValueError, match="norm"):
        Block(16, 2, 32, 0.0, "middle")


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
    x = model.tok_emb(ids) + model.pos_emb(torch.arange(2))
    block_in = []
    model.blocks[0].register_forward_hook(lambda m, args, out: block_in.append(args[0]))
    model(ids)
    torch.testing.assert_close(block_in[0], x)
    assert 0.8 < model.tok_emb.weight.std() < 1.2  # nn.Embedding's N(0, 1)


@pytest.mark.parametrize("norm", ["pre", "post"])
def test_kv_cache_gives_the_full_forward(norm):
    model = tiny_lm(norm=norm).eval()
    ids = torch.randint(3, 12, (3, 9))
    full = model(ids)
    cache = [{} for _ in model.blocks]
    steps = [model(ids[:, :4], kv_cache=cache)] + [model(ids[:, t:t + 1], kv_cache=cache)
                                                   for t in range(4, 9)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=1e-5)


# ----------------------------------------------------------------------------- training
@pytest.mark.parametrize("step, warmup, expected", [
    (1, 500, 1e-3 / 500), (250, 500, 5e-4), (499, 500, 1e-3 * 499 / 500), (500, 500, 1e-3),
    (501, 500, 1e-3), (4000, 500, 1e-3), (1, 0, 1e-3), (1500, 0, 1e-3)])
def test_lr_at_step(step, warmup, expected):
    assert tr.lr_at_step(step, 1e-3, warmup) == pytest.approx(expected, rel=1e-12)


def test_run_names():
    assert run_name("pre", 1e-3, 500, 1500) == "pre_lr0.001_w500_s1500"
    assert run_name("post", 3e-2, 0, 4000) == "post_lr0.03_w0_s4000"


def test_batches_are_shuffled_passes_without_repeats():
    seen = torch.cat([tr.batch_indices(s, 20, 4, seed=0) for s in range(1, 6)])
    assert sorted(seen.tolist()) == list(range(20))
    assert torch.equal(tr.batch_indices(6, 20, 4, 0), tr.batch_indices(6, 20, 4, 0))
    assert not torch.equal(tr.batch_indices(1, 20, 4, 0), tr.batch_indices(1, 20, 4, 1))


def test_train_step_logs_gradient_norms_before_clipping():
    model, twin = tiny_lm(), tiny_lm()
    for m in (model, twin):  # large logits, so the total gradient norm exceeds the clip
        m.head.weight.data.mul_(30)
    inputs = torch.randint(3, 12, (4, 11))
    targets = torch.randint(3, 12, (4, 11))
    targets[:, 8:] = IGNORE_INDEX
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)  # lr set by train_step
    loss, head_norm, total_norm = tr.train_step(model, optimizer, inputs, targets, lr=1.0)

    ref_loss = F.cross_entropy(twin(inputs).reshape(-1, 12), targets.reshape(-1),
                               ignore_index=-100)
    ref_loss.backward()
    grads = [p.grad for p in twin.parameters()]
    assert loss == pytest.approx(ref_loss.item(), rel=1e-6)
    assert head_norm == pytest.approx(twin.head.weight.grad.pow(2).sum().sqrt().item(), rel=1e-5)
    expected_total = math.sqrt(sum(g.pow(2).sum().item() for g in grads))
    assert total_norm == pytest.approx(expected_total, rel=1e-5)
    assert total_norm > CLIP_NORM  # so the step below used clipped gradients
    # SGD at lr 1: the update is the clipped gradient, of norm exactly CLIP_NORM.
    update = [(p0 - p1) for p0, p1 in zip(twin.parameters(), model.parameters())]
    assert math.sqrt(sum(u.pow(2).sum().item() for u in update)) == pytest.approx(1.0, rel=1e-4)
    assert optimizer.param_groups[0]["lr"] == 1.0


def train_args(data_dir, results, *extra):
    return ["--norm", "pre", "--lr", "1e-3", "--warmup", "3", "--batch_size", "16",
            "--data_dir", str(data_dir), "--results_dir", str(results), "--device", "cpu",
            *extra]


def read_log(results, run):
    return json.loads((results / f"training_log_{run}.json").read_text())


def test_resume_after_ctrl_c_gives_the_identical_log(data_dir, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(tr, "LOG_EVERY", 2)
    monkeypatch.setattr(tr, "VAL_EVERY", 4)
    assert tr.main(train_args(data_dir, tmp_path / "a", "--steps", "10")) == 0
    whole = read_log(tmp_path / "a", "pre_lr0.001_w3_s10")

    real_step, calls = tr.train_step, []

    def killed_at_step_7(*args, **kwargs):
        calls.append(1)
        if len(calls) == 7:
            raise KeyboardInterrupt
        return real_step(*args, **kwargs)

    monkeypatch.setattr(tr, "train_step", killed_at_step_7)
    capsys.readouterr()
    with pytest.raises(SystemExit) as stop:
        tr.main(train_args(data_dir, tmp_path / "b", "--steps", "10"))
    last = capsys.readouterr().err.strip().splitlines()[-1]  # after the progress bar
    assert stop.value.code == 130 and last.startswith("error: interrupted") and "resume" in last
    assert (tmp_path / "b" / "resume_pre_lr0.001_w3_s10.pth").exists()
    assert not (tmp_path / "b" / "training_log_pre_lr0.001_w3_s10.json").exists()
    monkeypatch.setattr(tr, "train_step", real_step)
    assert tr.main(train_args(data_dir, tmp_path / "b", "--steps", "10")) == 0
    assert read_log(tmp_path / "b", "pre_lr0.001_w3_s10") == whole
    assert [r["step"] for r in whole["log"]] == [2, 4, 6, 8, 10]
    assert [r["step"] for r in whole["val"]] == [4, 8, 10]
    assert not (tmp_path / "b" / "resume_pre_lr0.001_w3_s10.pth").exists()
    a = (tmp_path / "a" / "model_pre_lr0.001_w3_s10.pth")
    b = (tmp_path / "b" / "model_pre_lr0.001_w3_s10.pth")
    assert a.read_bytes() == b.read_bytes()  # identical weights, identical bytes


def test_diverged_run_logs_null_and_finishes(data_dir, tmp_path, monkeypatch):
    monkeypatch.setattr(tr, "LOG_EVERY", 2)
    monkeypatch.setattr(tr, "VAL_EVERY", 2)
    real_step = tr.train_step

    def blow_up(model, optimizer, inputs, targets, lr):
        with torch.no_grad():
            model.head.weight.fill_(float("nan"))
        return real_step(model, optimizer, inputs, targets, lr)

    monkeypatch.setattr(tr, "train_step", blow_up)
    assert tr.main(train_args(data_dir, tmp_path, "--steps", "4")) == 0
    log = read_log(tmp_path, "pre_lr0.001_w3_s4")
    assert log["final_val_loss"] is None
    assert all(r["train_loss"] is None and r["head_grad_norm"] is None for r in log["log"])
    text = (tmp_path / "training_log_pre_lr0.001_w3_s4.json").read_text()
    assert "NaN" not in text and json.loads(text)["final_val_loss"] is None
    assert ev.sweep_entry(json.loads(text))["trains"] is False


def test_train_without_data_says_what_to_run(tmp_path, capsys):
    with pytest.raises(SystemExit):
        tr.main(train_args(tmp_path, tmp_path / "r", "--steps", "2"))
    assert "generate_datasets.py" in capsys.readouterr().err


# ----------------------------------------------------------------------------- sampling
class ScriptedLM(torch.nn.Module):
    """Emits the ids of `script` in order (then EOS), whatever the temperature."""

    def __init__(self, script, vocab_size):
        super().__init__()
        self.script, self.vocab_size = script, vocab_size
        self.blocks = [None]

    def forward(self, input_ids, kv_cache=None):
        position = kv_cache[0].setdefault("t", 0)
        kv_cache[0]["t"] += input_ids.shape[1]
        next_id = self.script[position] if position < len(self.script) else EOS
        logits = torch.full((input_ids.shape[0], input_ids.shape[1], self.vocab_size), -1e9)
        logits[:, -1, next_id] = 0.0
        return logits


def test_generate_stops_at_eos_and_caps_the_length(vocab):
    C, O = vocab.stoi["C"], vocab.stoi["O"]
    model = ScriptedLM([C, C, O, EOS, C, C], len(vocab))
    assert generate(model, vocab, 3, batch_size=2) == ["CCO"] * 3
    endless = ScriptedLM([C] * 100, len(vocab))
    assert generate(endless, vocab, 1, max_len=8) == ["C" * 6]  # max_len counts BOS and EOS


def test_generate_is_seeded_and_lower_temperature_lowers_diversity(vocab):
    model = tiny_lm(len(vocab))
    with torch.no_grad():
        model.head.weight.mul_(20)  # a peaked distribution, so temperature matters

    def draw(t, seed=0):
        return generate(model, vocab, 200, temperature=t, max_len=12,
                        generator=torch.Generator().manual_seed(seed))

    assert draw(1.0) == draw(1.0) and draw(1.0) != draw(1.0, seed=1)
    assert len(set(draw(0.2))) < len(set(draw(1.0))) < len(set(draw(3.0)))
    with pytest.raises(ValueError, match="temperature"):
        generate(model, vocab, 1, temperature=0.0)


# ------------------------------------------------------------------------ well-formedness
WELL_FORMED = [
    "C", "CCO", "c1ccccc1", "C1CC1", "CC(C)C", "CC(=O)O", "C(C(C))C", "N#N",
    "c1cc[nH]c1", "C1CC2CC1CC2",  # two interleaved rings
    "C1CC1C1CC1",  # a ring digit reused after it closed
    "C1CCC2CCCCC2C1", "CC(Cl)(Br)F", "O=C1CCCN1", "C%10CC%10",
    "C1CC=1", "c1ccccc1c1ccccc1",
    "c1cccc1",  # well-formed, though not a valid molecule
    "C(C)(C)(C)(C)C",  # five bonds on carbon: the syntax is fine, the valence is not
    "1CC1",  # a ring digit before any atom: the four rules do not forbid it
    "()", "C()C", "[nH]", "[Se]",
    "CC(C(C(C)C)C)C",
]
ILL_FORMED = [
    "", "C1CC", "C1CC2CC1", "CC(C", "CC)C", "C)(C", "CC(C))", "C(", ")",
    "C[nH", "CnH]c", "c1ccccc1(", "C1CC1C1",  # reused digit opened again, never closed
    "C!C", "CC O", "C((C)",
]


@pytest.mark.parametrize("smiles", WELL_FORMED)
def test_well_formed(smiles):
    assert ev.is_well_formed(smiles)


@pytest.mark.parametrize("smiles", ILL_FORMED)
def test_ill_formed(smiles):
    assert not ev.is_well_formed(smiles)


def test_every_valid_training_string_is_well_formed():
    strings = TRAIN_FIXTURE.read_text().split()
    assert all(ev.canonical(s) is not None for s in strings)
    assert all(map(ev.is_well_formed, strings))


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="CcNnO()=#123[]H%0", max_size=20))
def test_well_formed_never_raises_and_valid_implies_well_formed(smiles):
    result = ev.is_well_formed(smiles)
    assert isinstance(result, bool)
    if ev.canonical(smiles) is not None:
        assert result


@pytest.mark.parametrize("smiles, span", [
    ("C1CC1", 3), ("c1ccccc1", 6), ("CCO", 0), ("C1CC", 0), ("", 0),
    ("C1CC2CC1CC2", 6), ("C1CC1C1CCCC1", 5), ("c1ccc(C)cc1", 9),
    ("CC(NC(=O)CSc1n[nH]c(N)n1)c1ccccc1Cl", 8),
])
def test_max_open_ring_span(smiles, span):
    assert ev.max_open_ring_span(smiles) == span


# ------------------------------------------------------------------------------ metrics
def test_validity_uniqueness_novelty_by_hand():
    samples = ["CCO", "OCC", "C1CC", "", "c1ccccc1", "CC(", "CCN", "c1cccc1"]
    train = {ev.canonical("CCN")}
    m = ev.sample_metrics(samples, train)
    assert m["validity"] == 4 / 8  # CCO, OCC, benzene, CCN
    assert m["well_formed"] == 5 / 8  # those four and the invalid c1cccc1
    assert m["uniqueness"] == 3 / 4  # OCC is CCO
    assert m["novelty"] == 2 / 3  # CCN is in the training set
    assert [ev.outcome(s) for s in ["OCC", "c1cccc1", "CC("]] == [
        "valid", "well_formed_invalid", "ill_formed"]
    assert ev.sample_metrics(["CC(", "C1"], train)["uniqueness"] is None


@pytest.mark.parametrize("smiles, category", [
    ("c1cccc1", "kekulization"), ("C(C)(C)(C)(C)C", "valence"),
    ("Cc", "aromatic atom outside a ring"), ("C1CC", "parse")])
def test_invalid_reasons(smiles, category):
    assert ev.reason_category(ev.invalid_reason(smiles)) == category


def test_breakdown_bins_and_fractions():
    samples = ["C1CC1", "c1ccccc1", "c1cccc1", "CC("]
    rows = ev.breakdown(samples, ev.max_open_ring_span, [(0, 0), (1, 5), (6, None)])
    assert [r["bin"] for r in rows] == ["0", "1-5", "6+"]
    assert [r["count"] for r in rows] == [1, 2, 1]
    assert rows[1]["valid"] == 0.5 and rows[1]["well_formed_invalid"] == 0.5
    assert rows[0]["ill_formed"] == 1.0


def test_unigram_entropy_by_hand(tmp_path):
    (tmp_path / "smiles").mkdir()
    (tmp_path / "smiles" / "train.txt").write_text("CO\n")
    (tmp_path / "smiles" / "val.txt").write_text("CO\nCC\n")
    # targets: C O EOS, C C EOS -> frequencies C 3/6, O 1/6, EOS 2/6; PAD never counted
    expected = -(0.5 * math.log(0.5) + math.log(1 / 6) / 6 + math.log(1 / 3) / 3)
    assert ev.unigram_entropy(tmp_path) == pytest.approx(expected, rel=1e-12)


def test_sweep_entry_early_gradient_statistics():
    log = {"run": "post_lr0.03_w0_s1500",
           "config": {"norm": "post", "lr": 0.03, "warmup": 0},
           "log": [{"step": 50, "head_grad_norm": 2.0}, {"step": 100, "head_grad_norm": 4.0},
                   {"step": 150, "head_grad_norm": 100.0}],
           "final_val_loss": 2.5}
    entry = ev.sweep_entry(log)
    assert entry["head_grad_norm_mean_100"] == 3.0 and entry["head_grad_norm_max_100"] == 4.0
    assert entry["trains"] is False
    assert ev.sweep_entry({**log, "final_val_loss": 1.99})["trains"] is True


# --------------------------------------------------------------------------- end to end
def test_train_sample_evaluate_visualize_end_to_end(data_dir, tmp_path, capsys):
    import problem3.sample as sample

    results = tmp_path / "results"
    run = "pre_lr0.001_w3_s6"
    tr.main(train_args(data_dir, results, "--steps", "6", "--checkpoint_every", "3"))
    for lr in ("1e-3", "3e-2"):  # two 'sweep' runs of 4 steps
        tr.main(["--norm", "post", "--lr", lr, "--batch_size", "16", "--steps", "4",
                 "--data_dir", str(data_dir), "--results_dir", str(results)])
    capsys.readouterr()
    assert {p.name for p in results.glob("model_*.pth")} == {
        f"model_{run}.pth", f"model_{run}_step3.pth", "model_post_lr0.001_w0_s4.pth",
        "model_post_lr0.03_w0_s4.pth"}
    assert sample.main(["--run", run, "--num_samples", "50", "--results_dir", str(results),
                        "--data_dir", str(data_dir)]) == 0
    samples = (results / f"samples_{run}.txt").read_text().split("\n")[:-1]
    assert len(samples) == 50

    assert ev.main(["--run", run, "--num_samples", "50", "--sweep_steps", "4",
                    "--results_dir", str(results), "--data_dir", str(data_dir)]) == 0
    metrics = json.loads((results / "metrics.json").read_text())
    assert [e["run"] for e in metrics["sweep"]] == ["post_lr0.001_w0_s4", "post_lr0.03_w0_s4"]
    main = metrics["main"]
    assert [r["step"] for r in main["by_step"]] == [3, 6]
    assert [r["temperature"] for r in main["by_temperature"]] == [0.7, 1.0, 1.3]
    assert main["by_step"][-1] == {"step": 6, **{k: v for k, v in
                                   main["by_temperature"][1].items() if k != "temperature"}}
    assert main["by_step"][-1]["validity"] == ev.sample_metrics(samples, set())["validity"]
    assert sum(r["count"] for r in main["by_length"]) == 50
    json.loads((results / "metrics.json").read_text())

    figures = tmp_path / "figures"
    assert visualize_main(["problem3", "--input_dir", str(results), "--out_dir",
                           str(figures)]) == 0
    assert len(list(figures.glob("*.png"))) >= 5


def test_evaluate_without_the_main_model_keeps_the_committed_main_entry(data_dir, tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    committed = {"run": ev.MAIN_RUN, "by_step": [{"step": 4000, "validity": 0.9}]}
    (results / "metrics.json").write_text(json.dumps({"sweep": [], "main": committed}))
    assert ev.main(["--results_dir", str(results), "--data_dir", str(data_dir)]) == 0
    metrics = json.loads((results / "metrics.json").read_text())
    assert metrics["sweep"] == [] and metrics["main"] == committed
    assert ev.main(["--run", "post_lr0.01_w0_s4000", "--results_dir", str(results),
                    "--data_dir", str(data_dir)]) == 0
    other = json.loads((results / "metrics.json").read_text())
    assert "main" not in other  # a different run's numbers are never carried over
