"""Hidden tests, Problem 2 Part A: OffsetDataset with other offsets, the whole-split
attributes, the default k, and batching."""

import numpy as np
import pytest
import torch

from problem2.dataset import IGNORE_INDEX
from tests.seam import submission

pytestmark = pytest.mark.p2a

OffsetDataset = submission("problem2.dataset").OffsetDataset
DataLoader = submission("torch.utils.data").DataLoader  # next to the dataset it batches


@pytest.fixture
def data_dir(tmp_path):
    rng = np.random.default_rng(11)
    (tmp_path / "offset").mkdir()
    np.save(tmp_path / "offset" / "train.npy", rng.integers(0, 16, size=(5, 64)))
    np.save(tmp_path / "offset" / "test.npy", rng.integers(0, 16, size=(3, 128)))
    return tmp_path


def expected_targets(row: list[int], k: int) -> list[int]:
    return [row[i - k] if i >= k else IGNORE_INDEX for i in range(len(row))]


def test_targets_by_hand(data_dir):
    for split, k in [("train", 1), ("test", 7), ("test", 127), ("train", 20)]:
        raw = np.load(data_dir / "offset" / f"{split}.npy")
        dataset = OffsetDataset(data_dir, split, k=k)
        for n in range(len(raw)):
            tokens, targets = dataset[n]
            assert tokens.tolist() == raw[n].tolist()
            assert targets.tolist() == expected_targets(raw[n].tolist(), k), (split, k, n)


def test_whole_split_attributes_and_default_k(data_dir):
    raw = np.load(data_dir / "offset" / "test.npy")
    dataset = OffsetDataset(data_dir, "test")  # k = 7 by default
    assert dataset.tokens.shape == dataset.targets.shape == (3, 128)
    assert dataset.tokens.dtype == dataset.targets.dtype == torch.long
    assert dataset.tokens.tolist() == raw.tolist()
    assert dataset.targets.tolist() == [expected_targets(row, 7) for row in raw.tolist()]
    assert len(dataset) == 3


def test_a_data_loader_batches_the_items(data_dir):
    loader = DataLoader(OffsetDataset(data_dir, "train", k=7), batch_size=2)
    tokens, targets = next(iter(loader))
    assert tokens.shape == targets.shape == (2, 64)
    assert (targets[:, :7] == IGNORE_INDEX).all() and torch.equal(targets[:, 7:], tokens[:, :-7])


def test_other_splits_raise_value_error(data_dir):
    for split in ["train", "test"]:  # the two valid splits load: not every split raises
        raw = np.load(data_dir / "offset" / f"{split}.npy")
        dataset = OffsetDataset(data_dir, split, k=3)
        assert dataset.targets.tolist() == [expected_targets(row, 3) for row in raw.tolist()], (
            f"OffsetDataset(data_dir, {split!r}, k=3).targets must be the tokens three "
            "positions back (IGNORE_INDEX before): is a valid split rejected?")
    for split in ["val", "Train", "", "tests"]:
        with pytest.raises(ValueError):
            OffsetDataset(data_dir, split)


def test_missing_test_file_raises_file_not_found(tmp_path):
    (tmp_path / "offset").mkdir()
    train = np.arange(128, dtype=np.int64).reshape(2, 64) % 16
    np.save(tmp_path / "offset" / "train.npy", train)
    dataset = OffsetDataset(tmp_path, "train")
    assert len(dataset) == 2 and dataset.tokens.tolist() == train.tolist(), (
        "OffsetDataset(data_dir, 'train') must load train.npy when test.npy is missing: is "
        "FileNotFoundError raised for a file that exists?")
    with pytest.raises(FileNotFoundError):
        OffsetDataset(tmp_path, "test")
