"""Points: each part's test outcomes as Gradescope entries, and each problem's results,
recomputed by trusted code and judged against the reference bands.

Runs in the grader (course/grading/grade.py). The recomputation itself
(course/grading/recompute.py) runs in a child forked for it, which alone imports it, reads
the submission's result files as plain copies (course.grading.intake.results_files) and
returns numbers as JSON: no submission code runs, nothing of the submission is unpickled.
"""

import json
import math
import os
import select
import time
from pathlib import Path

from course.grading import bands as bands_tool
from course.grading import rubric as RUBRIC
from course.grading.intake import results_files
from course.grading.judge import MAX_OUTPUT
from course.grading.trusted import Kit


def part_entries(kit: Kit, part: str, which: str, outcomes: dict, reason: str) -> list[dict]:
    """Gradescope test entries of a part's public ("visible") or hidden tests, from
    {node id: (passed, output)}; a test without an outcome scores 0 with reason."""
    problem, letter, _, points = RUBRIC.PARTS[part]
    nodes = kit.tests[part][which]
    share = points / sum(map(len, kit.tests[part].values()))  # public and hidden alike
    hidden = which == "hidden"
    entries = []
    for node in nodes:
        passed, output = outcomes.get(node, (False, reason))
        entries.append({
            "name": f"{problem} {letter} ({part}): {node.split('::', 1)[1]}"
                    + (" [hidden]" if hidden else ""),
            "score": share if passed else 0.0, "max_score": share,
            "visibility": "after_published" if hidden else "visible",
            "output": "" if passed else output[:MAX_OUTPUT], "tags": [part]})
    return entries


def recomputed(problem: str, folder: Path, out: Path, bands: dict, seconds: float = 180) -> dict:
    """course.grading.recompute's {run: {quantity: {"value", "claimed", "status", "why"}}} for the
    submission's results folder (its files copied plain to out first, results_files),
    computed in a forked child, which alone imports the recomputation (its memory is
    returned when it ends); or {"fault": why} if the grader's own data is missing or the
    child failed."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(read_fd)
            from course.grading import recompute

            try:
                results = results_files(folder, problem, out)
                answer = {"found": recompute.recompute(problem, results, bands=bands)}
            except recompute.GraderDataError as err:
                answer = {"fault": f"the grader's data is not the homework's ({err})"}
            except Exception as err:  # a fault of the grader's: never the student's points
                answer = {"fault": f"the grader failed ({type(err).__name__}: {err})"[:300]}
            with os.fdopen(write_fd, "w") as pipe:
                json.dump(answer, pipe, default=repr)
        finally:
            os._exit(0)
    os.close(write_fd)
    chunks, deadline = [], time.monotonic() + seconds
    with os.fdopen(read_fd, "rb") as pipe:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([pipe], [], [], deadline - time.monotonic())
            if not ready:
                break
            chunk = os.read(pipe.fileno(), 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
    try:
        os.kill(pid, 9)
    except ProcessLookupError:
        pass
    os.waitpid(pid, 0)
    try:
        answer = json.loads(b"".join(chunks))
    except ValueError:
        return {"fault": f"the grader could not recompute {problem}'s results in {seconds:.0f} s"}
    return answer.get("found") if "found" in answer else {"fault": answer.get("fault", "")}


def grade_results(kit: Kit, root: Path | None, scratch: Path) -> list[dict]:
    """Each problem's graded numbers, recomputed by trusted code from the submission's own
    files (course/grading/recompute.py: weights, logs, samples), against the reference bands: one
    entry per graded quantity, or one 0-point entry saying why a problem's results could
    not be checked. Only a recomputed value can earn points; one that no file supports is
    "unverified" and earns none. A quantity's entry is shown after publication only and
    names no band: the student sees the value and whether it lies in the reference range,
    never the range, and where their metrics.json says otherwise."""
    entries = []
    for problem, points in RUBRIC.RESULTS.items():
        bands = kit.bands.get(problem)
        if bands is None:
            continue
        checks = [(run, q, band) for run, quantities in bands.items()
                  for q, band in quantities.items() if band.get("graded", True)]
        tag = f"{problem}-results"
        folder = root / problem / "results" if root is not None else None
        if folder is None or not (folder / "metrics.json").is_file():
            entries.append({"name": f"{problem} results", "score": 0.0, "max_score": points,
                            "visibility": "visible", "tags": [tag],
                            "output": f"your submission has no {problem}/results/metrics.json"})
            continue
        found = recomputed(problem, folder, scratch / f"{problem}-results", bands)
        for run, quantity, band in checks:
            if "fault" in found:
                item = {"status": "fault", "why": found["fault"]}
            else:
                item = found.get(run, {}).get(quantity) or {
                    "status": "unverified", "why": "nothing was recomputed for it"}
            inside, words = result_words(item, band, quantity)
            entries.append({
                "name": f"{problem} results: {run} {quantity}",
                "score": points / len(checks) if inside else 0.0,
                "max_score": points / len(checks), "visibility": "after_published",
                "tags": [tag], "output": words})
    return entries


def result_words(item: dict, band: dict, quantity: str) -> tuple[bool, str]:
    """(whether a recomputed quantity earns its points, what its entry says)."""
    status, why = item.get("status"), str(item.get("why", ""))[:300]
    if status == "fault":
        return False, f"not graded: {why}; please tell the course staff"
    if status not in ("verified", "differs"):
        return False, f"unverified, no points: {why}"
    value = item.get("value")
    inside, _ = in_band(value, band, quantity)
    words = f"recomputed from your files {_shown(value)}: " + (
        "inside the reference range" if inside else "outside the reference range")
    if status == "differs":
        words += (f"; your metrics.json says {_shown(item.get('claimed'))} (check how your "
                  "evaluation computes it)")
    return inside, words


def _shown(value) -> str:
    return f"{value:.6g}" if isinstance(value, float) else repr(value)[:40]


def in_band(value, band: dict, quantity: str = "") -> tuple[bool, str]:
    """(whether value is accepted, the band in words). None (e.g. steps_to_95 never reached)
    is accepted when some reference seed had None too; anything not a finite number is not
    accepted otherwise."""
    missing = band.get("missing", [])
    words = f"{band['n_seeds'] + len(missing)} seeds"
    if missing:
        words += f", {len(missing)} of them without a value (e.g. never reached)"
    if not band["n_seeds"]:
        return value is None, words
    low, high = bands_tool.band_limits(band, quantity)
    words += (f"; mean {band['mean']:.4g}, sd {band['sd'] or 0:.2g}, range "
              f"[{band['min']:.4g}, {band['max']:.4g}]; accepted [{low:.4g}, {high:.4g}]")
    if value is None:
        return bool(missing), words
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False, words + " (yours is not a number)"
    try:
        value = float(value)  # a 400-digit integer does not fit: not a result
    except OverflowError:
        return False, words + " (yours is not a number)"
    if not math.isfinite(value):
        return False, words + " (yours is not a number)"
    return low <= value <= high, words
