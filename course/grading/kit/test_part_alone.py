"""Every part is graded alone: filled alone in the handout (every other region raising
NotImplementedError), it earns all its points, and a mistake in a part that others use
costs points in its own part only (course/tools/part_alone.py, local pytest runs; the whole
catalogue's blast radius is MISTAKES.md's, `python -m course.tools.part_alone --mistakes
--write`, 16 minutes on 2 busy cores). Here the 15 parts alone and six mistakes in code
that other parts' tests could reach (about 3 minutes on 2 busy cores)."""

import subprocess
import sys

import pytest

from course.grading.mutants import BLAST_BEGIN, MISTAKES_FILE, MUTANTS
from provided.common import REPO_ROOT

pytestmark = [pytest.mark.kit, pytest.mark.timeout(900)]
# mistakes in code that other parts' scripts and functions call (the dataset, attention, the
# sinusoidal table, rotary, the model, is_well_formed): their tests use stand-ins
UPSTREAM = ["p1a_tgt_in_not_shifted", "p1b_mask_flipped", "p2b_sin_cos_swapped",
            "p2c_rotary_conjugate", "p3b_no_mask", "p3d_well_formed_empty"]


def part_alone(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "course.tools.part_alone", *args],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=850)


def test_every_part_filled_alone_earns_all_its_points():
    done = part_alone()
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert done.stdout.splitlines()[-1].startswith("15 of 15 clean"), done.stdout[-2000:]


def test_upstream_mistakes_cost_points_in_their_own_part_only():
    assert set(UPSTREAM) <= {m.name for m in MUTANTS}
    done = part_alone("--mistakes", *UPSTREAM)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


def test_the_mistakes_file_has_the_blast_radius_of_every_mistake():
    text = MISTAKES_FILE.read_text()
    assert BLAST_BEGIN in text, ("run `python -m course.tools.part_alone --mistakes --write` "
                                 "to add the blast radius to course/grading/MISTAKES.md")
    section = text[text.index(BLAST_BEGIN):]
    assert f"outside their own part: 0 of {len(MUTANTS)}." in section, section[:1500]
