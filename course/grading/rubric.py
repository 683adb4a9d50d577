"""The points of the homework: every autograded part, the code it grades, and its points.

Instructors only (the handout leaves course/ out). The grader reads this file, and
the README's tables of parts and points are generated from it (parts_table, points_table,
filled in by `python -m course.tools.report_tables README`).

A part is graded by the tests that carry its marker (pytest -m p1b), public (tests/) and
hidden (course/grading/hidden/), each test worth an equal share of the part's points. Every
solution region (a function or method between # BEGIN SOLUTION / # END SOLUTION) belongs
to exactly one part: REGIONS maps each file's regions to their part. The grader runs
every part's tests on the submission's own code in every part (no reference code may enter
a sandbox), so where a part's tests need another part's code (a script run end to end, a
model to train) they use public stand-ins (tests/tiny*.py) or values they compute
themselves instead: each part filled alone earns all its points, and a mistake costs points
in its own part only (course/tools/part_alone.py measures both).

The written answers are graded by hand with course/grading/RUBRIC.md; WRITTEN gives their points.
"""

from tests.parts import PARTS as TEST_PARTS

# part: (problem, part letter, title, points); the names and titles are tests/parts.py's
POINTS = {"p1a": 4, "p1b": 8, "p1c": 6, "p1d": 6, "p1e": 6,
          "p2a": 3, "p2b": 6, "p2c": 7, "p2d": 4, "p2e": 5,
          "p3a": 5, "p3b": 10, "p3c": 8, "p3d": 12, "p3e": 10}
PARTS = {part: (*named, POINTS[part]) for part, named in TEST_PARTS.items()}

# file: {qualified function name: part}; every region of the repository is listed once.
REGIONS = {
    "problem1/dataset.py": dict.fromkeys(
        ["AdditionDataset.__init__", "AdditionDataset.__len__", "AdditionDataset.__getitem__"],
        "p1a"),
    "problem1/attention.py": dict.fromkeys(
        ["scaled_dot_product_attention", "causal_mask", "MultiHeadAttention.__init__",
         "MultiHeadAttention.split_heads", "MultiHeadAttention.forward"], "p1b"),
    "problem1/model.py": dict.fromkeys(["EncoderLayer.forward", "DecoderLayer.forward"], "p1c"),
    "problem1/train.py": dict.fromkeys(["train_step", "validate", "steps_to_95"], "p1d"),
    "problem1/evaluate.py": dict.fromkeys(
        ["remove_head", "single_head_ablation", "greedy_pruning", "mean_attention_maps"], "p1e"),
    "problem2/dataset.py": {"OffsetDataset.__init__": "p2a"},
    "problem2/positional.py": {
        "sinusoidal_table": "p2b", "shift_rotation": "p2b", "rotary_frequencies": "p2c",
        "apply_rotary": "p2c", "score_shift_invariance": "p2c"},
    "problem2/train.py": dict.fromkeys(["loss_and_correct", "evaluate_split", "train_epoch"],
                                       "p2d"),
    "problem2/evaluate.py": dict.fromkeys(
        ["per_position_counts", "accuracy_over", "position_metrics", "shift_rotation_max_error",
         "score_shift_errors", "pairwise_rotary", "rotary_vs_pairwise_error"], "p2e"),
    "problem3/dataset.py": dict.fromkeys(["build_vocab", "SmilesDataset.__init__"], "p3a"),
    "problem3/model.py": dict.fromkeys(
        ["causal_mask", "Block.attention", "Block.forward", "DecoderLM.__init__",
         "DecoderLM.forward"], "p3b"),
    "problem3/train.py": dict.fromkeys(["lr_at_step", "train_step"], "p3c"),
    "problem3/sample.py": {"generate_batch": "p3d"},
    "problem3/evaluate.py": {
        "is_well_formed": "p3d", "max_open_ring_span": "p3d", "sample_metrics": "p3e",
        "breakdown": "p3e", "sweep_entry": "p3e"},
}

# Points of the written answers per problem (course/grading/RUBRIC.md splits them by question).
WRITTEN = {"problem1": 20, "problem2": 15, "problem3": 25}

# Results inside the reference bands (problemN/results/reference_bands.json), graded only
# for a problem whose results/metrics.json the submission contains.
RESULTS = {"problem1": 3, "problem2": 2, "problem3": 3}


def points_phrase(points) -> str:
    """Points in words as a page prints them: '1 point', '2 points', '0.5 points'."""
    return f"{points} point{'' if str(points) == '1' else 's'}"


def points_table() -> str:
    """The students' table of points per problem (README.md, between its
    `table: points` markers): code, written answers and results, from PARTS, WRITTEN and
    RESULTS."""
    lines = ["| problem | code | written answers (REPORT.md) | results |",
             "|---|---:|---:|---:|"]
    for problem in WRITTEN:
        code = sum(points for owner, _, _, points in PARTS.values() if owner == problem)
        lines.append(f"| {problem[-1]} | {code} | {WRITTEN[problem]} | {RESULTS[problem]} |")
    return "\n".join(lines)


def parts_table() -> str:
    """The students' table of parts (README.md, between its `table: parts`
    markers): each part's title, the functions to write file by file, its test marker and
    its points, all from PARTS and REGIONS."""
    lines = ["| problem | part | title | file: functions to write | test | points |",
             "|---|---|---|---|---|---:|"]
    for part, (problem, letter, title, points) in PARTS.items():
        files = [f"`{name}`: " + ", ".join(f"`{f}`" for f, p in functions.items() if p == part)
                 for name, functions in REGIONS.items() if part in functions.values()]
        lines.append(f"| {problem[-1]} | {letter} | {title} | {'; '.join(files)} | "
                     f"`pytest -m {part}` | {points} |")
    return "\n".join(lines)
