"""Problem 2, Part A: OffsetDataset on a tiny data folder."""

import numpy as np
import pytest
import torch

from problem2.dataset import IGNORE_INDEX
from tests.seam import submission
from tests.tiny import expect_raises

pytestmark = pytest.mark.p2a

OffsetDataset = submission("problem2.dataset").OffsetDataset


@pytest.fixture
def problem2_tiny_data(tmp_path):
    """data/offset/{train,test}.npy in the real format: [6, 64] and [4, 128] int64 in [0, 16)."""
    rng = np.random.default_rng(0)
    (tmp_path / "offset").mkdir()
    np.save(tmp_path / "offset" / "train.npy", rng.integers(0, 16, size=(6, 64)))
    np.save(tmp_path / "offset" / "test.npy", rng.integers(0, 16, size=(4, 128)))
    return tmp_path


@pytest.mark.parametrize("split, shape", [("train", (6, 64)), ("test", (4, 128))])
def test_offset_dataset_targets(problem2_tiny_data, split, shape):
    raw = np.load(problem2_tiny_data / "offset" / f"{split}.npy")
    dataset = OffsetDataset(problem2_tiny_data, split, k=7)
    assert len(dataset) == shape[0], "OffsetDataset must hold one item per row of the file"
    tokens, targets = dataset[1]
    assert tokens.dtype == torch.long and targets.dtype == torch.long, (
        "tokens and targets must be torch.long")
    assert tokens.shape == targets.shape == (shape[1],), (
        "an item must be one row: tokens and targets of the row's length")
    assert tokens.tolist() == raw[1].tolist(), "tokens must be the file's row, unchanged"
    row, got = raw[1].tolist(), targets.tolist()
    readings = {  # what the usual mistakes make of the row
        "the target looks k ahead (the token at t + k) instead of k back":
            row[7:] + [IGNORE_INDEX] * 7,
        "the target is the token k - 1 back (off by one)": [IGNORE_INDEX] * 6 + row[:-6],
        "the target is the token k - 1 back (off by one; the first k ignored)":
            [IGNORE_INDEX] * 7 + row[1:-6],
        "the target is the token k + 1 back (off by one)": [IGNORE_INDEX] * 8 + row[:-8]}
    if got[7:] == row[:-7] and len(set(got[:7])) == 1 and got[0] != IGNORE_INDEX:
        readings[f"the first k positions hold {got[0]} instead of IGNORE_INDEX "
                 f"({IGNORE_INDEX})"] = got
    same = [why for why, values in readings.items() if got == values]
    assert got == [IGNORE_INDEX] * 7 + row[:-7], (
        "the target at position t must be the token at t - k, and IGNORE_INDEX at the first "
        "k positions (no token k back): "
        + (same[0] if same else "it is none of: " + "; ".join(readings)))


def test_offset_dataset_other_k(problem2_tiny_data):
    tokens, targets = OffsetDataset(problem2_tiny_data, "train", k=3)[0]
    message = ("OffsetDataset(..., k=3) must give targets[i] = tokens[i - 3] and IGNORE_INDEX "
               "for i < 3: is k ignored (7 hard-coded)?")
    assert (targets[:3] == IGNORE_INDEX).all(), message
    assert targets[3:].tolist() == tokens[:-3].tolist(), message


def test_offset_dataset_k_zero_targets_every_token(problem2_tiny_data):
    """k = 0 is allowed by the docstring: targets[:, i] = tokens[:, i] for every i >= 0."""
    try:
        tokens, targets = OffsetDataset(problem2_tiny_data, "train", k=0)[0]
    except (RuntimeError, IndexError, ValueError) as error:
        pytest.fail(f"OffsetDataset(..., k=0) must work (every token is its own target), but "
                    f"it raised {type(error).__name__} ({str(error)[:120]}): tokens[:, :-k] is "
                    "empty when k = 0; slice with tokens[:, :T - k] instead", pytrace=False)
    assert targets.tolist() == tokens.tolist(), (
        "OffsetDataset(..., k=0) must give targets equal to the tokens (no position without a "
        f"target), not {targets.tolist()[:8]}...: tokens[:, :-k] is empty when k = 0; slice "
        "with tokens[:, :T - k] instead")


def test_offset_dataset_bad_split_and_missing_file(problem2_tiny_data, tmp_path_factory):
    expect_raises(ValueError, OffsetDataset, problem2_tiny_data, "val",
                  what="OffsetDataset with split 'val' (only 'train' and 'test' exist)")
    expect_raises(FileNotFoundError, OffsetDataset, tmp_path_factory.mktemp("empty"), "train",
                  what="OffsetDataset of a folder without offset/train.npy")
