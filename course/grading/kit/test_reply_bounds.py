"""What a submission sends costs the taker no more than a small multiple of its size
(tests/seam.py): a message of too many values is refused before it is parsed, a tensor whose
`tolist()` would build millions of rows is refused by its shape, and a value that shares
itself many times over is refused as it is encoded; a reply of the graded tests' largest
size passes."""

import json
import os
import struct
import tempfile
import time
from pathlib import Path

import pytest
import torch

from tests import seam

pytestmark = [pytest.mark.kit, pytest.mark.timeout(60)]


def _message(value) -> bytes:
    encoder = seam.Encoder(lambda v: {"$ref": 0})
    return seam.pack(encoder.encode(value), encoder.blobs)


def _decode(message: bytes):
    tree, blobs = seam.unpack(message)
    return seam.Decoder(blobs, lambda node: None).decode(tree)


def test_a_tensor_tolist_would_blow_up_is_refused_by_its_shape():
    """4,000,000 x 1 x 1 uint8 values: 4 MB on the seam, 8,000,000 lists in `tolist()`."""
    message = _message(torch.zeros(4_000_000, 1, 1, dtype=torch.uint8))
    with pytest.raises(seam.SeamError, match=r"4,000,000 x 1 x 1 \(4,000,000 values in "
                                             r"8,000,000 rows\)"):
        _decode(message)


def test_rows_are_bounded_apart_from_values():
    """200,000 x 1 bytes: few values, but a list for each row in `tolist()`."""
    with pytest.raises(seam.SeamError, match=r"200,000 x 1 \(200,000 values in 200,000 rows\)"):
        _decode(_message(torch.zeros(200_000, 1, dtype=torch.uint8)))
    assert _decode(_message(torch.zeros(4_000, 7))).shape == (4_000, 7)


def test_a_message_of_millions_of_values_is_refused_before_it_is_parsed():
    body = json.dumps({"tree": {"$list": [{}] * 3_000_000}, "blobs": []},
                      separators=(",", ":")).encode()
    started = time.process_time()
    with pytest.raises(seam.SeamError, match="more than 1,000,000 values"):
        seam.unpack(struct.pack("<Q", len(body)) + body)
    assert time.process_time() - started < 0.5, "the message was parsed before it was sized"


def test_commas_and_brackets_inside_strings_do_not_count():
    text = "[{,}]" * 190_000  # 570,000 marks in each string: over the bound if counted
    assert _decode(_message([text, text])) == [text, text]


def test_a_value_that_shares_itself_is_refused_as_it_is_encoded():
    nested = [1]
    for _ in range(40):
        nested = [nested, nested, nested]
    started = time.process_time()
    with pytest.raises(seam.SeamError, match="made of more than"):
        _message(nested)
    assert time.process_time() - started < 10


def test_the_largest_reply_a_graded_test_takes_passes():
    """About 700,000 float32 values (2.7 MB), the graded tests' largest reply, and a list of
    10,000 strings."""
    value = {"logits": torch.randn(4, 64, 2730), "samples": [f"C{i}" for i in range(10_000)]}
    back = _decode(_message(value))
    assert torch.equal(back["logits"], value["logits"]) and back["samples"] == value["samples"]


BIG = '''
from course.grading.judge import JUDGE_MEMORY


def test_builds_past_the_budget():
    hold = bytearray(2 * JUDGE_MEMORY)
    assert hold


def test_after_it():
    assert sum(range(10)) == 45
'''


@pytest.mark.skipif(os.geteuid() != 0, reason="a judge runs as a user of its own: root only")
def test_a_test_past_the_judges_memory_budget_fails_alone_and_says_why():
    """A judge may map JUDGE_MEMORY beyond its size at its start (course/grading/judge.py,
    budget_memory): a test that builds more (here a bytearray twice that, as a reply's
    tolist() might) fails with a MemoryError that names the budget, and the judge goes on:
    the next test passes."""
    from course.grading.accounts import JUDGE_USER, sandbox_pool, sandbox_user
    from course.grading.judge import JUDGE_MEMORY
    from course.grading.judges import Seat, run_tests
    from course.grading.users import remove_tree
    from course.grading.zygote import Zygote

    base = Path(tempfile.mkdtemp(prefix="judge_budget_"))  # the judge's user traverses it
    base.chmod(0o711)
    tree, work = base / "tree", base / "work"
    tree.mkdir()
    work.mkdir()
    (tree / "test_big.py").write_text(BIG)
    zygote = Zygote()
    try:
        seat = Seat(zygote, sandbox_pool(1), sandbox_user(JUDGE_USER), tree, work,
                    work / "pytest")
        nodes = ["test_big.py::test_builds_past_the_budget", "test_big.py::test_after_it"]
        result = run_tests(tree, nodes, seat, str(tree), 20.0, time.monotonic() + 120,
                           "too late")
    finally:
        zygote.close()
        remove_tree(base)
    passed, output = result.outcomes.get(nodes[0], (None, result.unreached))
    assert passed is False and "over the judge's memory budget" in output and \
        f"{JUDGE_MEMORY >> 20} MiB" in output, output[:600]
    assert result.outcomes.get(nodes[1], (None,))[0] is True, result.outcomes
