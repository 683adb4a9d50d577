"""The single entry point for every figure of the repository.

Students: given; run it for the figures, you need not read it.

    python provided/visualize.py data        # figures of the datasets
    python provided/visualize.py problem1    # ... problem2, problem3

Each target's figures are drawn by provided/plots/<target>.py from the committed results
(problemN/results/) and written as PNGs under problemN/results/figures/, or under
data/figures/ for the datasets (the one committed folder of data/).
"""

import importlib
from pathlib import Path

from provided.common import DATA_DIR, REPO_ROOT, ArgumentParser, HomeworkError, script

TARGETS = ("data", "problem1", "problem2", "problem3")
RUN_FIRST = {  # what writes the files each target draws
    "data": "`python generate_datasets.py`",
    "problem1": "`python -m problem1.train --digit_order ... --train_size ...` and then "
                "`python -m problem1.evaluate`",
    "problem2": "`python -m problem2.train --position ...` for each scheme and then "
                "`python -m problem2.evaluate`",
    "problem3": "`python -m problem3.train --norm ... --lr ... --warmup ...` and then "
                "`python -m problem3.evaluate`",
}


def default_dirs(target: str) -> tuple[Path, Path]:
    """(input folder, figure folder) of a target."""
    if target == "data":
        return DATA_DIR, DATA_DIR / "figures"
    results = REPO_ROOT / target / "results"
    return results, results / "figures"


@script
def main(argv=None) -> int:
    parser = ArgumentParser(__doc__)
    parser.add_argument("target", choices=TARGETS)
    parser.add_argument("--input_dir", type=Path, default=None,
                        help="results folder to read (data folder for 'data')")
    parser.add_argument("--out_dir", type=Path, default=None, help="where the PNGs go")
    args = parser.parse_args(argv)
    input_dir, out_dir = default_dirs(args.target)
    input_dir = args.input_dir or input_dir
    out_dir = args.out_dir or out_dir
    if not input_dir.exists():
        raise HomeworkError(f"{input_dir} does not exist: run the {args.target} steps of the "
                            "README first")

    import matplotlib

    matplotlib.use("Agg")
    module = importlib.import_module(f"provided.plots.{args.target}")
    out_dir.mkdir(parents=True, exist_ok=True)
    try:
        paths = module.make_figures(input_dir, out_dir)
    except (KeyError, IndexError, TypeError) as err:  # valid JSON of another shape
        raise HomeworkError(f"a file in {input_dir} lacks what the {args.target} figures need "
                            f"({type(err).__name__}: {err}): re-run "
                            f"{RUN_FIRST[args.target]}") from None
    if not paths:
        raise HomeworkError(f"nothing to draw in {input_dir}: run {RUN_FIRST[args.target]} "
                            "first (see the README)")
    for path in paths:
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
