"""Hidden tests, Problem 3 Part A: build_vocab on a small file, SmilesDataset rows of
different lengths written out by hand, the vocabulary it is given, and the line it names."""

import re
import shutil
from pathlib import Path

import pytest
import torch

from problem3.dataset import IGNORE_INDEX
from provided.smiles import BOS, EOS, PAD, SmilesVocab, tokenize
from tests.seam import remote_isinstance, submission

pytestmark = pytest.mark.p3a
I = IGNORE_INDEX

dataset = submission("problem3.dataset")
build_vocab = dataset.build_vocab
SmilesDataset = dataset.SmilesDataset
sandbox_vocab = submission("provided.smiles").SmilesVocab  # a vocabulary next to the code


def test_build_vocab_on_a_small_file(tmp_path):
    path = tmp_path / "train.txt"
    path.write_text("CCO\nc1ccccc1Cl\nC[nH]C\n")
    vocab = build_vocab(path)
    assert remote_isinstance(vocab, "provided.smiles.SmilesVocab")
    assert vocab.itos == ["<pad>", "<bos>", "<eos>", "1", "C", "Cl", "O", "[nH]", "c"]


def test_rows_of_different_lengths_by_hand(tmp_path):
    vocab = sandbox_vocab(["C", "O", "N", "c", "1"])
    stoi = SmilesVocab(["C", "O", "N", "c", "1"]).stoi  # the same ids, here
    C, N, O = stoi["C"], stoi["N"], stoi["O"]
    path = tmp_path / "s.txt"
    path.write_text("C\nCO\nNCCO\n")  # 1, 2 and 4 (= max_len - 2) tokens
    ds = SmilesDataset(path, vocab, max_len=6)
    assert len(ds) == 3
    all_inputs, all_targets = ds.inputs, ds.targets
    assert all_inputs.shape == all_targets.shape == (3, 5)
    assert all_inputs.dtype == all_targets.dtype == torch.long
    assert all_inputs.tolist() == [[BOS, C, EOS, PAD, PAD],
                                   [BOS, C, O, EOS, PAD],
                                   [BOS, N, C, C, O]]
    assert all_targets.tolist() == [[C, EOS, I, I, I],
                                    [C, O, EOS, I, I],
                                    [N, C, C, O, EOS]]
    inputs, targets = ds[1]
    assert inputs.tolist() == all_inputs[1].tolist()
    assert targets.tolist() == all_targets[1].tolist()


def test_default_max_len_is_52(tmp_path):
    path = tmp_path / "s.txt"
    path.write_text("CCO\n" + "C" * 50 + "\n")  # 50 tokens: the longest allowed
    vocab = sandbox_vocab(["C", "O"])
    ds = SmilesDataset(path, vocab)
    inputs, targets = ds.inputs, ds.targets
    assert inputs.shape == targets.shape == (2, 51)
    assert targets[1, -1] == EOS and (targets[1] != I).all()
    path.write_text("CCO\n" + "C" * 51 + "\n")
    with pytest.raises(ValueError):
        SmilesDataset(path, vocab)


@pytest.mark.parametrize("bad_line", ["CCCCCCC", "CCS", "C C"])
def test_the_bad_line_is_named_by_its_number(tmp_path, bad_line):
    vocab = sandbox_vocab(["C", "O", "N"])
    path = tmp_path / "lines.txt"
    path.write_text(f"CC\nCO\nNC\n{bad_line}\nCCC\n")  # line 4, counted from 1
    with pytest.raises(ValueError) as error:
        SmilesDataset(path, vocab, max_len=8)  # at most 6 tokens
    message = str(error.value).replace(str(path), "")
    assert re.search(r"\b4\b", message), str(error.value)


def test_pad_is_never_a_target_but_eos_always_is(tmp_path):
    fixtures = Path(__file__).resolve().parents[3] / "tests" / "fixtures"
    for name in ("smiles_train.txt", "smiles_val.txt"):  # where the code can read them
        shutil.copy(fixtures / name, tmp_path / name)
    fixture = tmp_path / "smiles_val.txt"
    vocab = build_vocab(tmp_path / "smiles_train.txt")
    ds = SmilesDataset(fixture, vocab, max_len=52)
    assert len(ds) == 100
    targets = ds.targets
    assert ((targets == EOS).sum(dim=1) == 1).all()  # one EOS per row
    assert not (targets == PAD).any()
    lengths = (targets != I).sum(dim=1)  # tokens + EOS
    assert lengths.tolist() == [len(tokenize(s)) + 1 for s in fixture.read_text().split()]
