"""Problem 1, Part A: AdditionDataset in both digit orders, on a tiny data folder."""

import pytest
import torch

from problem1.dataset import BOS, PLUS
from tests.seam import submission
from tests.tiny import expect_raises

pytestmark = pytest.mark.p1a

AdditionDataset = submission("problem1.dataset").AdditionDataset


@pytest.fixture
def data_dir(tmp_path):
    folder = tmp_path / "addition"
    folder.mkdir()
    (folder / "train.csv").write_text("a,b\n391,968\n12,597\n73,439\n0,0\n999,999\n")
    (folder / "val.csv").write_text("a,b\n1,2\n")
    return tmp_path


def test_forward_items(data_dir):
    ds = AdditionDataset(data_dir, "train", "forward")
    assert len(ds) == 5, "AdditionDataset must hold one item per pair of the csv file"
    src, tgt_in, tgt_out = ds[0]
    assert (tgt_in.tolist(), tgt_out.tolist()) != ([1, 3, 5, 9], [BOS, 1, 3, 5]), (
        "AdditionDataset's item must be (src, tgt_in, tgt_out) in this order: it returned "
        "tgt_out second and tgt_in third ([1, 3, 5, 9], then [BOS, 1, 3, 5]): swap them in "
        "__getitem__")
    assert src.tolist() == [3, 9, 1, PLUS, 9, 6, 8], (
        "src must be a's three digits, PLUS, b's three digits, most significant first")
    assert tgt_out.tolist() == [1, 3, 5, 9], (
        "tgt_out must be the sum's four digits, carry digit first in forward order: is the "
        "carry digit dropped (sum mod 1000) or are the digits reversed?")
    got = tgt_in.tolist()
    readings = {  # what the usual mistakes make of it
        (BOS, 3, 5, 9): "it is BOS + tgt_out[1:], shifted the wrong way",
        (1, 3, 5, 9): "it is tgt_out itself, not shifted: the decoder input leaks the answer",
        (PLUS, 1, 3, 5): f"it starts with PLUS ({PLUS}), not BOS ({BOS})",
        (0, 1, 3, 5): f"it starts with 0, not BOS ({BOS})"}
    assert got == [BOS, 1, 3, 5], (
        f"tgt_in must be BOS ({BOS}) followed by tgt_out[:3] ([{BOS}, 1, 3, 5] here), not "
        f"{got}: " + readings.get(tuple(got), "its first token is the start token BOS, then "
                                  "the first three digits of tgt_out"))
    assert all(t.dtype == torch.long for t in ds[0]), "every item tensor must be torch.long"
    sums = [ds[i][2].tolist() for i in (1, 2, 3, 4)]
    assert sums == [[0, 6, 0, 9], [0, 5, 1, 2], [0, 0, 0, 0], [1, 9, 9, 8]], (
        "tgt_out must be the sum zero-padded to four digits, its carry digit kept: is the "
        "carry dropped or the padding missing?")
    assert ds[1][0].tolist() == [0, 1, 2, PLUS, 5, 9, 7], (  # operands zero-padded
        "src must zero-pad each operand to three digits")


def test_reversed_items_reverse_the_sum_only(data_dir):
    forward = AdditionDataset(data_dir, "train", "forward")
    ds = AdditionDataset(data_dir, "train", "reversed")
    src, tgt_in, tgt_out = ds[0]
    assert src.tolist() == [3, 9, 1, PLUS, 9, 6, 8], (  # operands never reversed
        "reversed order must reverse the sum only, src stays as in forward order: are the "
        "operands reversed too?")
    assert tgt_out.tolist() == [9, 5, 3, 1], (
        "reversed order must give tgt_out least significant digit first: is digit_order "
        "ignored, so the sum's digits are not reversed?")
    assert tgt_in.tolist() == [BOS, 9, 5, 3], (
        "tgt_in must be BOS followed by the reversed tgt_out shifted right by one: is tgt_in "
        "built from the unreversed sum, or not shifted?")
    assert ds[1][2].tolist() == [9, 0, 6, 0] and ds[2][2].tolist() == [2, 1, 5, 0], (
        "reversed order must reverse all four digits of every sum, padding zeros included")
    assert torch.equal(ds.src, forward.src), (
        "reversed order must leave the src tensor as in forward order: are the operands "
        "reversed too?")
    assert torch.equal(ds.tgt_out, forward.tgt_out.flip(1)), (
        "reversed order's tgt_out tensor must be forward order's with its digits flipped")


def test_pre_tokenized_tensors_and_max_pairs(data_dir):
    ds = AdditionDataset(data_dir, "train", "forward", max_pairs=3)
    assert len(ds) == 3, "max_pairs must keep exactly max_pairs pairs: is it off by one?"
    assert ds.src.shape == (3, 7) and ds.tgt_in.shape == (3, 4) and ds.tgt_out.shape == (3, 4), (
        "src, tgt_in and tgt_out must be pre-tokenized tensors [N, 7], [N, 4] and [N, 4], "
        "N = max_pairs")
    assert ds.tgt_out[:, 0].tolist() == [1, 0, 0], (  # the first three pairs, in file order
        "max_pairs must keep the first pairs of the file, in file order")
    assert torch.equal(ds.tgt_in[:, 1:], ds.tgt_out[:, :3]), (
        "tgt_in must be tgt_out shifted right by one behind BOS")
    try:
        every = AdditionDataset(data_dir, "train", "forward", max_pairs=5)
    except ValueError as error:
        pytest.fail(f"max_pairs=5 on a split of 5 pairs must keep all 5 (the first max_pairs "
                    f"pairs), but AdditionDataset raised ValueError ({error}): is the range "
                    "check max_pairs < N instead of max_pairs <= N?", pytrace=False)
    assert len(every) == 5, "max_pairs equal to the number of pairs must keep every pair"


def test_bad_arguments(data_dir):
    # The exception types are the promise (the docstring); the wording is yours.
    expect_raises(ValueError, AdditionDataset, data_dir, "train", "backwards",
                  what="AdditionDataset with digit_order 'backwards'")
    expect_raises(ValueError, AdditionDataset, data_dir, "training", "forward",
                  what="AdditionDataset with split 'training'")
    expect_raises(FileNotFoundError, AdditionDataset, data_dir, "test", "forward",
                  what="AdditionDataset of a split whose file is missing")
    for max_pairs in (0, 6):  # the fixture's train split holds 5 pairs
        expect_raises(ValueError, AdditionDataset, data_dir, "train", "forward",
                      max_pairs=max_pairs,
                      what=f"AdditionDataset with max_pairs={max_pairs} (the split holds 5 pairs)")
