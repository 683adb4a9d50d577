"""The grading kit's acceptance run (`make grade-check`, several minutes).

    python -m course.tools.grade_check [--parts p1a ...]

1. The repository graded on itself earns every code point, and every result recomputed
   from its files lies in its band (a run whose weights are not here is unverified).
2. The handout filled with the reference bodies earns every code point.
3. The handout filled with course/grading/alternatives (solutions written differently) earns every
   code point.
4. The empty handout earns nothing.
5. The handout with one part filled (each part in turn, or the ones given): how much of that
   part it earns, printed as a measurement ("part"), not a check. The grader grades every
   part with the student's own code for all the others (no reference code may be in a
   sandbox), so the tests that need another part's code use public stand-ins instead, and
   each part alone should earn all its points (course/tools/part_alone.py checks that
   faster, with local pytest runs, and measures each mistake's blast radius).
Each line printed is one check; the exit status is 1 if any failed.
"""

import shutil
import tempfile
import time
from pathlib import Path

from course.grading import grade
from course.grading import rubric as RUBRIC
from course.grading.handout import fill_regions, make_handout, splice
from provided.common import REPO_ROOT, ArgumentParser, script

ALTERNATIVES = REPO_ROOT / "course" / "grading" / "alternatives"


def code_points(results: dict) -> dict:
    """{part: (score, max)} over the code tests of a results dict."""
    points = {}
    for test in results["tests"]:
        part = test["tags"][0]
        if not part.endswith("-results"):
            score, maximum = points.get(part, (0.0, 0.0))
            points[part] = (score + test["score"], maximum + test["max_score"])
    return {part: (round(score, 6), round(maximum, 6)) for part, (score, maximum) in points.items()}


def fill_one_part(handout: Path, out: Path, part: str, regions: dict) -> Path:
    """The handout with the reference functions of one part only."""
    shutil.copytree(handout, out)
    for name, parts in regions.items():
        mine = [f for f, p in parts.items() if p == part]
        if mine:
            target = out / name
            target.write_text(splice(target.read_text(), (REPO_ROOT / name).read_text(), mine))
    return out


@script
def main(argv=None) -> int:
    parser = ArgumentParser(__doc__)
    parser.add_argument("--parts", nargs="+", default=None)
    args = parser.parse_args(argv)
    rubric = RUBRIC
    parts = args.parts or list(rubric.PARTS)
    grader = grade.setup(parts)

    def graded(folder: Path, only: list[str] = parts) -> dict:
        budget = grade.Budget(time.monotonic() + 3600, grader.test_seconds)
        return grade.grade(folder, grader, only, None, budget)
    failures = 0

    def check(name: str, ok: bool, detail: str = "") -> None:
        nonlocal failures
        failures += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {name} {detail}", flush=True)

    with tempfile.TemporaryDirectory(prefix="grade_check_") as scratch:
        scratch = Path(scratch)
        handout = scratch / "handout"
        make_handout(handout)
        reference = graded(REPO_ROOT)
        short = {p: s for p, s in code_points(reference).items() if s[0] < s[1] - 1e-9}
        check("the repository on itself: every code point", not short, f"short: {short}")
        lost = [t["name"] for t in reference["tests"] if t["tags"][0].endswith("-results")
                and t["score"] < t["max_score"] and not t["output"].startswith("unverified")]
        check("the repository on itself: every recomputed result in its band (weights that "
              "are not here: unverified)", not lost, f"outside: {lost}")
        for label, donor in (("reference bodies", REPO_ROOT),
                             ("alternative bodies", ALTERNATIVES)):
            filled = scratch / label.replace(" ", "_")
            shutil.copytree(handout, filled)
            fill_regions(filled, donor)
            points = code_points(graded(filled))
            missing = {p: s for p, s in points.items() if s[0] < s[1] - 1e-9}
            check(f"the handout filled with the {label}", not missing, f"short: {missing}")
        empty = code_points(graded(handout))
        check("the empty handout", all(s == 0 for s, _ in empty.values()), str(empty))
        for part in parts:
            one = fill_one_part(handout, scratch / f"only_{part}", part, rubric.REGIONS)
            score, maximum = code_points(graded(one, [part]))[part]
            print(f"part only {part} filled: {score:.2f} / {maximum:.2f}", flush=True)
    grader.close()
    print("all checks passed" if not failures else f"{failures} checks failed")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
