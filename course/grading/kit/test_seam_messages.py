"""A call through the seam (tests/seam.py) that fails shows what the code under test wrote to
stderr: a script's one-line error comes before its SystemExit, and in the grader the
sandbox's own stderr goes nowhere, so the failing call's last lines join its error as a note
(which pytest shows in the failure's first lines, and so does the grader)."""

import pytest

from tests import seam

pytestmark = [pytest.mark.kit]

SCRIPT = '''
import sys


def main(argv):
    for step in range(30):
        print(f"step {step}", file=sys.stderr)
    print("error: --run post_lr0.03: no such run in results/", file=sys.stderr)
    raise SystemExit(2)
'''


def test_a_scripts_error_line_joins_its_system_exit(tmp_path, monkeypatch):
    (tmp_path / "noisy_script.py").write_text(SCRIPT)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(SystemExit) as caught:  # conftest.py opened this test's seam
        seam.submission("noisy_script").main([])
    note = caught.value.__notes__[0]
    assert note.endswith("\nerror: --run post_lr0.03: no such run in results/"), note
    assert "step 29" in note and "step 9\n" not in note  # the last lines only
    assert len(note) < 600 - len("SystemExit: 2\n")  # within the grader's first characters
