"""Equal solutions written another way earn what the reference earns: each planted alone in
a scratch copy of the reference (course/tools/plant.py), its part's public and hidden tests
all pass. The handout filled with course/grading/alternatives checks whole files written
differently (test_handout.py); these are the one-line variants a test's tolerance could
reject, each found failing a test once."""

import pytest

from course.grading.mutants import Mutant
from course.tools.plant import planted, run_part, scratch_copy
from provided.common import REPO_ROOT

pytestmark = [pytest.mark.kit, pytest.mark.timeout(600)]

EQUIVALENTS = [
    # the same mean over [B, 12, 4] logits, summed in another order: with Adam's default eps
    # the keys' biases (gradient zero but for rounding) took steps of noise, and the weights
    # after three steps were 2e-4 from the reference's (issue 58)
    Mutant("e_p1d_loss_over_class_dim", "p1d", "problem1/train.py",
           "loss = F.cross_entropy(logits.flatten(0, 1), tgt_out.flatten())",
           "loss = F.cross_entropy(logits.transpose(1, 2), tgt_out)",
           "cross-entropy over logits [B, 12, 4] against tgt_out [B, 4]"),
]


def test_every_equivalent_passes_its_parts_graded_tests():
    failed = {}
    with scratch_copy() as root:
        for variant in EQUIVALENTS:
            text = variant.apply((REPO_ROOT / variant.file).read_text())
            with planted(root, variant.file, text):
                result = run_part(root, variant.part)
            assert result["error"] is None, (variant.name, result["error"])
            if result["failed"]:
                failed[variant.name] = [(t["name"], t["message"][:300]) for t in result["failed"]]
    assert not failed, failed
