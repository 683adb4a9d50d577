"""Bad data files: a damaged addition CSV, offset array, MOSES CSV or SMILES file stops the
script in one line naming the file (and the line, for a text file) and what to run, before
any training, and nothing is written."""

import gzip

import numpy as np
import pytest
import torch

import generate_datasets as gd
import problem1.evaluate as p1_evaluate
import problem1.train as p1_train
import problem2.evaluate as p2_evaluate
import problem2.train as p2_train
import problem3.evaluate as p3_evaluate
import problem3.train as p3_train
from problem1.dataset import AdditionDataset
from problem3.dataset import SmilesDataset, build_vocab
from provided.data_files import check_offset_file, read_pairs, read_smiles

pytestmark = pytest.mark.kit


def nothing_written(results):
    return not results.exists() or not [p for p in results.rglob("*") if p.is_file()]


def replace_line(path, number: int, text: str) -> None:
    """Make line `number` (from 1) of a text file `text`."""
    lines = path.read_text().splitlines()
    lines[number - 1] = text
    path.write_text("\n".join(lines) + "\n")


# -------------------------------------------------------------------- addition CSVs
BAD_ROWS = [("12,abc", "two integers"), ("7", "two integers"), ("1,2,3", "two integers"),
            ("", "two integers"), ("1000,3", "0..999"), ("-1,5", "0..999")]


@pytest.mark.parametrize("row, reason", BAD_ROWS, ids=[r or "blank" for r, _ in BAD_ROWS])
def test_bad_csv_row_names_file_line_and_content(data, row, reason):
    path = data / "addition" / "train.csv"
    replace_line(path, 5, row)  # line 1 is the header
    with pytest.raises(ValueError) as raised:
        read_pairs(path)
    message = str(raised.value)
    assert f"{path}, line 5" in message and repr(row) in message and reason in message
    assert "generate_datasets.py" in message


@pytest.mark.parametrize("row", ["12,abc", "1000,3", "1,2,3"])
def test_bad_csv_row_stops_training_in_one_line(data, tmp_path, row, stops):
    path = data / "addition" / "train.csv"
    replace_line(path, 9, row)
    results = tmp_path / "results"
    stops(p1_train.main, ["--digit_order", "forward", "--train_size", "8", "--steps", "3",
                          "--data_dir", data, "--results_dir", results, "--device", "cpu"],
          "data file is wrong", f"{path}, line 9", repr(row))
    assert nothing_written(results)


def test_bad_test_csv_stops_evaluation_in_one_line(data, tmp_path, stops):
    path = data / "addition" / "test.csv"
    replace_line(path, 3, "5;6")
    stops(p1_evaluate.main, ["--data_dir", data, "--results_dir", tmp_path / "results",
                             "--device", "cpu"], f"{path}, line 3", "'5;6'")


def test_train_size_beyond_the_split_blames_the_flag(data, tmp_path, stops):
    stops(p1_train.main, ["--digit_order", "forward", "--train_size", "50", "--steps", "3",
                          "--data_dir", data, "--results_dir", tmp_path / "results",
                          "--device", "cpu"], "--train_size 50", "holds 40 pairs")


@pytest.mark.parametrize("kept", [lambda n: None, lambda n: n - 1],
                         ids=["ignores max_pairs", "keeps one too few"])
def test_a_dataset_that_ignores_max_pairs_is_caught(data, tmp_path, monkeypatch, stops, kept):
    class StudentDataset(AdditionDataset):
        def __init__(self, data_dir, split, digit_order="forward", max_pairs=None):
            super().__init__(data_dir, split, digit_order,
                             None if max_pairs is None else kept(max_pairs))

    monkeypatch.setattr(p1_train, "AdditionDataset", StudentDataset)
    results = tmp_path / "results"
    stops(p1_train.main, ["--digit_order", "forward", "--train_size", "8", "--steps", "3",
                          "--data_dir", data, "--results_dir", results, "--device", "cpu"],
          "max_pairs=8", "not 8")
    assert nothing_written(results)


@pytest.mark.parametrize("num_items, batch_size", [(0, 4), (-3, 4), (5, 0)])
def test_shuffled_batches_refuses_instead_of_looping(num_items, batch_size):
    with pytest.raises(ValueError, match="num_items"):
        next(p1_train.shuffled_batches(num_items, batch_size, torch.Generator().manual_seed(0)))


