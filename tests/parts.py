"""The homework's parts, one table: each part's test marker (pytest -m p1b), problem, letter
and title. conftest.py registers the markers from it and checks that every graded test
carries exactly one; the course's rubric gives each part its points."""

PARTS = {
    "p1a": ("problem1", "A", "Addition dataset"),
    "p1b": ("problem1", "B", "Attention"),
    "p1c": ("problem1", "C", "Encoder and decoder layers"),
    "p1d": ("problem1", "D", "Training"),
    "p1e": ("problem1", "E", "Head ablation, pruning, attention maps"),
    "p2a": ("problem2", "A", "Offset dataset"),
    "p2b": ("problem2", "B", "Sinusoidal table and shift rotation"),
    "p2c": ("problem2", "C", "Rotary encoding and score shift"),
    "p2d": ("problem2", "D", "Training"),
    "p2e": ("problem2", "E", "Evaluation and checks"),
    "p3a": ("problem3", "A", "Vocabulary and dataset"),
    "p3b": ("problem3", "B", "Decoder-only model"),
    "p3c": ("problem3", "C", "Training"),
    "p3d": ("problem3", "D", "Sampling and well-formedness"),
    "p3e": ("problem3", "E", "Evaluation"),
}
