"""Problem 3, Part D: sampling (generate_batch, through the provided generate and sample.py,
from stand-in models of tests/tiny_problem3.py) and the syntactic checks is_well_formed and
max_open_ring_span."""

import math
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from problem3.evaluate import canonical  # given code (RDKit's canonical SMILES): trusted
from provided.smiles import BOS, EOS, PAD, SmilesVocab, tokenize
from tests.seam import submission
from tests.tiny import expect_raises, run_script
from tests.tiny_problem3 import write_run

pytestmark = pytest.mark.p3d

ev = submission("problem3.evaluate")
sample = submission("problem3.sample")
generate = sample.generate
stubs = submission("tests.tiny_problem3")  # stand-in models, next to the code under test
sandbox_torch = submission("torch")

FIXTURES = Path(__file__).parent / "fixtures"
TRAIN_FIXTURE = FIXTURES / "smiles_train.txt"
# the tokens of the fixture strings, by the provided tokenizer
TOKENS = sorted({t for line in TRAIN_FIXTURE.read_text().split() for t in tokenize(line)})


@pytest.fixture
def vocab():
    """The vocabulary of the fixture strings, made next to the code under test."""
    return submission("provided.smiles").SmilesVocab(TOKENS)


# ----------------------------------------------------------------------------- sampling
def last_position_note(vocab) -> str:
    """'' when each step of generate draws the next token from the logits at the last
    position; else what a probe found instead, which the tests that talk about EOS say
    first (a sampler reading another position never sees EOS come). The probe: a model whose
    next token follows from the current one alone (BOS -> C -> N -> EOS, at every position,
    whatever the cache), so that its samples are 'CN' exactly, at any temperature."""
    stoi = SmilesVocab(TOKENS).stoi
    table = torch.full((len(vocab), len(vocab)), -1e9)
    for a, b in ((BOS, stoi["C"]), (stoi["C"], stoi["N"]), (stoi["N"], EOS), (EOS, EOS),
                 (PAD, EOS)):
        table[a, b] = 0.0
    try:
        got = generate(stubs.TableLM(table), vocab, 2, max_len=8)
    except Exception as error:  # the test's own call shows the error
        return f"generate raised {type(error).__name__} on a model of logits [B, T, V]"
    if got == ["CN"] * 2:
        return ""
    if got == ["C" * 6] * 2:
        return ("generate_batch draws every token from the logits of the first position (the "
                "ones after BOS), not the last: the next token's logits are model(ids)[:, -1], "
                "so no sample ever reaches EOS")
    if any(set(s) - set("CN") for s in got):
        return (f"with a model that always continues BOS -> C -> N -> EOS, generate gives "
                f"{got}: tokens the model gives probability 0 (logits -1e9) were drawn, so the "
                "draw is not from softmax(logits / T) over the vocabulary: is the softmax taken "
                "over the batch (dim 0) instead of the last dimension, or the probabilities "
                "changed after the softmax?")
    return (f"with a model that always continues BOS -> C -> N -> EOS, generate gives {got}, "
            "not ['CN', 'CN']: does each step draw from the logits at the last position, "
            "model(ids)[:, -1], and feed the sequence so far back in?")


def test_generate_stops_at_eos_and_caps_the_length(vocab):
    stoi = SmilesVocab(TOKENS).stoi  # the same ids, here
    C, O = stoi["C"], stoi["O"]
    model = stubs.ScriptedLM([C, C, O, EOS, C, C], len(vocab))
    got = generate(model, vocab, 3, batch_size=2)
    refed = list(model.refed)
    assert got == ["CCO"] * 3, last_position_note(vocab) or (
        f"each sample must end at its first EOS (CCO here), not {got}: " + (
            f"a step fed {refed[0][1]} positions to a kv_cache that already held "
            f"{refed[0][0]}: once the model has filled its cache, feed only the newest token"
            if refed else "does each stop at its first EOS, and is num_samples drawn across "
            "batches?"))
    assert not model.shared, (
        "generate_batch's kv_cache must hold one dict per block, [{} for _ in model.blocks]: "
        "its blocks shared one dict ([{}] * n makes n references to one dict)")
    endless = stubs.ScriptedLM([C] * 100, len(vocab))
    capped = generate(endless, vocab, 1, max_len=8)
    steps = len(capped[0]) - 6 if capped and set(capped[0]) == {"C"} else None
    assert capped == ["C" * 6], (  # max_len counts BOS and EOS
        last_position_note(vocab) or
        "a sample without EOS must stop at max_len - 2 tokens (max_len counts BOS and EOS; "
        f"6 C's here), not {capped}: " + (
            f"is the sampling loop {abs(steps)} step{'s' * (abs(steps) != 1)} too "
            f"{'long' if steps > 0 else 'short'}?" if steps else "is the length capped?"))


