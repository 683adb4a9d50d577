"""generate_datasets.py, provided/smiles.py and the dataset figures.

The generation tests run the script's own code paths on the real seed (the draws are cheap)
or on small hand-made inputs in a temporary folder; nothing here touches the network. The
tests at the end check the generated data/ folder when it exists (after
`python generate_datasets.py`) and are skipped otherwise.
"""

import csv
import gzip
import random
import subprocess
import zipfile
from pathlib import Path

import numpy as np
import pytest

import generate_datasets as gd
from provided.common import DATA_DIR
from provided.plots.data import carries
from provided.smiles import BOS, EOS, PAD, SmilesVocab, tokenize
from provided.visualize import main as visualize_main

pytestmark = pytest.mark.kit

PAGE_MOLECULE = "CC(NC(=O)CSc1n[nH]c(N)n1)c1ccccc1Cl"
PAGE_TOKENS = ("C C ( N C ( = O ) C S c 1 n [nH] c ( N ) n 1 ) c 1 c c c c c 1 Cl").split()
VOCAB_22 = "# ( ) - 1 2 3 4 5 = Br C Cl F N O S [nH] c n o s".split()
FIXTURES = Path(__file__).resolve().parents[3] / "tests" / "fixtures"


def read_pairs(path: Path) -> list[tuple[int, int]]:
    with open(path) as f:
        reader = csv.reader(f)
        assert next(reader) == ["a", "b"]
        return [(int(a), int(b)) for a, b in reader]


# ---------------------------------------------------------------------------- addition
def test_addition_reproduces_the_page_examples(tmp_path):
    gd.write_addition(tmp_path)
    train = read_pairs(tmp_path / "addition" / "train.csv")
    assert train[:3] == [(391, 968), (12, 597), (73, 439)]


def test_addition_split_sizes_and_no_unordered_pair_shared(tmp_path):
    gd.write_addition(tmp_path)
    splits = {s: read_pairs(tmp_path / "addition" / f"{s}.csv") for s in ("train", "val", "test")}
    assert {s: len(p) for s, p in splits.items()} == {"train": 10_000, "val": 2_000, "test": 2_000}
    unordered = [frozenset({(min(a, b), max(a, b)) for a, b in p}) for p in splits.values()]
    assert sum(map(len, unordered)) == 14_000  # distinct within and across splits
    assert all(0 <= x <= 999 for p in splits.values() for pair in p for x in pair)


def test_addition_skips_a_pair_seen_in_the_other_order():
    # Replaying the raw draws: a pair is dropped exactly when its unordered form was seen.
    rng, seen, expected = random.Random(641), set(), []
    while len(expected) < 3000:
        a, b = rng.randint(0, 999), rng.randint(0, 999)
        if (min(a, b), max(a, b)) not in seen:
            seen.add((min(a, b), max(a, b)))
            expected.append((a, b))
    assert gd.addition_pairs(3000) == expected


@pytest.mark.parametrize("a, b, n", [(391, 968, 2), (12, 597, 1), (73, 439, 2), (999, 1, 3),
                                     (0, 0, 0), (500, 500, 1), (555, 445, 3)])
def test_carries(a, b, n):
    assert carries(a, b) == n


# ------------------------------------------------------------------------------ offset
def test_offset_reproduces_the_page_example_and_shapes(tmp_path):
    gd.write_offset(tmp_path)
    train = np.load(tmp_path / "offset" / "train.npy")
    test = np.load(tmp_path / "offset" / "test.npy")
    assert train.shape == (20_000, 64) and test.shape == (2_000, 128)
    page = [11, 15, 11, 11, 11, 14, 10, 14, 10, 12, 8, 9, 6, 3, 13, 13, 4, 11, 2, 10]
    assert train[0, :20].tolist() == page
    for array in (train, test):
        assert array.dtype == np.int64 and array.min() == 0 and array.max() == 15
    assert not np.array_equal(test[:, :64], train[:2000])  # test drawn after train


# ------------------------------------------------------------------------------ smiles
GOOD = ["CC(NC(=O)CSc1n[nH]c(N)n1)c1ccccc1Cl", "COc1ccc(CC(=O)Nc2ccc(Br)cc2)cc1",
        "Cc1ccc(S(=O)(=O)N2CCOCC2)cc1", "O=C(Nc1ccccc1F)c1cccs1", "CCn1cc(C(=O)O)c(=O)c2ccccc21",
        "N#CC1(c2ccccc2)CCCC1", "Cc1noc(C)c1C(=O)N1CCCC1"]
REJECTED = ["CC[C@H](N)C(=O)Oc1ccccc1",  # stereo bracket atom: not in the vocabulary
            "c1ccc2c(c1)CC1(CC2)CCC6CC6C1",  # ring digit 6
            "CCO",  # 3 tokens, fewer than 13
            "C" * 51,  # 51 tokens, more than 50
            "[H]OC(=O)c1ccccc1C(=O)OCC"]  # [H]


