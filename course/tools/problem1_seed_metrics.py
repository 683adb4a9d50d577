"""Problem 1's extra seeds: evaluate.py's test metrics of a seed's runs, without the head
analysis.

    python -m course.tools.problem1_seed_metrics --results_dir problem1/results/seeds/seed1

Greedy-decodes the test split with each run's weights in --results_dir and writes
metrics.json there as evaluate.py does, with the same entries per run (test exact match,
test token accuracy, steps_to_95 from the training log) and empty "ablation" and
"pruning": the reference bands (course/grading/bands.py) need the test metrics of five
seeds, and the head analysis, the slow part, is kept for seed 0. Seed 0's own folder is
refused: its metrics.json is evaluate.py's, head analysis included.

Instructors only (course/tools/): `make seeds-problem1` runs it.
"""

from problem1 import evaluate
from provided.common import (
    ArgumentParser,
    HomeworkError,
    add_common_args,
    results_dir,
    script,
    setup,
)
from provided.results import write_json


@script
def main(argv=None) -> int:
    args = add_common_args(ArgumentParser(__doc__), "problem1").parse_args(argv)
    if args.results_dir.resolve() == results_dir("problem1").resolve():
        raise HomeworkError(f"--results_dir {args.results_dir} is seed 0's folder, whose "
                            "metrics.json `python -m problem1.evaluate` writes with the head "
                            "analysis: give an extra seed's folder, e.g. "
                            "problem1/results/seeds/seed1")
    device = setup(args)
    metrics = {saved.run: evaluate.test_metrics(saved.run, predicted, test, args.results_dir)
               for _, saved, test, predicted in evaluate.decoded_runs(args, device)}
    write_json(args.results_dir / "metrics.json", {**metrics, "ablation": {}, "pruning": {}})
    print(f"wrote {args.results_dir / 'metrics.json'} ({len(metrics)} runs, no head analysis)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
