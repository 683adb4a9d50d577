"""Hidden tests, Problem 3 Part D: sampling from a small Markov model whose probabilities are
known (temperature, rows ending at different steps, the length cap inside a batch), and more
strings for the four syntactic rules and the ring spans, worked out by hand."""

import math

import pytest
import torch

from provided.smiles import BOS, EOS, PAD, SmilesVocab
from tests.seam import submission

pytestmark = pytest.mark.p3d

ev = submission("problem3.evaluate")
generate = submission("problem3.sample").generate
stubs = submission("tests.tiny_problem3")  # stand-in models, next to the code under test
sandbox_torch = submission("torch")

TOKENS = ["C", "N", "O", "c", "n", "o"]
VOCAB = SmilesVocab(TOKENS)  # the ids, here
S = VOCAB.stoi


@pytest.fixture
def vocab():
    """The same vocabulary, made next to the code under test."""
    return submission("provided.smiles").SmilesVocab(TOKENS)


def MarkovLM(p_c: float, loop: bool = False):
    """A stand-in LM (tests/tiny_problem3.py's TableLM) whose next-token logits depend on
    the current token only, at every position.

    After BOS: C with probability p_c, else O (log-probabilities as logits). Then
    deterministically C -> N -> EOS ('CN') and O -> c -> n -> o -> EOS ('Ocno'). With
    loop=True, C -> C forever instead. Feeding the whole prefix or, with kv_cache, only the
    new token gives the same logits at the last position.
    """
    table = torch.full((len(VOCAB), len(VOCAB)), -1e9)
    table[:, EOS] = 0.0  # anything else ends the string
    for token in (BOS, PAD, EOS):
        table[token, EOS] = -1e9
    table[BOS, S["C"]], table[BOS, S["O"]] = math.log(p_c), math.log(1 - p_c)
    table[PAD, EOS] = table[EOS, EOS] = 0.0
    chains = [("C", "C")] if loop else [("C", "N")]
    chains += [("O", "c"), ("c", "n"), ("n", "o")]
    for a, b in chains:
        table[S[a]] = -1e9
        table[S[a], S[b]] = 0.0
    return stubs.TableLM(table)


@pytest.mark.parametrize("temperature, p_c", [
    (1.0, 0.8), (0.5, 0.64 / 0.68), (2.0, 0.8 ** 0.5 / (0.8 ** 0.5 + 0.2 ** 0.5))],
    ids=["T=1", "T=0.5", "T=2"])
def test_temperature_divides_the_logits(vocab, temperature, p_c):
    samples = generate(MarkovLM(0.8), vocab, 1000, temperature=temperature, max_len=10,
                       batch_size=250, generator=sandbox_torch.Generator().manual_seed(0))
    assert len(samples) == 1000 and set(samples) <= {"CN", "Ocno"}, (
        "generate must let every sample of a batch run to its own EOS: are the other samples "
        "cut short when the first one ends, or is EOS not handled per sample?")
    # 1000 draws: the standard error is at most 0.016, the tolerance over four times that
    assert samples.count("CN") / 1000 == pytest.approx(p_c, abs=0.065), (
        "generate must sample from softmax(logits / temperature): is the temperature "
        "multiplying the logits, ignored, or the argmax taken instead of sampling?")


def test_rows_end_at_their_own_eos_or_at_the_cap(vocab):
    samples = generate(MarkovLM(0.5, loop=True), vocab, 60, max_len=8, batch_size=60,
                       generator=sandbox_torch.Generator().manual_seed(1))
    assert set(samples) == {"CCCCCC", "Ocno"}  # 6 = max_len - 2 tokens at most


def test_generate_without_a_generator_and_with_uneven_batches(vocab):
    sandbox_torch.manual_seed(0)  # the global generator, next to the code: the same draws each run
    samples = generate(MarkovLM(0.5), vocab, 7, max_len=10, batch_size=3)
    assert len(samples) == 7 and set(samples) <= {"CN", "Ocno"}


WELL_FORMED = [
    "C12CC12",            # two rings opened and closed by the same pair of digits
    "C1CC2CC12",          # interleaved, closed together
    "((C))", "C(=O)(O)", "[nH]1cccc1", "C1CCCCC1C1CCCCC1", "Cl", "Br", "c1cc2ccccc2cc1",
    "N#CC(C)(C)C#N", "C1CC1C2CC2", "[Se]1CC1",
]
ILL_FORMED = [
    "C1C1C1",             # the third 1 opens a ring that never closes
    "C1CC1)", "C]", "C[]C", " ", "C1CC2", "(C", "C)(", "[C", "CC((C)", "C2CC1CC2",
]


RING_SPANS = [
    ("C12CC12", 4), ("C1CC1CCCCC1CC1", 3), ("C1CCCCCC2CC2", 3), ("c1cc2ccccc2cc1", 12),
    ("C1CC2CC12", 6), ("CC", 0), ("C1CC1C1CCCCCCCC1", 9),
]


def test_more_well_formed_strings():
    wrong = [smiles for smiles in WELL_FORMED if not ev.is_well_formed(smiles)]
    assert not wrong, f"well-formed, but is_well_formed says no: {wrong}"
    wrong = [smiles for smiles in ILL_FORMED[:4] if ev.is_well_formed(smiles)]
    assert not wrong, (f"ill-formed, but is_well_formed says yes: {wrong} (is True, or the "
                       "string, returned for every input?)")


def test_more_ill_formed_strings():
    wrong = [smiles for smiles in ILL_FORMED if ev.is_well_formed(smiles)]
    assert not wrong, f"ill-formed, but is_well_formed says yes: {wrong}"
    wrong = [smiles for smiles in WELL_FORMED[:4] if not ev.is_well_formed(smiles)]
    assert not wrong, (f"well-formed, but is_well_formed says no: {wrong} (is False, or "
                       "None, returned for every input?)")


def test_more_ring_spans():
    got = {smiles: ev.max_open_ring_span(smiles) for smiles, _ in RING_SPANS}
    wrong = {smiles: (got[smiles], span) for smiles, span in RING_SPANS if got[smiles] != span}
    assert not wrong, f"{{string: (max_open_ring_span, expected)}}: {wrong}"
