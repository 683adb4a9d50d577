"""Hidden tests, Problem 1 Part A: AdditionDataset from other angles. Every expected value is
written out from the pair with Python's string formatting, never by the reference."""

import pytest
import torch

from problem1.dataset import BOS, PLUS
from tests.seam import submission

pytestmark = pytest.mark.p1a

AdditionDataset = submission("problem1.dataset").AdditionDataset
DataLoader = submission("torch.utils.data").DataLoader  # made next to the dataset

PAIRS = [(500, 500), (5, 5), (999, 0), (0, 1), (123, 877), (46, 54), (909, 91), (999, 999)]
SPLITS = {"train": PAIRS, "val": PAIRS[::-1], "test": PAIRS[2:5]}


def digits(n: int, width: int) -> list[int]:
    return [int(c) for c in f"{n:0{width}d}"]


@pytest.fixture
def data_dir(tmp_path):
    folder = tmp_path / "addition"
    folder.mkdir()
    for split, pairs in SPLITS.items():
        (folder / f"{split}.csv").write_text("a,b\n" + "".join(f"{a},{b}\n" for a, b in pairs))
    return tmp_path


@pytest.mark.parametrize("order", ["forward", "reversed"])
def test_every_item_by_hand(data_dir, order):
    ds = AdditionDataset(data_dir, "train", order)
    assert len(ds) == len(PAIRS)
    for i, (a, b) in enumerate(PAIRS):
        total = digits(a + b, 4)
        if order == "reversed":
            total = total[::-1]
        src, tgt_in, tgt_out = ds[i]
        assert all(t.dtype == torch.long for t in (src, tgt_in, tgt_out))
        assert src.tolist() == digits(a, 3) + [PLUS] + digits(b, 3)
        assert tgt_out.tolist() == total
        assert tgt_in.tolist() == [BOS] + total[:3]  # shifted right by one, BOS first


def test_each_split_reads_its_own_file_and_forward_is_the_default(data_dir):
    for split, pairs in SPLITS.items():
        ds = AdditionDataset(data_dir, split)
        assert len(ds) == len(pairs)
        assert ds.src.tolist() == [digits(a, 3) + [PLUS] + digits(b, 3) for a, b in pairs]
        assert ds.tgt_out.tolist() == [digits(a + b, 4) for a, b in pairs]


def test_attributes_hold_the_first_max_pairs_items_in_order(data_dir):
    ds = AdditionDataset(data_dir, "val", "reversed", max_pairs=4)
    assert len(ds) == 4
    assert ds.src.shape == (4, 7) and ds.tgt_in.shape == (4, 4) and ds.tgt_out.shape == (4, 4)
    assert ds.src.dtype == ds.tgt_in.dtype == ds.tgt_out.dtype == torch.long
    for i, (a, b) in enumerate(SPLITS["val"][:4]):
        src, tgt_in, tgt_out = ds[i]
        assert torch.equal(src, ds.src[i]) and torch.equal(tgt_in, ds.tgt_in[i])
        assert torch.equal(tgt_out, ds.tgt_out[i])
        assert tgt_out.tolist() == digits(a + b, 4)[::-1]
    one = AdditionDataset(data_dir, "train", "forward", max_pairs=1)
    assert len(one) == 1 and one[0][2].tolist() == [1, 0, 0, 0]  # 500 + 500


def test_a_data_loader_batches_the_items(data_dir):
    loader = DataLoader(AdditionDataset(data_dir, "train", "reversed"), batch_size=3)
    src, tgt_in, tgt_out = next(iter(loader))
    assert src.shape == (3, 7) and tgt_in.shape == (3, 4) and tgt_out.shape == (3, 4)
    assert tgt_out[:, 0].tolist() == [0, 0, 9]  # 1000, 0010, 0999 reversed


def test_bad_split_or_digit_order_raises_value_error(data_dir):
    # the valid names first: raising for every input is not rejecting the bad ones
    for split, order in [("train", "reversed"), ("val", "forward"), ("test", "reversed")]:
        pairs = SPLITS[split]
        ds = AdditionDataset(data_dir, split, order)
        expected = [digits(a + b, 4)[::-1 if order == "reversed" else 1] for a, b in pairs]
        assert ds.tgt_out.tolist() == expected, (
            f"AdditionDataset(data_dir, {split!r}, {order!r}).tgt_out must be the sums "
            f"{expected}, got {ds.tgt_out.tolist()} (is a valid split or digit_order rejected, "
            "or the file of another split read?)")
    for split, order in [("train", "Forward"), ("train", "backward"), ("train", ""),
                         ("Train", "forward"), ("validation", "reversed")]:
        with pytest.raises(ValueError):
            AdditionDataset(data_dir, split, order)


def test_missing_folder_raises_file_not_found(data_dir, tmp_path):
    (data_dir / "addition" / "test.csv").unlink()  # train and val are there, test is not
    ds = AdditionDataset(data_dir, "val", "forward")
    assert ds.src.tolist() == [digits(a, 3) + [PLUS] + digits(b, 3) for a, b in SPLITS["val"]], (
        "AdditionDataset(data_dir, 'val').src must hold val.csv's pairs when that file is "
        "there (is FileNotFoundError raised for a file that exists?)")
    with pytest.raises(FileNotFoundError):
        AdditionDataset(data_dir, "test", "forward")
    with pytest.raises(FileNotFoundError):
        AdditionDataset(tmp_path / "nowhere", "val", "forward")
