"""The single entry point for every figure of the repository.

Students: given; run it for the figures, you need not read it.

    python provided/visualize.py data        # figures of the datasets
    python provided/visualize.py problem1    # ... problem2, problem3

Each target's figures are drawn by provided/plots/<target>.py from the committed results
(problemN/results/) and written as PNGs under problemN/results/figures/, or under
data/figures/ for the datasets (the one committed folder of data/). A figure whose results
are not there yet is skipped, one line each saying which file or entry it lacks and what
writes it.
"""

import fnmatch
import importlib
import json
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

P1_EVALUATE = "`python -m problem1.evaluate`"
P2_EVALUATE = "`python -m problem2.evaluate`"
P3_EVALUATE = "`python -m problem3.evaluate`"
P3_SAMPLE = "`python -m problem3.sample --run pre_lr0.001_w500_s4000` (after its training run)"
# Every figure of each target (a name, or a pattern of names) and what it is drawn from:
# [(file in the input folder, the entry of its JSON needed or None)], and what writes them.
# An entry "a.b" is key b of key a; "a|b" is either key. "{main}" is metrics.json's main run.
FIGURES = {
    "data": [
        ("carries", [("addition/train.csv", None)],
         "`python generate_datasets.py --only addition`"),
        ("train_molecules", [("smiles/train.txt", None)],
         "`python generate_datasets.py --only smiles`"),
    ],
    "problem1": [
        ("val_exact_match", [("training_log_*.json", None)],
         "`python -m problem1.train --digit_order ... --train_size ...`"),
        ("test_vs_train_size", [("metrics.json", None)], P1_EVALUATE),
        ("ablation", [("metrics.json", "ablation")], P1_EVALUATE),
        ("pruning", [("metrics.json", "pruning")], P1_EVALUATE),
        ("cross_attention_*", [("attention_maps.json", None)], P1_EVALUATE),
        ("encoder_attention_*", [("attention_maps.json", None)], P1_EVALUATE),
    ],
    "problem2": [
        ("accuracy_by_bucket", [("metrics.json", None)], P2_EVALUATE),
        ("attention_maps", [("metrics.json", None), ("attention_maps.json", "sinusoidal|rotary")],
         "`python -m problem2.train --position sinusoidal` (or rotary), then " + P2_EVALUATE),
        ("learned_table_drift", [("metrics.json", "learned.table_drift")],
         "`python -m problem2.train --position learned`, then " + P2_EVALUATE),
    ],
    "problem3": [
        *[(name, [("metrics.json", "sweep")],
           "the sweep runs (`python -m problem3.train --norm ... --lr ... --warmup ...`), then "
           + P3_EVALUATE) for name in ("sweep_loss_curves", "sweep_grid")],
        *[(name, [("metrics.json", "main")], P3_SAMPLE + ", then " + P3_EVALUATE)
          for name in ("validity_curve", "by_length", "by_span")],
        ("properties", [("metrics.json", "main"), ("properties.json", None)],
         P3_SAMPLE + ", then " + P3_EVALUATE),
        ("sample_grid", [("metrics.json", "main"), ("samples_{main}.txt", None)],
         P3_SAMPLE + ", then " + P3_EVALUATE),
    ],
}


def has_entry(data, entry: str) -> bool:
    """Whether JSON data holds entry ("a.b": key b of key a; "a|b": either), not empty."""
    if "|" in entry:
        return any(has_entry(data, one) for one in entry.split("|"))
    for key in entry.split("."):
        if not isinstance(data, dict) or not data.get(key):
            return False
        data = data[key]
    return True


def why_skipped(input_dir: Path, needs: list, writer: str) -> str:
    """What a figure that was not drawn lacks, and what writes it (one line)."""
    for name, entry in needs:
        if "{main}" in name:  # the sample file of metrics.json's main run
            main = read_quietly(input_dir / "metrics.json").get("main") or {}
            name = name.replace("{main}", str(main.get("run", "*")))
        found = [path for path in input_dir.glob(name) if not path.name.endswith(".partial.json")]
        if not found:
            return f"{input_dir / name} not found: run {writer}"
        if entry is not None and not has_entry(read_quietly(found[0]), entry):
            return f"{found[0]} has no {spelled(entry)} entry: run {writer}"
    return "its results hold nothing to draw"


def spelled(entry: str) -> str:
    """'"main"', '"table_drift" of "learned"', '"sinusoidal" or "rotary"'."""
    if "|" in entry:
        return " or ".join(spelled(one) for one in entry.split("|"))
    return " of ".join(f'"{key}"' for key in reversed(entry.split(".")))


def read_quietly(path: Path) -> dict:
    """A JSON file's object, or {} (the figures themselves have read or refused it)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def skipped(target: str, input_dir: Path, paths: list[Path]) -> list[str]:
    """'skipped NAME.png: why' for each figure of the target that was not drawn."""
    drawn = [path.stem for path in paths]
    return [f"skipped {name.replace('*', '{run}')}.png: {why_skipped(input_dir, needs, writer)}"
            for name, needs, writer in FIGURES[target]
            if not fnmatch.filter(drawn, name)]


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
    for line in skipped(args.target, input_dir, paths):
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
