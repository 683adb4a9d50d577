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
import re
import select
import time
from pathlib import Path

from course.grading import bands as bands_tool
from course.grading import rubric as RUBRIC
from course.grading.intake import results_files
from course.grading.judge import MAX_OUTPUT
from course.grading.trusted import Kit


def part_entries(kit: Kit, part: str, which: str, outcomes: dict, reason: str,
                 told=()) -> list[dict]:
    """Gradescope test entries of a part's public ("visible") or hidden tests, from
    {node id: (passed, output)}; a test without an outcome scores 0 with reason. told:
    lines every public entry's output ends with, passed or not (the given code the grader
    put back, course.grading.intake.given_code_told)."""
    problem, letter, _, points = RUBRIC.PARTS[part]
    nodes = kit.tests[part][which]
    share = points / sum(map(len, kit.tests[part].values()))  # public and hidden alike
    hidden = which == "hidden"
    entries = []
    for node in nodes:
        passed, output = outcomes.get(node, (False, reason))
        output = "" if passed else output[:MAX_OUTPUT]
        if told and not hidden:
            output = "\n\n".join(filter(None, [output, "\n".join(told)]))
        entries.append({
            "name": f"{problem} {letter} ({part}): {node.split('::', 1)[1]}"
                    + (" [hidden]" if hidden else ""),
            "score": share if passed else 0.0, "max_score": share,
            "visibility": "after_published" if hidden else "visible",
            "output": output, "tags": [part]})
    return entries


RECOMPUTE_SECONDS = 180  # one problem's recomputation at most