# ---------------------------------------------------------------------- offset arrays
def _truncated(path):
    raw = path.read_bytes()
    path.write_bytes(raw[: len(raw) // 2])


def _save(array):
    return lambda path: np.save(path, array)


rng = np.random.default_rng(1)
BAD_ARRAYS = {  # name: (split, damage, words of the message)
    "3-D": ("train", _save(rng.integers(0, 16, size=(40, 64, 1))), "shape (40, 64, 1)"),
    "1-D": ("train", _save(rng.integers(0, 16, size=64)), "shape (64,)"),
    "float": ("train", _save(rng.random((40, 64))), "float64"),
    "token 16": ("train", _save(np.full((40, 64), 16)), "outside [0, 16)"),
    "negative": ("train", _save(np.full((40, 64), -1)), "outside [0, 16)"),
    "short train": ("train", _save(rng.integers(0, 16, size=(40, 32))), "length 32, not 64"),
    "test of another length": ("test", _save(rng.integers(0, 16, size=(6, 100))),
                               "length 100, not 128"),
    "test as long as train": ("test", _save(rng.integers(0, 16, size=(6, 64))),
                              "length 64, not 128"),
    "truncated": ("train", _truncated, "truncated or corrupt"),
    "not an array": ("test", lambda path: path.write_text("hello\n"), "truncated or corrupt"),
    "empty file": ("test", lambda path: path.write_bytes(b""), "truncated or corrupt"),
}


@pytest.mark.parametrize("name", list(BAD_ARRAYS))
def test_bad_offset_array_is_named_by_the_check(data, name):
    split, damage, words = BAD_ARRAYS[name]
    path = data / "offset" / f"{split}.npy"
    damage(path)
    with pytest.raises(ValueError) as raised:
        check_offset_file(path, {"train": 64, "test": 128}[split], 16)
    message = str(raised.value)
    assert str(path) in message and words in message
    assert "generate_datasets.py --only offset --force" in message


@pytest.mark.parametrize("name", list(BAD_ARRAYS))
def test_bad_offset_array_stops_training_in_one_line(data, tmp_path, name, stops):
    split, damage, words = BAD_ARRAYS[name]
    path = data / "offset" / f"{split}.npy"
    damage(path)
    results = tmp_path / "results"
    stops(p2_train.main, ["--position", "rotary", "--steps", "2", "--data_dir", data,
                          "--results_dir", results, "--device", "cpu"], str(path), words)
    assert nothing_written(results)


@pytest.mark.parametrize("name", [n for n, (split, _, _) in BAD_ARRAYS.items() if split == "test"])
def test_bad_test_array_stops_evaluation_in_one_line(data, tmp_path, name, stops):
    _, damage, words = BAD_ARRAYS[name]
    path = data / "offset" / "test.npy"
    damage(path)
    results = tmp_path / "results"
    stops(p2_evaluate.main, ["--data_dir", data, "--results_dir", results, "--device", "cpu"],
          str(path), words)
    assert nothing_written(results)


# ----------------------------------------------------------------------- --moses_csv
@pytest.fixture
def small_moses(monkeypatch, data):
    """generate_datasets with MOSES shrunk to the 400 fixture strings (all kept by the filter)
    and splits of 100 + 20, so that a copy of it is checked exactly like the real split."""
    strings = (data / "smiles" / "train.txt").read_text().split()
    monkeypatch.setattr(gd, "MOSES_TRAIN_ROWS", len(strings))
    monkeypatch.setattr(gd, "MOSES_KEPT", len(strings))
    monkeypatch.setitem(gd.SMILES_SPLITS, "train", 100)
    monkeypatch.setitem(gd.SMILES_SPLITS, "val", 20)
    return strings


def moses_file(tmp_path, name, rows, header="SMILES", gz=True):
    text = "\n".join([header, *rows]) + "\n"
    path = tmp_path / name
    path.write_bytes(gzip.compress(text.encode()) if gz else text.encode())
    return path


def test_whole_moses_copy_is_accepted(small_moses, tmp_path, capsys):
    path = moses_file(tmp_path, "moses.csv.gz", small_moses)
    out = tmp_path / "out"
    assert gd.main(["--data_dir", str(out), "--only", "smiles", "--moses_csv", str(path)]) == 0
    assert len((out / "smiles" / "train.txt").read_text().split()) == 100


MOSES_FAULTS = {  # name: (make the file, words of the message)
    "60% copy": (lambda t, s: moses_file(t, "m.csv", s[:240], gz=False), "has 240 rows"),
    "60% copy gzipped": (lambda t, s: moses_file(t, "m.csv.gz", s[:240]), "has 240 rows"),
    "truncated gzip": (lambda t, s: _cut(moses_file(t, "m.csv.gz", s * 20)),
                       "corrupt or truncated"),
    "another header": (lambda t, s: moses_file(t, "m.csv", s, header="smiles,split", gz=False),
                       "no SMILES column"),
    "no header": (lambda t, s: moses_file(t, "m.csv", s[1:], header=s[0], gz=False),
                  "no SMILES column"),
    "empty": (lambda t, s: _empty(t / "m.csv"), "is empty"),
    "rows of another file": (lambda t, s: moses_file(t, "m.csv", ["CCO"] + s[1:], gz=False),
                             "399 rows"),
}


def _cut(path):
    raw = path.read_bytes()
    path.write_bytes(raw[: len(raw) * 6 // 10])
    return path


def _empty(path):
    path.write_bytes(b"")
    return path


@pytest.mark.parametrize("name", list(MOSES_FAULTS))
def test_bad_moses_csv_stops_in_one_line(small_moses, tmp_path, name, stops):
    make, words = MOSES_FAULTS[name]
    path = make(tmp_path, small_moses)
    out = tmp_path / "out"
    code, _ = stops(gd.main, ["--data_dir", out, "--only", "smiles", "--moses_csv", path],
                    f"--moses_csv {path}", words)
    assert code == 1 and not out.exists()


# ----------------------------------------------------------------------- SMILES files
def p3_args(data, results):
    return ["--norm", "pre", "--lr", "1e-3", "--warmup", "3", "--batch_size", "16",
            "--steps", "2", "--data_dir", data, "--results_dir", results, "--device", "cpu"]


SMILES_FAULTS = {  # name: (file, new content from the old lines, words of the message)
    "empty val.txt": ("val.txt", lambda lines: "", "holds no strings"),
    "empty train.txt": ("train.txt", lambda lines: "", "0 strings"),
    "train.txt shorter than a batch": ("train.txt", lambda lines: "\n".join(lines[:10]) + "\n",
                                       "10 strings, fewer than one batch of 16"),
    "untokenizable train line": ("train.txt", lambda lines: "\n".join(
        lines[:6] + ["CC!CC"] + lines[7:]) + "\n", "line 7: cannot tokenize"),
    "untokenizable val line": ("val.txt", lambda lines: "\n".join(
        lines[:2] + ["C C"] + lines[3:]) + "\n", "line 3"),
    "blank train line": ("train.txt", lambda lines: "\n".join(
        lines[:2] + [""] + lines[2:]) + "\n", "line 3: a blank line"),
    "blank val line": ("val.txt", lambda lines: "\n".join(
        lines[:40] + ["   "] + lines[40:]) + "\n", "line 41: a blank line"),
    "val token outside the vocabulary": ("val.txt", lambda lines: "\n".join(
        lines[:3] + ["CC[Se]CC"] + lines[4:]) + "\n", "line 4"),
    "train.txt not text": ("train.txt", lambda lines: b"\xff\xfe\x00CC", "not a text file"),
}


@pytest.mark.parametrize("name", list(SMILES_FAULTS))
def test_bad_smiles_file_stops_training_in_one_line(data, tmp_path, name, stops):
    file, rewrite, words = SMILES_FAULTS[name]
    path = data / "smiles" / file
    content = rewrite(path.read_text().splitlines())
    path.write_bytes(content) if isinstance(content, bytes) else path.write_text(content)
    results = tmp_path / "results"
    stops(p3_train.main, p3_args(data, results), str(path), words)
    assert nothing_written(results)


@pytest.mark.parametrize("bad, words", [("CC!CC", "line 7: cannot tokenize"),
                                         ("", "line 7: a blank line")],
                         ids=["untokenizable", "blank"])
def test_bad_train_line_stops_evaluation_in_one_line(data, tmp_path, bad, words, stops):
    path = data / "smiles" / "train.txt"
    replace_line(path, 7, bad)
    results = tmp_path / "results"
    stops(p3_evaluate.main, ["--data_dir", data, "--results_dir", results, "--device", "cpu"],
          str(path), words)
    assert nothing_written(results)


def test_line_numbers_are_the_file_lines(tmp_path):
    """Every string of a SMILES file is item (line - 1), so SmilesDataset's row + 1 is the
    line a message names; blank lines at the very end are not lines of data."""
    path = tmp_path / "smiles.txt"
    path.write_text("CCO\nc1ccccc1\n  CCN  \n\n\n")
    assert read_smiles(path) == ["CCO", "c1ccccc1", "CCN"]
    path.write_text("CCO\n\nc1ccccc1\n")
    with pytest.raises(ValueError, match=r"smiles.txt, line 2: a blank line"):
        read_smiles(path)


def test_dataset_messages_name_the_file_line(tmp_path):
    source = tmp_path / "train.txt"
    source.write_text("CCO\nc1ccccc1\n")
    vocab = build_vocab(source)
    path = tmp_path / "val.txt"
    path.write_text("CCO\nc1ccccc1\nCCO\nCBr\nCCO\n")  # Br is not in the vocabulary
    with pytest.raises(ValueError, match=r"val.txt, line 4: .*'Br'"):
        SmilesDataset(path, vocab)
