"""Problem 2, Part A and the provided model: OffsetDataset, causality, the position schemes."""

import math

import numpy as np
import pytest
import torch

from problem2.dataset import IGNORE_INDEX, OffsetDataset
from problem2.model import POSITIONS, OffsetRetrievalModel
from problem2.positional import sinusoidal_table
from provided.common import DATA_DIR


@pytest.fixture
def problem2_tiny_data(tmp_path):
    """data/offset/{train,test}.npy in the real format: [6, 64] and [4, 128] int64 in [0, 16)."""
    rng = np.random.default_rng(0)
    (tmp_path / "offset").mkdir()
    np.save(tmp_path / "offset" / "train.npy", rng.integers(0, 16, size=(6, 64)))
    np.save(tmp_path / "offset" / "test.npy", rng.integers(0, 16, size=(4, 128)))
    return tmp_path


# --- OffsetDataset ------------------------------------------------------------------------


def test_ignore_index_value():
    assert IGNORE_INDEX == -100


@pytest.mark.parametrize("split, shape", [("train", (6, 64)), ("test", (4, 128))])
def test_offset_dataset_targets(problem2_tiny_data, split, shape):
    raw = np.load(problem2_tiny_data / "offset" / f"{split}.npy")
    dataset = OffsetDataset(problem2_tiny_data, split, k=7)
    assert len(dataset) == shape[0]
    tokens, targets = dataset[1]
    assert tokens.dtype == torch.long and targets.dtype == torch.long
    assert tokens.shape == targets.shape == (shape[1],)
    assert tokens.tolist() == raw[1].tolist()
    assert targets[:7].tolist() == [IGNORE_INDEX] * 7
    assert targets[7:].tolist() == raw[1, :-7].tolist()


def test_offset_dataset_other_k(problem2_tiny_data):
    tokens, targets = OffsetDataset(problem2_tiny_data, "train", k=3)[0]
    assert (targets[:3] == IGNORE_INDEX).all()
    assert targets[3:].tolist() == tokens[:-3].tolist()


def test_offset_dataset_bad_split_and_missing_file(problem2_tiny_data, tmp_path_factory):
    with pytest.raises(ValueError):
        OffsetDataset(problem2_tiny_data, "val")
    with pytest.raises(FileNotFoundError, match="generate_datasets"):
        OffsetDataset(tmp_path_factory.mktemp("empty"), "train")


@pytest.mark.skipif(not (DATA_DIR / "offset" / "train.npy").exists(), reason="no data")
def test_offset_dataset_homework_example():
    # HOMEWORK.txt's table: the first training sequence and its targets from position 7.
    tokens, targets = OffsetDataset(DATA_DIR, "train")[0]
    assert tokens[:20].tolist() == [11, 15, 11, 11, 11, 14, 10, 14, 10, 12, 8, 9, 6, 3, 13, 13,
                                    4, 11, 2, 10]
    assert targets[7:20].tolist() == [11, 15, 11, 11, 11, 14, 10, 14, 10, 12, 8, 9, 6]


# --- the model ----------------------------------------------------------------------------


def test_bad_scheme_raises():
    with pytest.raises(ValueError):
        OffsetRetrievalModel("alibi")


@pytest.mark.parametrize("position", POSITIONS)
def test_model_is_causal(position):
    torch.manual_seed(0)
    model = OffsetRetrievalModel(position).eval()
    tokens = torch.randint(0, 16, (2, 40))
    changed = tokens.clone()
    changed[:, 20] = (changed[:, 20] + 1) % 16
    with torch.no_grad():
        before, after = model(tokens), model(changed)
    assert before.shape == (2, 40, 16)
    torch.testing.assert_close(before[:, :20], after[:, :20], atol=1e-6, rtol=0)
    assert not torch.allclose(before[:, 20:], after[:, 20:])


