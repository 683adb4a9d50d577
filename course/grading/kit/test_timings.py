"""course/README.md's table of the tests' and CI's times, stop by stop: well formed (four
cells a row, every result a duration, each stop's rows together, the last row a `.ci/run`),
and every figure about CI's time elsewhere in course/README.md or course/INSTRUCTORS.md is
the last row's. A new stop's CI time goes into a new last row, and the sentences quoting it
follow."""

import re

import pytest

from provided.common import REPO_ROOT

pytestmark = pytest.mark.kit

README = (REPO_ROOT / "course" / "README.md").read_text()
INSTRUCTORS = (REPO_ROOT / "course" / "INSTRUCTORS.md").read_text()
HEADER = "| stop | what was measured | result | machine |"
# a duration as the table and the prose write it: 10 s, 21-24 s, 11 min, 6 min 17 s
DURATION = re.compile(r"\b\d+(?:-\d+)? (?:min(?: \d+ s)?|s)\b")
# a sentence about CI's time: .ci/run or CI named, and a duration in minutes; the limit CI
# should keep ("should take at most 15 minutes") is no measurement
CI_NAMED = re.compile(r"`\.ci/run`|\bCI\b")
MINUTES = re.compile(r"\b(?:(\d+) h )?(\d+) min(?:utes)?(?: (\d+) s)?\b")
LIMIT = "should take"


def timing_table() -> tuple[list[list[str]], str]:
    """The table's rows (cells stripped) and the README without the table."""
    lines = README.splitlines()
    assert lines.count(HEADER) == 1, f"course/README.md should hold one table headed {HEADER}"
    start = lines.index(HEADER)
    end = start + 2
    while end < len(lines) and lines[end].startswith("|"):
        end += 1
    assert lines[start + 1] == "|---|---|---|---|", lines[start + 1]
    rows = [[cell.strip() for cell in line.strip().strip("|").split("|")]
            for line in lines[start + 2:end]]
    return rows, "\n".join(lines[:start] + lines[end:])


def stop_of(cell: str) -> str:
    """A stop's name: its cell up to a description in brackets or after a colon."""
    return re.split(r" \(|:", cell, maxsplit=1)[0]


def test_the_timing_table_is_well_formed():
    rows, _ = timing_table()
    assert len(rows) >= 2
    finished: list[str] = []
    for row in rows:
        assert len(row) == 4 and all(row), f"a row of four non-empty cells: {row}"
        assert DURATION.search(row[2]), f"a result that is no duration: {row}"
        stop = stop_of(row[0])
        if not finished or finished[-1] != stop:
            assert stop not in finished, f"the rows of stop {stop!r} should be together"
            finished.append(stop)
    assert "`.ci/run`" in rows[-1][1] and not rows[-1][1].startswith("`.ci/run`'s"), \
        f"the last row should be a stop's whole `.ci/run`: {rows[-1]}"


def ci_sentences(text: str) -> list[str]:
    """The sentences of text that name CI and give a time in minutes (not CI's limit)."""
    flat = re.sub(r"\s+", " ", text)
    return [s for s in re.split(r"(?<=[.;:])\s", flat)
            if CI_NAMED.search(s) and MINUTES.search(s) and LIMIT not in s]


def agrees(figure: re.Match, latest: re.Match) -> bool:
    """figure is latest: the same to the second, or, written in whole minutes, the same
    minute rounded."""
    def seconds(m: re.Match) -> int:
        hours, minutes, secs = (int(g or 0) for g in m.groups())
        return 3600 * hours + 60 * minutes + secs
    if figure.group(3) is not None:
        return seconds(figure) == seconds(latest)
    return abs(seconds(figure) - seconds(latest)) <= 30


def test_every_ci_time_quoted_is_the_tables_last():
    rows, rest = timing_table()
    latest = MINUTES.search(rows[-1][2])
    assert latest, f"the last row's result should be in minutes: {rows[-1]}"
    for name, text in {"course/README.md": rest, "course/INSTRUCTORS.md": INSTRUCTORS}.items():
        for sentence in ci_sentences(text):
            for figure in MINUTES.finditer(sentence):
                assert agrees(figure, latest), \
                    f"{name} says CI takes {figure.group(0)}, the timing table's last row " \
                    f"{latest.group(0)}: {sentence}"


def test_the_quote_check_sees_a_stale_figure():
    latest = MINUTES.search("21 min 28 s")
    stale, fresh = ci_sentences(  # the limit's sentence is none of them
        "CI (`.ci/run`) takes 15 min 33 s. CI should take at most 15 minutes. "
        "CI takes about 21 minutes.")
    assert not agrees(MINUTES.search(stale), latest)
    assert agrees(MINUTES.search(fresh), latest)