def moses_csv(tmp_path: Path, rows: list[str], gz: bool = True) -> Path:
    text = "SMILES\n" + "\n".join(rows) + "\n"
    path = tmp_path / ("moses.csv.gz" if gz else "moses.csv")
    path.write_bytes(gzip.compress(text.encode()) if gz else text.encode())
    return path


@pytest.mark.parametrize("smiles", GOOD)
def test_keep_smiles_accepts(smiles):
    assert gd.keep_smiles(smiles)


@pytest.mark.parametrize("smiles", REJECTED)
def test_keep_smiles_rejects(smiles):
    assert not gd.keep_smiles(smiles)


def test_keep_smiles_length_bounds():
    assert gd.keep_smiles("C" * 13) and gd.keep_smiles("C" * 50)
    assert not gd.keep_smiles("C" * 12) and not gd.keep_smiles("C" * 51)


def test_subsample_filters_deduplicates_and_is_seeded(tmp_path):
    rows = GOOD + REJECTED + GOOD[:2]  # duplicates too
    strings = gd.read_moses_csv(moses_csv(tmp_path, rows).read_bytes())
    out = gd.subsample_smiles(strings, {"train": 4, "val": 2})
    assert len(out["train"]) == 4 and len(out["val"]) == 2
    chosen = out["train"] + out["val"]
    assert len(set(chosen)) == 6 and set(chosen) <= set(GOOD)
    assert out == gd.subsample_smiles(strings, {"train": 4, "val": 2})
    assert out != gd.subsample_smiles(strings, {"train": 4, "val": 2}, seed=1)


def test_read_moses_csv_plain_and_gzip(tmp_path):
    for gz in (True, False):
        assert gd.read_moses_csv(moses_csv(tmp_path, GOOD, gz).read_bytes()) == GOOD


def test_read_moses_csv_errors(tmp_path):
    with pytest.raises(gd.DatasetError, match="SMILES column"):
        gd.read_moses_csv(b"smiles,x\nCCO,1\n")
    truncated = moses_csv(tmp_path, GOOD * 50).read_bytes()[:-40]
    with pytest.raises(gd.DatasetError, match="corrupt or truncated"):
        gd.read_moses_csv(truncated)


def test_main_with_local_csv_writes_splits_and_is_idempotent(tmp_path, monkeypatch, capsys):
    csv_path = moses_csv(tmp_path, GOOD + REJECTED)
    data = tmp_path / "data"
    args = ["--data_dir", str(data), "--only", "smiles", "--moses_csv", str(csv_path)]
    monkeypatch.setattr(gd, "write_smiles", _with_splits(gd.write_smiles, {"train": 5, "val": 2}))
    assert gd.main(args) == 0
    train = (data / "smiles" / "train.txt").read_text().split()
    val = (data / "smiles" / "val.txt").read_text().split()
    assert len(train) == 5 and len(val) == 2 and not set(train) & set(val)
    before = (data / "smiles" / "train.txt").stat().st_mtime_ns
    assert gd.main(args) == 0
    assert "exists, skipped" in capsys.readouterr().out
    assert (data / "smiles" / "train.txt").stat().st_mtime_ns == before


def _with_splits(write_smiles, splits):
    return lambda data_dir, moses_csv=None: write_smiles(data_dir, moses_csv, splits)


def test_too_few_strings_stops_cleanly_and_writes_nothing(tmp_path, capsys):
    data = tmp_path / "data"
    code = gd.main(["--data_dir", str(data), "--only", "smiles", "--moses_csv",
                    str(moses_csv(tmp_path, GOOD))])
    assert code == 1
    last = capsys.readouterr().err.strip().splitlines()[-1]  # after the progress bar
    assert last.startswith("error: only 7 SMILES pass the filter")
    assert not list(data.rglob("*.txt"))


def test_missing_local_csv_is_a_clear_error(tmp_path, capsys):
    code = gd.main(["--data_dir", str(tmp_path), "--only", "smiles", "--moses_csv",
                    str(tmp_path / "nope.csv")])
    assert code == 1 and "does not exist" in capsys.readouterr().err


def test_download_failure_is_one_clear_line(tmp_path, monkeypatch, capsys):
    def no_network(cmd, **kwargs):
        return subprocess.CompletedProcess(cmd, 1, "", "ERROR: Could not find a version")

    monkeypatch.setattr(gd.subprocess, "run", no_network)
    assert gd.main(["--data_dir", str(tmp_path), "--only", "smiles"]) == 1
    err = capsys.readouterr().err
    assert "could not download molsets==0.3.1" in err and "--moses_csv" in err
    assert err.count("\n") == 1
    assert not list(tmp_path.rglob("*.txt"))


def test_corrupt_wheel_is_deleted_with_a_clear_message(tmp_path, capsys):
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "molsets-0.3.1-py3-none-any.whl").write_bytes(b"not a zip")
    with pytest.raises(gd.DatasetError, match="corrupt"):
        gd.download_moses_csv(cache)
    assert not list(cache.iterdir())


