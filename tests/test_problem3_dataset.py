"""Problem 3, Part A: build_vocab and SmilesDataset, on the 400 fixture strings and on small
hand-written files."""

import re
import shutil
from pathlib import Path

import pytest
import torch

from problem3.dataset import IGNORE_INDEX
from provided.smiles import BOS, EOS, PAD, tokenize
from tests.seam import submission

pytestmark = pytest.mark.p3a

dataset = submission("problem3.dataset")
build_vocab = dataset.build_vocab
SmilesDataset = dataset.SmilesDataset

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def train_fixture(tmp_path) -> Path:
    """The 400 fixture strings, copied where the code under test can read them."""
    return Path(shutil.copy(FIXTURES / "smiles_train.txt", tmp_path / "smiles_train.txt"))


def names_line(message: str, path: Path, line: int) -> bool:
    """The message names the line number as a whole number (outside the file's path)."""
    return re.search(rf"\b{line}\b", message.replace(str(path), "")) is not None


def test_build_vocab_has_the_22_tokens_and_specials(train_fixture):
    vocab = build_vocab(train_fixture)
    chemistry_tokens = vocab.chemistry_tokens
    every = {t for line in train_fixture.read_text().split() for t in tokenize(line)}
    pieces = sorted(set(chemistry_tokens) - every)  # neither a token of the file nor absent
    why = (f"it holds pieces of tokens, {pieces}: are characters collected instead of "
           "tokenize's tokens (Cl, Br and [nH] are one token each)?" if pieces else
           f"it holds {len(chemistry_tokens)} of the file's {len(every)} tokens, all whole but "
           f"without {sorted(every - set(chemistry_tokens))}: are only some of the lines read?")
    assert {"Cl", "Br", "[nH]", "c"} <= set(chemistry_tokens), (
        f"build_vocab must collect every token tokenize gives over the training file: {why}")
    assert len(vocab) == 25 and vocab.itos[:3] == ["<pad>", "<bos>", "<eos>"], (
        "build_vocab must hold the three specials, then every token of every line of the "
        f"training file (22 here, not {len(vocab) - 3}): are only some of the lines read?")
    assert chemistry_tokens == sorted(chemistry_tokens), (
        "build_vocab must sort the chemistry tokens")


def test_dataset_item_layout(tmp_path, train_fixture):
    vocab = build_vocab(train_fixture)
    stoi = vocab.stoi
    path = tmp_path / "s.txt"
    path.write_text("CCO\n")
    inputs, targets = SmilesDataset(path, vocab, max_len=8)[0]
    C, O = stoi["C"], stoi["O"]
    assert inputs.dtype == targets.dtype == torch.long and inputs.shape == targets.shape == (7,), (
        "an item must be two torch.long tensors of max_len - 1 positions")
    assert inputs.tolist() == [BOS, C, C, O, EOS, PAD, PAD], (
        "inputs must be BOS, the string's tokens, EOS, then PAD, without the last position "
        f"({[BOS, C, C, O, EOS, PAD, PAD]} here), not {inputs.tolist()}"
        + (": IGNORE_INDEX was written into the inputs too: are inputs and targets views of "
           "one tensor (clone them before setting IGNORE_INDEX)?" if IGNORE_INDEX in
           inputs.tolist() else ""))
    expected = [C, C, O, EOS, IGNORE_INDEX, IGNORE_INDEX, IGNORE_INDEX]
    readings = {  # what the usual mistakes give
        (BOS, C, C, O, EOS, IGNORE_INDEX, IGNORE_INDEX): "they are the inputs, not shifted",
        (C, C, O, EOS, PAD, PAD, PAD): "the padding is left a target (PAD, not IGNORE_INDEX)",
        (BOS, C, C, O, EOS, PAD, PAD): "they are the inputs, not shifted, and the padding is "
                                       "left a target",
        (C, C, O, IGNORE_INDEX, IGNORE_INDEX, IGNORE_INDEX, IGNORE_INDEX): "EOS is ignored "
        "too: it stays a target (the model learns to end), only PAD's become IGNORE_INDEX"}
    got = targets.tolist()
    assert got == expected, (
        "targets must be the sequence shifted left by one (the next token), IGNORE_INDEX where "
        f"the next token is PAD ({expected} here), not {got}: "
        + readings.get(tuple(got), "compare them position by position with the inputs"))
    # The longest allowed string (max_len - 2 = 9 tokens) fills every position; no PAD.
    path.write_text("c1ccccc1Cl\n")
    inputs, targets = SmilesDataset(path, vocab, max_len=11)[0]
    assert inputs[0] == BOS and inputs[-1] == stoi["Cl"], (
        "a string of max_len - 2 tokens must fill the inputs: BOS first, its last token last")
    assert targets[-1] == EOS and (targets != IGNORE_INDEX).all(), (
        "a string of max_len - 2 tokens must fill the targets, EOS last, none ignored")


def test_dataset_target_is_input_shifted_by_one(train_fixture):
    ds = SmilesDataset(train_fixture, build_vocab(train_fixture))
    inputs, targets = ds.inputs, ds.targets
    assert inputs.shape == targets.shape == (400, 51)
    real = targets != IGNORE_INDEX
    assert torch.equal(targets[:, :-1][real[:, :-1]], inputs[:, 1:][real[:, :-1]])
    # IGNORE_INDEX exactly where the target would be PAD: after EOS, never before or at it.
    eos_at = (targets == EOS).float().argmax(dim=1)
    positions = torch.arange(51)
    assert torch.equal(~real, positions[None, :] > eos_at[:, None])
    assert (targets[real] != PAD).all()


@pytest.mark.parametrize("bad_line, max_len", [
    ("CC[Se]C", 52),      # a token outside the vocabulary
    ("C" * 11, 12),       # 11 tokens, more than max_len - 2 = 10
    ("CC!O", 52),         # does not tokenize
])
def test_dataset_rejects_a_line_naming_its_number(tmp_path, train_fixture, bad_line, max_len):
    vocab = build_vocab(train_fixture)
    path = tmp_path / "bad.txt"
    path.write_text(f"CCO\nCCN\n{bad_line}\nCCC\n")  # the bad line is line 3, counted from 1
    with pytest.raises(ValueError) as error:
        SmilesDataset(path, vocab, max_len=max_len)
    message = str(error.value)
    assert names_line(message, path, 3), (
        "SmilesDataset must raise ValueError naming the bad line by its number counted from 1 "
        f"(line 3 here), but its message is: {message}"
        + (" (it names line 2: are the lines counted from 0, enumerate's index?)"
           if names_line(message, path, 2) else ""))