@pytest.mark.parametrize("position", POSITIONS)
def test_attention_weights_are_causal_softmax_rows(position):
    torch.manual_seed(1)
    model = OffsetRetrievalModel(position).eval()
    with torch.no_grad():
        logits, weights = model(torch.randint(0, 16, (3, 128)), return_attention=True)
    assert logits.shape == (3, 128, 16) and weights.shape == (3, 128, 128)
    torch.testing.assert_close(weights.sum(-1), torch.ones(3, 128))
    assert (weights.triu(1) == 0).all()


def test_max_len_and_learned_table_rows():
    model = OffsetRetrievalModel("learned")
    assert model.pos_emb.weight.shape == (128, 64)
    with pytest.raises(ValueError):
        model(torch.zeros(1, 129, dtype=torch.long))


@pytest.mark.parametrize("position", POSITIONS)
def test_model_parameters(position):
    names = {name for name, _ in OffsetRetrievalModel(position).named_parameters()}
    expected = {f"{layer}.{p}" for layer in ("W_q", "W_k", "W_v", "W_o", "head")
                for p in ("weight", "bias")} | {"tok_emb.weight"}
    if position == "learned":
        expected |= {"pos_emb.weight"}
    assert names == expected


@pytest.mark.parametrize("position", ["none", "learned", "sinusoidal"])
def test_residual_stream_is_unscaled_embedding_plus_position(position):
    # With W_o zeroed the attention adds nothing: logits = head(tok_emb + position term).
    torch.manual_seed(2)
    model = OffsetRetrievalModel(position).eval()
    torch.nn.init.zeros_(model.W_o.weight)
    torch.nn.init.zeros_(model.W_o.bias)
    tokens = torch.randint(0, 16, (2, 100))
    x = model.tok_emb.weight[tokens]
    if position == "learned":
        x = x + model.pos_emb.weight[:100]
    if position == "sinusoidal":
        x = x + sinusoidal_table(100, 64)
    with torch.no_grad():
        torch.testing.assert_close(model(tokens), model.head(x), atol=1e-5, rtol=1e-5)


def test_rotary_model_scores_are_relative():
    # All tokens equal: under rotary, the score of query i on key j depends on i - j only,
    # so log w[i, i-a] - log w[i, i-b] is the same for every query i, far beyond 64 too.
    torch.manual_seed(3)
    model = OffsetRetrievalModel("rotary").eval()
    with torch.no_grad():
        _, weights = model(torch.full((1, 128), 5), return_attention=True)
    log_w = weights[0].log()
    rows = torch.arange(10, 128)
    gap = log_w[rows, rows - 7] - log_w[rows, rows - 2]
    torch.testing.assert_close(gap, gap[:1].expand_as(gap), atol=1e-4, rtol=0)
    # ... while the sinusoidal model's gap moves with the absolute position.
    torch.manual_seed(3)
    model = OffsetRetrievalModel("sinusoidal").eval()
    with torch.no_grad():
        _, weights = model(torch.full((1, 128), 5), return_attention=True)
    log_w = weights[0].log()
    gap = log_w[rows, rows - 7] - log_w[rows, rows - 2]
    assert (gap - gap[0]).abs().max() > 1e-2


def test_scores_are_scaled_by_sqrt_d():
    # none, with W_q = W_k = identity and zero biases: score(i, j) = x_i . x_j / 8.
    torch.manual_seed(4)
    model = OffsetRetrievalModel("none").eval()
    for layer in (model.W_q, model.W_k):
        torch.nn.init.eye_(layer.weight)
        torch.nn.init.zeros_(layer.bias)
    tokens = torch.tensor([[1, 2]])
    with torch.no_grad():
        _, weights = model(tokens, return_attention=True)
    current, previous = model.tok_emb.weight[2], model.tok_emb.weight[1]
    s_self = (current @ current).item() / math.sqrt(64)
    s_prev = (current @ previous).item() / math.sqrt(64)
    expected = math.exp(s_prev) / (math.exp(s_prev) + math.exp(s_self))
    assert weights[0, 1, 0].item() == pytest.approx(expected, rel=1e-4)
