"""Problem 2's evaluation-only length check (course/tools/problem2_analysis.py): fresh
sequences of 512 drawn by their own generator, and the accuracy per 64-position bucket,
checked by hand on a stub whose right and wrong positions are known."""

import pytest
import torch
from torch import nn

from course.tools import problem2_analysis as analysis
from problem2.config import Config

pytestmark = pytest.mark.kit

K = 7


class Stub(nn.Module):
    """Predicts the token k places back at positions k..right-1 and a wrong token from
    position `right` on (positions 0..k-1, which have no target, predict token 0)."""

    def __init__(self, right: int, k: int = K, vocab: int = 16):
        super().__init__()
        self.right, self.k, self.vocab = right, k, vocab

    def forward(self, tokens):
        guess = torch.zeros_like(tokens)
        guess[:, self.k:] = tokens[:, :-self.k]
        guess[:, self.right:] = (guess[:, self.right:] + 1) % self.vocab
        return nn.functional.one_hot(guess, self.vocab).float()


def test_tokens_are_seeded_apart_from_the_global_generator():
    state = torch.get_rng_state()
    tokens = analysis.long_sequence_tokens(5, 512, seed=2026)
    assert torch.equal(torch.get_rng_state(), state)  # the global generator is untouched
    assert tokens.shape == (5, 512) and tokens.dtype == torch.long
    assert 0 <= tokens.min() and tokens.max() < 16
    assert torch.equal(tokens, analysis.long_sequence_tokens(5, 512, seed=2026))
    assert not torch.equal(tokens, analysis.long_sequence_tokens(5, 512, seed=2027))
    assert analysis.LONG_SEED == 2026 and analysis.LONG_LENGTH == 512


def test_bucket_bookkeeping_by_hand():
    tokens = analysis.long_sequence_tokens(3, 512, seed=0)
    # right at 7..299, wrong at 300..511; batches of 2 over 3 sequences
    result = analysis.long_sequence_accuracy(Stub(right=300), tokens, K, bucket=64, batch_size=2)
    # bucket 0 holds 57 targets (7..63), all right; 256-319 holds 44 right of 64
    assert result["buckets"] == pytest.approx([1.0, 1.0, 1.0, 1.0, 44 / 64, 0.0, 0.0, 0.0])
    assert result["beyond_128_255"] == pytest.approx(1.0)
    assert result["beyond_256_511"] == pytest.approx(44 / 256)


def test_bucket_without_targets_and_short_sequences():
    tokens = analysis.long_sequence_tokens(2, 100, seed=1)
    result = analysis.long_sequence_accuracy(Stub(right=10), tokens, K, bucket=8)
    # 0-7: one target (7), right; 8-15: 8 and 9 right of 8; then all wrong
    assert result["buckets"][:3] == pytest.approx([1.0, 2 / 8, 0.0])
    assert len(result["buckets"]) == 13  # 12 full buckets of 8 and 96..99
    assert result["beyond_128_255"] is None and result["beyond_256_511"] is None
    # a bucket that only holds positions without a target has no accuracy
    first = analysis.long_sequence_accuracy(Stub(right=100), tokens, K, bucket=4)["buckets"][0]
    assert first is None


@pytest.mark.parametrize("position", ["sinusoidal", "rotary"])
def test_check_loads_the_weights_into_a_longer_model(position):
    config = Config(position=position, train_sequences=40, train_length=64)
    model = config.build_model()  # max_len 128
    with torch.no_grad():  # weights apart from a fresh build, so loading them matters
        for parameter in model.parameters():
            parameter.add_(0.1 * torch.randn_like(parameter))
    result = analysis.long_sequence_check(model, config, "cpu", num_sequences=4)
    assert set(result) == {"seed", "num_sequences", "length", "buckets", "beyond_128_255",
                           "beyond_256_511"}
    assert (result["seed"], result["num_sequences"], result["length"]) == (2026, 4, 512)
    assert len(result["buckets"]) == 8
    assert all(0.0 <= b <= 1.0 for b in result["buckets"])
    # causal: on positions 0..127 the longer model must agree with the trained one itself
    tokens = analysis.long_sequence_tokens(4, 512)
    short = analysis.long_sequence_accuracy(model, tokens[:, :128], K)
    assert result["buckets"][:2] == pytest.approx(short["buckets"])


def test_learned_and_none_are_refused():
    for position in ("learned", "none"):
        config = Config(position=position, train_sequences=40, train_length=64)
        with pytest.raises(ValueError, match="long-sequence"):
            analysis.long_sequence_check(config.build_model(), config, "cpu", num_sequences=1)
