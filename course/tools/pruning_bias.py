"""Problem 1: greedy pruning that chooses heads on the validation split, reported on test.

    python -m course.tools.pruning_bias  # needs problem1/results/model_{forward,reversed}_n4000.pth

evaluate.py prunes as the homework asks: each step removes the head whose removal keeps the
highest *test* exact match, and the curve reports test exact match on the same pairs, so
every point is the best of up to 24 candidates on the split it is reported on (biased
upward). This prunes the two n4000 models choosing on the validation split instead and
scores each chosen set on test, which is unbiased; the report compares the two curves.
Writes problem1/results/pruning_validation.json:

    {run: [{"removed": [...], "val_exact_match", "test_exact_match"}, ...]}

Instructors only (course/tools/): evidence for the report, not part of the homework.
"""

from problem1.config import ANALYSED, load_model
from problem1.dataset import AdditionDataset
from problem1.evaluate import greedy_pruning, remove_head
from problem1.heads import HeadRemovalScorer
from provided.common import DATA_DIR, ArgumentParser, fail, results_dir, script
from provided.results import write_json

RUNS = ANALYSED


def validation_pruning(model, val, test, desc: str) -> list[dict]:
    """greedy_pruning on val; each point also scored on test."""
    on_test = HeadRemovalScorer(model, test, "cpu", remove_head, desc=f"{desc} (test)")
    curve = greedy_pruning(HeadRemovalScorer(model, val, "cpu", remove_head,
                                             desc=f"{desc} (val)"))
    return [{"removed": point["removed"], "val_exact_match": point["test_exact_match"],
             "test_exact_match": on_test(point["removed"])} for point in curve]


@script
def main(argv=None) -> int:
    ArgumentParser(__doc__).parse_args(argv)
    folder = results_dir("problem1")
    curves = {}
    for run, order in RUNS.items():
        path = folder / f"model_{run}.pth"
        if not path.exists():
            fail(f"{path} not found: train it with `make {path}` (about 3 minutes)")
        model, _, _ = load_model(path, "cpu")
        curves[run] = validation_pruning(model, AdditionDataset(DATA_DIR, "val", order),
                                         AdditionDataset(DATA_DIR, "test", order), run)
    write_json(folder / "pruning_validation.json", curves)
    print(f"wrote {folder / 'pruning_validation.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