def test_wheel_member_is_read(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    payload = gzip.compress(b"SMILES\nCCO\n")
    with zipfile.ZipFile(cache / "molsets-0.3.1-py3-none-any.whl", "w") as wheel:
        wheel.writestr(gd.MOSES_MEMBER, payload)
    assert gd.read_moses_csv(gd.download_moses_csv(cache)) == ["CCO"]


def test_wrong_row_count_of_download_is_refused(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(gd, "download_moses_csv", lambda cache: gzip.compress(b"SMILES\nCCO\n"))
    assert gd.main(["--data_dir", str(tmp_path), "--only", "smiles"]) == 1
    assert "expected 1584663" in capsys.readouterr().err


# --------------------------------------------------------------------------- tokenizer
def test_tokenize_page_example():
    tokens = tokenize(PAGE_MOLECULE)
    assert tokens == PAGE_TOKENS and len(tokens) == 31


@pytest.mark.parametrize("smiles, tokens", [
    ("Brc1ccccc1", ["Br", "c", "1", "c", "c", "c", "c", "c", "1"]),
    ("ClCCl", ["Cl", "C", "Cl"]),
    ("C#N", ["C", "#", "N"]),
    ("c1cc[nH]c1", ["c", "1", "c", "c", "[nH]", "c", "1"]),
    ("C%12CC%12", ["C", "%12", "C", "C", "%12"]),
    ("", []),
])
def test_tokenize_cases(smiles, tokens):
    assert tokenize(smiles) == tokens


@pytest.mark.parametrize("bad", ["C!C", "C[nH", "CCX", "c1ccccc1 C"])
def test_tokenize_rejects_untokenizable(bad):
    with pytest.raises(ValueError, match="cannot tokenize"):
        tokenize(bad)


def test_tokenize_round_trips_real_strings():
    for smiles in (FIXTURES / "smiles_train.txt").read_text().split():
        assert "".join(tokenize(smiles)) == smiles


def test_vocab_order_specials_and_round_trip(tmp_path):
    vocab = SmilesVocab(["c", "C", "[nH]", "Cl", "(", ")", "1", "C"])
    assert (PAD, BOS, EOS) == (0, 1, 2)
    assert vocab.itos[:3] == ["<pad>", "<bos>", "<eos>"]
    assert vocab.itos[3:] == sorted(["c", "C", "[nH]", "Cl", "(", ")", "1"])
    assert len(vocab) == 10
    ids = vocab.encode("Clc1cc[nH]c1")
    assert ids == [vocab.stoi[t] for t in ["Cl", "c", "1", "c", "c", "[nH]", "c", "1"]]
    assert vocab.decode([BOS] + ids + [EOS, vocab.stoi["C"], PAD]) == "Clc1cc[nH]c1"
    vocab.save(tmp_path / "vocab.json")
    assert SmilesVocab.load(tmp_path / "vocab.json") == vocab
    with pytest.raises(KeyError, match="'Br'"):
        vocab.encode("CBr")


# -------------------------------------------------------------------------- figures
def test_data_figures(tmp_path):
    data = tmp_path / "data"
    gd.write_addition(data)
    (data / "smiles").mkdir()
    (data / "smiles" / "train.txt").write_text("\n".join(GOOD * 3) + "\n")
    assert visualize_main(["data", "--input_dir", str(data), "--out_dir", str(tmp_path)]) == 0
    for name in ("carries.png", "train_molecules.png"):
        assert (tmp_path / name).read_bytes()[:4] == b"\x89PNG"


# ------------------------------------------------- the generated data folder, if present
needs_data = pytest.mark.skipif(not (DATA_DIR / "smiles" / "val.txt").exists(),
                                reason="run `python generate_datasets.py` first")


@needs_data
def test_generated_smiles_files():
    splits = {s: (DATA_DIR / "smiles" / f"{s}.txt").read_text().split() for s in ("train", "val")}
    assert len(splits["train"]) == 100_000 and len(splits["val"]) == 10_000
    assert len(set(splits["train"]) | set(splits["val"])) == 110_000
    lengths = [len(tokenize(s)) for s in splits["train"]]
    assert min(lengths) >= 13 and max(lengths) <= 50 and 34 < np.mean(lengths) < 36
    tokens = {t for s in splits["train"] for t in tokenize(s)}
    assert sorted(tokens) == sorted(VOCAB_22)


@needs_data
def test_generated_addition_and_offset_files_match_the_generator():
    assert read_pairs(DATA_DIR / "addition" / "train.csv")[:3] == [(391, 968), (12, 597),
                                                                   (73, 439)]
    arrays = gd.offset_arrays()
    for split, array in arrays.items():
        assert np.array_equal(np.load(DATA_DIR / "offset" / f"{split}.npy"), array)
