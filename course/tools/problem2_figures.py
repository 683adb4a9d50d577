"""Problem 2: the figure of the report's analyses, drawn from problem2/results/analysis.json
(course/tools/problem2_analysis.py).

    python -m course.tools.problem2_figures [--results_dir DIR] [--out_dir DIR]
    (make problem2-analysis)

    accuracy_by_position.png  above, test accuracy at each position over 0..127 for the four
                              schemes, with the bag-of-tokens ceiling (the best accuracy
                              without position information) per 16-position bucket; below,
                              the evaluation-only length check: sinusoidal and rotary per
                              64-position bucket on fresh sequences of 512

The homework's own figures are provided/plots/problem2.py's (provided/visualize.py), whose
colours, markers and training-length shading this figure shares.

Instructors only (course/tools/): evidence for the report, not part of the homework.
"""

from pathlib import Path

import matplotlib
import matplotlib.pyplot as plt
import numpy as np

from provided.common import ArgumentParser, HomeworkError, results_dir, script
from provided.plots.problem2 import (
    BUCKET,
    COLORS,
    MARKERS,
    OFFSETS,
    SCHEMES,
    TRAIN_LENGTH,
    VOCAB,
    mark_training_length,
    split_at,
)
from provided.plots.style import legend_right, save_figure
from provided.results import read_json


def per_position_panel(ax, analysis: dict):
    """Test split, positions 0..127: each scheme's accuracy at every position, and the
    bag-of-tokens ceiling per 16-position bucket (no line crosses the training length)."""
    ax.set_xlim(0, 128)
    for scheme in SCHEMES:
        if scheme not in analysis:
            continue
        accuracy = [np.nan if a is None else a for a in analysis[scheme]["per_position"]]
        for i, (x, y) in enumerate(split_at(range(len(accuracy)), accuracy, TRAIN_LENGTH)):
            ax.plot(x, y, color=COLORS[scheme], linewidth=1.1, zorder=3,
                    label=f"{scheme} (per position)" if i == 0 else None)
    ceiling = analysis["bag_of_tokens_ceiling"]["buckets"]
    centers = [BUCKET * b + (BUCKET - 1) / 2 for b in range(len(ceiling))]
    for i, (x, y) in enumerate(split_at(centers, ceiling, TRAIN_LENGTH)):
        ax.plot(x, y, color="black", linestyle="--", linewidth=1.2, marker="x", markersize=7,
                zorder=4, label="best without position (bag of tokens), bucket of 16"
                if i == 0 else None)
    ax.axhline(1 / VOCAB, color="black", linestyle=":", linewidth=1, label="chance (1/16)")
    mark_training_length(ax, 0.62, "training length 64:\npositions 64-127 unseen\n(shaded)")
    ax.set_xticks(range(0, 129, BUCKET))
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("position in the 128-token test sequence (token index; targets start at 7)")
    ax.set_ylabel("accuracy (fraction of targets)")
    ax.set_title("Test split, sequences of 128: accuracy at each position (seed-0 models)",
                 fontsize=10)
    legend_right(ax)


def long_sequence_panel(ax, analysis: dict):
    """Evaluation-only check: fresh sequences of 512, accuracy per bucket (of 64)."""
    schemes = [s for s in SCHEMES if "long_sequences" in analysis.get(s, {})]
    first = analysis[schemes[0]]["long_sequences"]
    length = first["length"]
    ax.set_xlim(0, length)
    for scheme in schemes:
        entry = analysis[scheme]["long_sequences"]
        size = entry["length"] // len(entry["buckets"])
        buckets = [np.nan if b is None else b for b in entry["buckets"]]
        centers = [size * b + (size - 1) / 2 + OFFSETS[scheme] * size / BUCKET
                   for b in range(len(buckets))]
        for i, (x, y) in enumerate(split_at(centers, buckets, TRAIN_LENGTH)):
            ax.plot(x, y, color=COLORS[scheme], linewidth=1.6, zorder=4, **MARKERS[scheme],
                    label=f"{scheme} (bucket of {size})" if i == 0 else None)
        for x, y in zip(centers, buckets):
            if not np.isnan(y):
                ax.annotate(f"{y:.3f}", (x, y), textcoords="offset points", fontsize=7.5,
                            xytext=(0, 7 if scheme == "rotary" else -12), ha="center",
                            color=COLORS[scheme], zorder=6)
    ax.axhline(1 / VOCAB, color="black", linestyle=":", linewidth=1, label="chance (1/16)")
    ax.axvline(128 - 0.5, color="black", linestyle="-.", linewidth=1,
               label="end of the 128-position test split")
    mark_training_length(ax, 0.55, "training\nlength 64")
    ax.set_xticks(range(0, length + 1, 64))
    ax.set_ylim(-0.02, 1.08)
    ax.set_xlabel(f"position in a fresh {length}-token sequence (token index)")
    ax.set_ylabel("accuracy (fraction of targets)")
    ax.set_title(f"Evaluation-only length check: {first['num_sequences']} fresh uniform "
                 f"sequences of {length} (data seed {first['seed']}),\nthe seed-0 models' weights, "
                 f"each model rebuilt with max_len {length} (learned skipped: its table has "
                 "128 rows)", fontsize=10)
    legend_right(ax)


def accuracy_by_position(analysis: dict, out_dir: Path) -> Path:
    fig, axes = plt.subplots(2, 1, figsize=(9.5, 8.6))
    per_position_panel(axes[0], analysis)
    long_sequence_panel(axes[1], analysis)
    fig.subplots_adjust(hspace=0.45)
    fig.suptitle("Offset retrieval (k = 7): accuracy by position, and at length 512", y=0.95)
    return save_figure(fig, out_dir, "accuracy_by_position")


@script
def main(argv=None) -> int:
    parser = ArgumentParser(__doc__)
    parser.add_argument("--results_dir", type=Path, default=results_dir("problem2"),
                        help="the folder of analysis.json (default: %(default)s)")
    parser.add_argument("--out_dir", type=Path, default=None,
                        help="where the PNG goes (default: RESULTS_DIR/figures)")
    args = parser.parse_args(argv)
    path = args.results_dir / "analysis.json"
    if not path.exists():
        raise HomeworkError(f"{path} not found: run `python -m course.tools.problem2_analysis "
                            f"--results_dir {args.results_dir}` first")
    matplotlib.use("Agg")
    try:
        figure = accuracy_by_position(read_json(path), args.out_dir or args.results_dir / "figures")
    except (KeyError, IndexError, TypeError) as err:  # valid JSON of another shape
        raise HomeworkError(f"{path} lacks what the figure needs ({type(err).__name__}: {err}): "
                            "run `python -m course.tools.problem2_analysis` again") from None
    print(f"wrote {figure}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