def test_generate_feeds_the_whole_prefix_to_a_model_without_a_cache(vocab):
    """generate_batch's docstring: model(input_ids) -> logits is all that is needed, the
    kv_cache optional. A model that ignores kv_cache (leaves it empty) and whose next token
    depends on the whole prefix (here its length) must see the whole sequence at each step."""
    stoi = SmilesVocab(TOKENS).stoi
    C, O = stoi["C"], stoi["O"]
    model = stubs.ScriptedLM([C, C, O, EOS], len(vocab), uses_cache=False)
    got = generate(model, vocab, 2, max_len=8)
    why = ("after the first step only the newest token is fed, as if the model kept a cache: "
           "a model that leaves kv_cache empty sees one token and answers as for the first "
           "step again; feed the whole sequence so far unless the cache was filled"
           if got == ["C" * 6] * 2 else
           f"a model that emits C, C, O, EOS by the length of what it is fed gave {got}")
    assert got == ["CCO"] * 2, (
        last_position_note(vocab) or
        f"with a model that ignores kv_cache, generate must give ['CCO', 'CCO']: {why}")


def first_token_lm(vocab_size: int, stoi: dict, probabilities: dict):
    """A TableLM (next-token logits from the current token only): after BOS one of the
    tokens of probabilities, drawn with those probabilities (log-probabilities as logits),
    then deterministically C -> EOS, N -> c -> n -> EOS, O -> EOS: the samples 'C', 'Ncn',
    'O' ('Ncn' still runs when 'C' has ended)."""
    table = torch.full((vocab_size, vocab_size), -1e9)
    for token, p in probabilities.items():
        table[BOS, stoi[token]] = math.log(p)
    for a, b in (("C", EOS), ("N", stoi["c"]), ("c", stoi["n"]), ("n", EOS), ("O", EOS)):
        table[stoi[a] if isinstance(a, str) else a, b] = 0.0
    table[EOS, EOS] = table[PAD, EOS] = 0.0
    return stubs.TableLM(table)


@pytest.mark.parametrize("temperature", [1.0, 1.5])
def test_generate_samples_from_softmax_of_logits_over_temperature(vocab, temperature):
    stoi = SmilesVocab(TOKENS).stoi
    p = {"C": 0.6, "N": 0.3, "O": 0.1}
    model = first_token_lm(len(vocab), stoi, p)
    samples = generate(model, vocab, 1500, temperature=temperature, max_len=10,
                       generator=sandbox_torch.Generator().manual_seed(2))
    assert len(samples) == 1500 and set(samples) <= {"C", "Ncn", "O"}, (
        last_position_note(vocab) or
        "every sample must run to its own EOS ('C', 'Ncn' or 'O' here): are the other samples "
        f"of a batch cut short when the first one ends? got {sorted(set(samples))[:6]}")
    tempered = {t: q ** (1 / temperature) for t, q in p.items()}
    expected = {t: q / sum(tempered.values()) for t, q in tempered.items()}
    found = {t: sum(s[0] == t for s in samples) / 1500 for t in p}

    def power(k):  # softmax(k log p): what sampling gives at temperature 1 / k
        raised = {t: q ** k for t, q in p.items()}
        return {t: q / sum(raised.values()) for t, q in raised.items()}
    mistakes = [  # the powers of p that the common mistakes sample from
        (power(temperature), "the logits are multiplied by the temperature, not divided"),
        (power(1.0), "the temperature has no effect: is it applied after the softmax "
                     "(multinomial renormalizes the probabilities) or ignored?"),
        (power(2 / temperature), "the probabilities are squared (softmax taken twice, or "
                                 "log-probabilities exponentiated twice)")]
    # 1500 draws: the standard error is at most 0.013, the tolerance about four times that
    why = next((why for dist, why in mistakes
                if all(abs(found[t] - dist[t]) < 0.05 for t in p)), "is the softmax right?")
    assert all(abs(found[t] - expected[t]) < 0.05 for t in p), (
        f"generate must sample each token from softmax(logits / temperature): at T = "
        f"{temperature} the first tokens C, N, O must come with frequencies about "
        f"{[round(expected[t], 3) for t in p]}, not {[round(found[t], 3) for t in p]}: {why}")