def recomputed(problem: str, folder: Path, out: Path, bands: dict, readers=None,
               seconds: float = RECOMPUTE_SECONDS) -> dict:
    """course.grading.recompute's {run: {quantity: {"value", "claimed", "status", "why"}}} for the
    submission's results folder (its files copied plain to out first, results_files),
    computed in a forked child, which alone imports the recomputation (its memory is
    returned when it ends) and has each archive of weights parsed by a weights reader that
    readers names ((zygote path, Sandbox): the grader's zygote and a sandbox user of its
    own; None: the recomputation starts its own); or {"fault": why} if the grader's own data
    is missing or the child failed."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(read_fd)
            from course.grading import recompute

            if readers is not None:
                recompute.set_readers(readers[0], readers[1].uid, readers[1].gid)
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


CODE_ONLY = "not graded: --code-only (the grader graded the code alone, without its data)"
STATUS_LINE_CHARS = 240  # one quantity's line in its problem's status entry


def grade_results(kit: Kit, root: Path | None, scratch: Path,
                  not_graded: str | None = None, readers=None,
                  deadline: float | None = None) -> list[dict]:
    """Each problem's graded numbers, recomputed by trusted code from the submission's own
    files (course/grading/recompute.py: weights, logs, samples), against the reference bands.
    Only a recomputed value can earn points; one that no file supports is "unverified" and
    earns none. Per problem:

      a status entry, visible at once and worth 0 points: each graded quantity "verified",
      "unverified: <why>" or "differs: <what>", and the result files that are missing;
      one entry per graded quantity, shown after publication only, that carries the
      points: the value and whether it lies in the reference range, never the range.

    not_graded (e.g. CODE_ONLY): nothing is recomputed, every entry says so and earns
    nothing. deadline (time.monotonic()): the recomputations together end by then, a
    problem not begun by then is not graded, saying so. The entries, and so the maximum,
    are the same for every submission."""
    entries = []
    for problem, points in RUBRIC.RESULTS.items():
        bands = kit.bands.get(problem)
        if bands is None:
            continue
        checks = [(run, q, band) for run, quantities in bands.items()
                  for q, band in quantities.items() if band.get("graded", True)]
        claimed = {}  # the quantities only a log states: shown in the status, no points
        folder = root / problem / "results" if root is not None else None
        missing = None  # the result files missing: named by the recomputation's reasons
        if not_graded is not None:
            items = dict.fromkeys(((run, q) for run, q, _ in checks),
                                  {"status": "not graded", "why": not_graded})
            headline, missing = not_graded, "not checked"
        elif folder is None or not (folder / "metrics.json").is_file():
            headline = f"your submission has no {problem}/results/metrics.json"
            items = dict.fromkeys(((run, q) for run, q, _ in checks),
                                  {"status": "unverified", "why": headline})
            missing = "metrics.json (the other files are not read without it)"
        else:
            left = RECOMPUTE_SECONDS if deadline is None else deadline - time.monotonic()
            found = recomputed(problem, folder, scratch / f"{problem}-results", bands, readers,
                               min(RECOMPUTE_SECONDS, left)) if left > 0 else {
                "fault": "the grading's time for recomputing results was spent"}
            items = {(run, q): {"status": "fault", "why": found["fault"]} if "fault" in found
                     else found.get(run, {}).get(q) or {
                         "status": "unverified", "why": "nothing was recomputed for it"}
                     for run, q, _ in checks}
            graded = {(run, q) for run, q, _ in checks}
            claimed = {(run, q): item for run, quantities in found.items()
                       if isinstance(quantities, dict) for q, item in quantities.items()
                       if (run, q) not in graded and isinstance(item, dict)}
            headline = None
        entries.append(status_entry(problem, points, items, headline, missing, claimed))
        for run, quantity, band in checks:
            inside, words = result_words(items[run, quantity], band, quantity)
            entries.append({
                "name": f"{problem} results: {run} {quantity}",
                "score": points / len(checks) if inside else 0.0,
                "max_score": points / len(checks), "visibility": "after_published",
                "tags": [f"{problem}-results"], "output": words})
    return entries


def status_entry(problem: str, points: float, items: dict, headline: str | None,
                 missing: str | None = None, claimed: dict | None = None) -> dict:
    """A problem's results status, visible before the deadline and worth 0 points: a first
    line (a problem-wide reason, or the count of each status), the result files missing
    (default: those the recomputation found missing), then each graded quantity's status
    (one line for all where they share it), then the claimed quantities (only a training
    log states them: shown, no points). It names no band and no verdict."""
    counts = {}
    for item in items.values():
        counts[item.get("status")] = counts.get(item.get("status"), 0) + 1
    faults = [item for item in items.values() if item.get("status") == "fault"]
    if faults:
        headline = status_words(faults[0])
    elif headline is None:
        headline = f"{len(items)} graded quantities: " + ", ".join(
            f"{counts.get(status, 0)} {status}" for status in ("verified", "differs", "unverified"))
    if missing is None:
        names = sorted({name for item in items.values() for name in
                        re.findall(r"there is no ([\w.-]+)", str(item.get("why", "")))})
        missing = ", ".join(names) or "nothing"
    lines = [headline, f"missing from {problem}/results/: {missing}",
             f"Whether each value lies in its reference range, and the {points:g} points, are "
             "shown when the grades are published.", ""]
    words = {key: status_words(item) for key, item in items.items()}
    if len(set(words.values())) == 1:
        lines.append(f"every graded quantity ({len(words)}): {next(iter(words.values()))}")
    else:
        lines += [f"{run} {quantity}: {said}"[:STATUS_LINE_CHARS]
                  for (run, quantity), said in words.items()]
    if claimed:
        lines += ["", "claimed (only a training log states these; no points):"]
        lines += [f"{run} {quantity}: " + (
                  f"{_shown(item.get('value'))} (from {str(item.get('why', ''))[:120]})"
                  if item.get("status") == "claimed" else status_words(item)
                  )[:STATUS_LINE_CHARS] for (run, quantity), item in claimed.items()]
    return {"name": f"{problem} results: status (verified, unverified or differs; no points)",
            "score": 0.0, "max_score": 0.0,
            "status": "passed" if counts.get("verified", 0) == len(items) else "failed",
            "visibility": "visible", "tags": [f"{problem}-results"], "output": "\n".join(lines)}


def status_words(item: dict) -> str:
    """A quantity's status line: "verified: <value>", "differs: <what>", "unverified: <why>"
    (or why it was not graded); never whether it lies in its band."""
    status, why = item.get("status"), str(item.get("why", ""))[:300]
    if status == "verified":
        return f"verified: {_shown(item.get('value'))} (from {why})"
    if status == "differs":
        return f"differs: {_shown(item.get('value'))} (from {why})"
    if status == "fault":
        return f"not graded: {why}; please tell the course staff"
    if status == "not graded":
        return why
    return f"unverified: {why}"


def result_words(item: dict, band: dict, quantity: str) -> tuple[bool, str]:
    """(whether a recomputed quantity earns its points, what its entry says)."""
    status, why = item.get("status"), str(item.get("why", ""))[:300]
    if status == "fault":
        return False, f"not graded: {why}; please tell the course staff"
    if status == "not graded":
        return False, why
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
