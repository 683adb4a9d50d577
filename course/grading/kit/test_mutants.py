"""The catalogue of common mistakes (course/grading/mutants.py, course/grading/MISTAKES.md)
stays true to
the reference, and the mistakes the kit once let through are caught by a public test.

`make mutants` plants all of them (a few minutes); here only the
catalogue's shape and a
sample of the mistakes that used to pass: train/eval mode, gradients not cleared, batches
not in the seeded order, a median computed as a mean."""

import subprocess
import sys

import pytest

from course.grading.mutants import MUTANTS
from provided.common import REPO_ROOT

pytestmark = [pytest.mark.kit, pytest.mark.timeout(600)]
ONCE_MISSED = ["p1d_train_step_eval_mode", "p1d_validate_train_mode", "p2d_train_no_zero_grad",
               "p2d_train_not_shuffled", "p2d_train_unseeded_shuffle", "p2e_median_as_mean",
               "p3c_no_zero_grad", "p3c_eval_mode"]


@pytest.mark.parametrize("mutant", MUTANTS, ids=[m.name for m in MUTANTS])
def test_every_mutant_is_one_edit_of_the_reference(mutant):
    source = (REPO_ROOT / mutant.file).read_text()
    assert mutant.apply(source) != source
    assert mutant.name.startswith(mutant.part + "_")


def test_the_mistakes_file_lists_every_mutant():
    text = (REPO_ROOT / "course" / "grading" / "MISTAKES.md").read_text()
    missing = [m.name for m in MUTANTS if f"`{m.name}`" not in text]
    assert not missing, ("run `make mutants` to regenerate "
                         f"course/grading/MISTAKES.md: {missing}")
    assert "**not caught**" not in text


def test_the_mistakes_that_once_passed_are_caught_by_a_public_test(tmp_path):
    done = subprocess.run([sys.executable, "-m", "course.grading.mutants", "--only", *ONCE_MISSED,
                           "--json", str(tmp_path / "found.json")], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=500)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    lines = [line for line in done.stdout.splitlines() if line.split()[-1] in ONCE_MISSED]
    assert len(lines) == len(ONCE_MISSED) and all(line.startswith("public") for line in lines), \
        done.stdout