def test_generate_is_seeded_and_lower_temperature_lowers_diversity(vocab):
    model = stubs.TinyLM(len(vocab))  # generate needs only an LM's interface
    # a peaked distribution, so temperature matters
    model.load_state_dict({"head.weight": 20 * model.head.weight}, strict=False)

    def draw(t, seed=0):
        return generate(model, vocab, 200, temperature=t, max_len=12,
                        generator=sandbox_torch.Generator().manual_seed(seed))

    assert draw(1.0) == draw(1.0) and draw(1.0) != draw(1.0, seed=1), (
        "generate must sample with torch.multinomial from the generator given: one seed must "
        "give the same samples, another seed others (is the generator not passed, or the "
        "argmax taken instead of sampling?)")
    distinct = [len(set(draw(t))) for t in (0.2, 1.0, 3.0)]
    why = ("the temperature has no effect (is it applied after the softmax, or ignored?)"
           if len(set(distinct)) == 1 else
           "more distinct samples at a lower temperature: are the logits multiplied by the "
           "temperature instead of divided?" if distinct[0] > distinct[2] else
           "is the temperature applied to every step's logits?")
    assert distinct[0] < distinct[1] < distinct[2], (
        "a lower temperature must give fewer distinct samples (T = 0.2, 1, 3 gave "
        f"{distinct}): {why}")


def test_sample_script_writes_the_samples(tmp_path, monkeypatch):
    # the run to sample: an untrained StandInLM (tests/tiny_problem3.py), saved as train.py
    # saves a run, so that no code of Parts A-C plays a part
    monkeypatch.setattr(submission("problem3.config"), "DecoderLM", stubs.StandInLM)
    results = tmp_path / "results"
    run = write_run(results, norm="pre", lr=1e-3, warmup=3, steps=4, batch_size=16)
    args = ["--run", run, "--num_samples", "50", "--results_dir", str(results),
            "--data_dir", str(tmp_path / "data"), "--device", "cpu", "--threads", "1"]
    run_script("problem3/sample.py", sample.main, args,
               "generate_batch (Part D), on a stand-in model (tests/tiny_problem3.py)")
    first = (results / f"samples_{run}.txt").read_text()
    samples = first.split("\n")[:-1]
    assert len(samples) == 50
    known = set(SmilesVocab.load(results / "vocab.json").chemistry_tokens)
    for smiles in samples:  # decoded strings of chemistry tokens, at most 50 of them
        tokens = tokenize(smiles)
        assert set(tokens) <= known and len(tokens) <= 50
    assert sample.main(args) == 0
    assert (results / f"samples_{run}.txt").read_text() == first  # seeded


# ------------------------------------------------------------------------ well-formedness
WELL_FORMED = [
    "C", "CCO", "c1ccccc1", "C1CC1", "CC(C)C", "CC(=O)O", "C(C(C))C", "N#N",
    "c1cc[nH]c1", "C1CC2CC1CC2",  # two interleaved rings
    "C1CC1C1CC1",  # a ring digit reused after it closed
    "C1CCC2CCCCC2C1", "CC(Cl)(Br)F", "O=C1CCCN1", "C%10CC%10",
    "C1CC=1", "c1ccccc1c1ccccc1",
    "c1cccc1",  # well-formed, though not a valid molecule
    "C(C)(C)(C)(C)C",  # five bonds on carbon: the syntax is fine, the valence is not
    "1CC1",  # a ring digit before any atom: the four rules do not forbid it
    "C[NH3+]", "[13CH4]",  # a bracket atom's digits (H count, charge, isotope): no ring
    "()", "C()C", "[nH]", "[Se]",
    "CC(C(C(C)C)C)C",
]
ILL_FORMED = [
    "", "C1CC", "C1CC2CC1", "CC(C", "CC)C", "C)(C", "CC(C))", "C(", ")",
    "C[nH", "CnH]c", "c1ccccc1(", "C1CC1C1",  # reused digit opened again, never closed
    "C!C", "CC O", "C((C)",
]


