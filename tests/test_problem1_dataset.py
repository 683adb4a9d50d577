"""Problem 1, Part A: AdditionDataset in both digit orders, on a tiny data folder."""

import pytest
import torch

from problem1.dataset import BOS, PLUS, AdditionDataset

pytestmark = pytest.mark.p1a


@pytest.fixture
def data_dir(tmp_path):
    folder = tmp_path / "addition"
    folder.mkdir()
    (folder / "train.csv").write_text("a,b\n391,968\n12,597\n73,439\n0,0\n999,999\n")
    (folder / "val.csv").write_text("a,b\n1,2\n")
    return tmp_path


def test_forward_items(data_dir):
    ds = AdditionDataset(data_dir, "train", "forward")
    assert len(ds) == 5
    src, tgt_in, tgt_out = ds[0]
    assert src.tolist() == [3, 9, 1, PLUS, 9, 6, 8]
    assert tgt_out.tolist() == [1, 3, 5, 9]
    assert tgt_in.tolist() == [BOS, 1, 3, 5]
    assert all(t.dtype == torch.long for t in ds[0])
    assert [ds[i][2].tolist() for i in (1, 2, 3, 4)] == [
        [0, 6, 0, 9], [0, 5, 1, 2], [0, 0, 0, 0], [1, 9, 9, 8]]
    assert ds[1][0].tolist() == [0, 1, 2, PLUS, 5, 9, 7]  # operands zero-padded


def test_reversed_items_reverse_the_sum_only(data_dir):
    forward = AdditionDataset(data_dir, "train", "forward")
    ds = AdditionDataset(data_dir, "train", "reversed")
    src, tgt_in, tgt_out = ds[0]
    assert src.tolist() == [3, 9, 1, PLUS, 9, 6, 8]  # operands never reversed
    assert tgt_out.tolist() == [9, 5, 3, 1]
    assert tgt_in.tolist() == [BOS, 9, 5, 3]
    assert ds[1][2].tolist() == [9, 0, 6, 0] and ds[2][2].tolist() == [2, 1, 5, 0]
    assert torch.equal(ds.src, forward.src)
    assert torch.equal(ds.tgt_out, forward.tgt_out.flip(1))


def test_pre_tokenized_tensors_and_max_pairs(data_dir):
    ds = AdditionDataset(data_dir, "train", "forward", max_pairs=3)
    assert len(ds) == 3
    assert ds.src.shape == (3, 7) and ds.tgt_in.shape == (3, 4) and ds.tgt_out.shape == (3, 4)
    assert ds.tgt_out[:, 0].tolist() == [1, 0, 0]  # the first three pairs, in file order
    assert torch.equal(ds.tgt_in[:, 1:], ds.tgt_out[:, :3])


def test_bad_arguments(data_dir):
    # The exception types are the promise (the docstring); the wording is yours.
    with pytest.raises(ValueError):
        AdditionDataset(data_dir, "train", "backwards")
    with pytest.raises(ValueError):
        AdditionDataset(data_dir, "training", "forward")
    with pytest.raises(FileNotFoundError):
        AdditionDataset(data_dir, "test", "forward")