def test_well_formed():
    wrong = [smiles for smiles in WELL_FORMED if not well_formed_or_fail(smiles)]
    assert not wrong, (
        "is_well_formed must accept these well-formed strings (a ring digit closes its open "
        f"ring and may be reused after), but it said no to {wrong}: " + (
            "a bracket atom is one token, and its digits (H count, charge, isotope) are no "
            "ring labels: is a ring digit found inside a token rather than as a whole token?"
            if all("[" in smiles for smiles in wrong) else "is a ring digit never closed?"))
    accepted = [smiles for smiles in ILL_FORMED[1:6] if well_formed_or_fail(smiles)]
    assert not accepted, (
        "is_well_formed must also reject ill-formed strings (a ring or a '(' left open, a ')' "
        f"before its '('): it said yes to {accepted} (is True, or the string, returned for "
        "every input?)")


def well_formed_or_fail(smiles: str) -> bool:
    """is_well_formed(smiles), or the test fails saying that it raised."""
    try:
        return ev.is_well_formed(smiles)
    except NotImplementedError:
        pytest.fail("is_well_formed is not written yet (it raised NotImplementedError)")
    except Exception as error:  # noqa: BLE001 (any exception is the mistake)
        pytest.fail(f"is_well_formed must never raise, but is_well_formed({smiles!r}) raised "
                    f"{type(error).__name__}: {error}. The one expected failure is tokenize's "
                    "ValueError on a string it cannot split: catch that ValueError around "
                    "the tokenize call (such a string is not well-formed). Do not catch every "
                    "exception: that would hide a bug in the four rules behind an answer of "
                    "'not well-formed'.")


def test_ill_formed():
    wrong = [smiles for smiles in ILL_FORMED if well_formed_or_fail(smiles)]
    assert not wrong, (
        "is_well_formed must reject these ill-formed strings: is the empty string accepted, "
        f"a ')' before its '(', or a ring or bracket left open? It said yes to {wrong}")
    rejected = [smiles for smiles in WELL_FORMED[:5] if not well_formed_or_fail(smiles)]
    assert not rejected, (
        f"is_well_formed must also accept well-formed strings: it said no to {rejected} (is "
        "False, or None, returned for every input?)")


def test_every_valid_training_string_is_well_formed():
    strings = TRAIN_FIXTURE.read_text().split()
    assert all(canonical(s) is not None for s in strings)
    rejected = [s for s in strings if not ev.is_well_formed(s)]
    assert not rejected, (
        f"is_well_formed must accept every valid training string: it said no to {rejected[:5]}")
    closed = [s + ")" for s in strings[:50]]  # a ')' without its '(': never well-formed
    accepted = [s for s in closed if ev.is_well_formed(s)]
    assert not accepted, (
        "is_well_formed must reject a valid string with a ')' added at its end (the depth of "
        f"the parentheses goes negative): it said yes to {accepted[:5]} (is True, or the "
        "string, returned for every input?)")


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="CcNnO()=#123[]H%0", max_size=20))
def test_well_formed_never_raises_and_valid_implies_well_formed(smiles):
    result = ev.is_well_formed(smiles)
    assert isinstance(result, (bool, np.bool_))
    if canonical(smiles) is not None:
        assert result


RING_SPANS = [
    ("C1CC1", 3), ("c1ccccc1", 6), ("CCO", 0), ("C1CC", 0), ("", 0),
    ("C1CC2CC1CC2", 6), ("C1CC1C1CCCC1", 5), ("c1ccc(C)cc1", 9),
    ("CC(NC(=O)CSc1n[nH]c(N)n1)c1ccccc1Cl", 8),
]


# (string, what a mistake gives, the mistake): the evidence a message may name
RING_SPAN_MISTAKES = [
    ("CCO", None, "the default for no ring is None, not 0"),
    ("CC(NC(=O)CSc1n[nH]c(N)n1)c1ccccc1Cl", 11, "characters are counted instead of tokens "
     "([nH] is one token)"),
    ("C1CC1C1CCCC1", 10, "a reused label is measured from its first to its last occurrence: "
     "each occurrence closes the ring the one before it opened (spans 3 and 5 here)"),
]


def test_max_open_ring_span():
    got = {smiles: ev.max_open_ring_span(smiles) for smiles, _ in RING_SPANS}
    wrong = {smiles: (got[smiles], span) for smiles, span in RING_SPANS if got[smiles] != span}
    seen = [why for smiles, value, why in RING_SPAN_MISTAKES if got[smiles] == value]
    assert not wrong, (
        "max_open_ring_span must be the longest span, in tokens, of a closed ring, 0 for a "
        "string without one. {string: (got, expected)}: " f"{wrong}: "
        + ("; ".join(seen) if seen else "compare each span with the string's tokens"))


# Two-digit ring labels: the tokenizer's '%nn' (%10 .. %99) is one ring-bond token, a label
# of its own (%10 is neither 1 nor 0), opened and closed like a single digit (rule 3).
TWO_DIGIT_WELL_FORMED = [
    "C%10CCCCC%10", "C%99CC%99", "c1ccc%12ccccc%12c1",
    "C%10CC%11CC%10CC%11",  # two interleaved two-digit rings
    "C1CC%10CC1CC%10", "C%10CC1CC%10CC1",  # mixed with a single digit
    "C%10CC%10C%10CC%10",  # a two-digit label reused after it closed
]
TWO_DIGIT_ILL_FORMED = [
    "C%10CC", "C%99CC",  # opened, never closed
    "C%10CC%11",  # two labels, each opened once
    "C1CC%10CC1", "C%10CC1CC%10",  # the single digit closes, the two-digit ring stays open
    "C%10CC%10C%10",  # reused, opened again, never closed
    "C%10CC%10%10",  # closed, then opened again at the end
    "C%10CC0", "C%11CC1", "C%12CC%21",  # a different label does not close it
]


def test_two_digit_ring_labels_open_and_close_rings():
    assert all(canonical(s) is not None for s in TWO_DIGIT_WELL_FORMED[:6])  # real molecules
    rejected = [s for s in TWO_DIGIT_WELL_FORMED if not well_formed_or_fail(s)]
    accepted = [s for s in TWO_DIGIT_ILL_FORMED if well_formed_or_fail(s)]
    assert not rejected and not accepted, (
        "is_well_formed must treat a two-digit ring label '%nn' (one token, %10 .. %99) as a "
        "ring label of its own, opened and closed by its next occurrence like a single digit "
        f"(rule 3): it said no to {rejected} and yes to {accepted}. Are '%nn' tokens "
        "ignored (only tokens that are digits, token.isdigit(), taken as ring labels), or a "
        "'%nn' taken as the same label as a single digit?")


TWO_DIGIT_RING_SPANS = [
    ("C%10CC%10", 3), ("C%10CCCCC%10", 6), ("C%10CC", 0), ("C%10CC%11CC%10CC%11", 6),
    ("C%10CC1CC1CCC%10", 10),  # the two-digit ring is the longest
    ("C1CC%10CCCCCC%10C1", 12), ("C%10CC%10C%10CCCC%10", 5),
]


def test_max_open_ring_span_with_two_digit_labels():
    got = {smiles: ev.max_open_ring_span(smiles) for smiles, _ in TWO_DIGIT_RING_SPANS}
    wrong = {smiles: (got[smiles], span) for smiles, span in TWO_DIGIT_RING_SPANS
             if got[smiles] != span}
    assert not wrong, (
        "max_open_ring_span must count the rings of two-digit labels '%nn' (one token each, "
        "closed by the label's next occurrence) like those of single digits: are '%nn' "
        "tokens ignored (only token.isdigit() taken as a ring label), or counted as three "
        f"tokens? {{string: (got, expected)}}: {wrong}")


def test_is_well_formed_lets_other_exceptions_through(monkeypatch):
    """is_well_formed's docstring: catch tokenize's ValueError only, not every exception;
    here tokenize is replaced by a stand-in that raises RuntimeError."""
    answer = ev.is_well_formed("CCO")
    assert answer is True, (f"is_well_formed('CCO') should be True (with the real tokenize), "
                            f"got {answer!r}")
    monkeypatch.setattr(ev, "tokenize", stubs.RaisesError("a bug elsewhere"))
    try:
        answer = ev.is_well_formed("CCO")
    except RuntimeError as err:  # the stand-in's own error, let through
        if "a bug elsewhere" in str(err):
            return
        raise
    pytest.fail(f"is_well_formed must let an exception other than tokenize's ValueError "
                f"through (here tokenize raised RuntimeError), but it returned {answer!r}: is "
                "it a blanket `except Exception` (or bare `except:`)? Catch ValueError only",
                pytrace=False)


@pytest.mark.parametrize("smiles", ["C1CC[nH", "C1CC1]"])
def test_max_open_ring_span_raises_for_a_string_tokenize_rejects(smiles):
    """max_open_ring_span's docstring: a string that tokenize rejects raises ValueError (and
    the docstring's own example still gives its value)."""
    assert ev.max_open_ring_span("C1CC1") == 3, "max_open_ring_span('C1CC1') should be 3"
    expect_raises(ValueError, ev.max_open_ring_span, smiles,
                  what=f"max_open_ring_span({smiles!r}) (tokenize rejects it)")
