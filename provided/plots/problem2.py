"""Figures of Problem 2, drawn from problem2/results/metrics.json and attention_maps.json.

Students: given; figures only, you need not read it.

    accuracy_by_bucket.png   test accuracy per 16-position bucket over 0..127, four schemes,
                             the training length marked (no line crosses it), with the range
                             over the seeds beyond 64 when reference_bands.json has them
    attention_maps.png       one test sequence's attention weights under the sinusoidal and
                             rotary models, positions 0-31 and 96-127 side by side
    learned_table_drift.png  distance of each learned-table row from its initial value
"""

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from provided.plots.style import legend_right, read_bands, save_figure
from provided.results import read_json

SCHEMES = ("none", "learned", "sinusoidal", "rotary")
COLORS = {"none": "tab:gray", "learned": "tab:blue", "sinusoidal": "tab:orange",
          "rotary": "tab:green"}
MARKERS = {  # distinct shapes; 'none': large open squares
    "none": {"marker": "s", "markersize": 8, "markerfacecolor": "white",
             "markeredgewidth": 1.8},
    "learned": {"marker": "o", "markersize": 6},
    "sinusoidal": {"marker": "D", "markersize": 5.5},
    "rotary": {"marker": "^", "markersize": 6.5},
}
OFFSETS = {"none": 0.0, "learned": -2.5, "sinusoidal": 0.0, "rotary": 2.5}  # within a bucket
TRAIN_LENGTH, BUCKET, VOCAB = 64, 16, 16


def split_at(xs, ys, boundary: float):
    """(xs, ys) as two segments, before and from boundary, so no line joins them."""
    xs, ys = np.asarray(xs, dtype=float), np.asarray(ys, dtype=float)
    return [(xs[xs < boundary], ys[xs < boundary]), (xs[xs >= boundary], ys[xs >= boundary])]


def mark_training_length(ax, y: float, text: str):
    """Shade the positions no training sequence reaches and label the boundary."""
    ax.axvspan(TRAIN_LENGTH - 0.5, ax.get_xlim()[1], color="0.93", zorder=0, linewidth=0)
    ax.axvline(TRAIN_LENGTH - 0.5, color="black", linewidth=1.5, zorder=1)
    ax.text(TRAIN_LENGTH + 2, y, text, va="center", fontsize=8.5,
            bbox={"boxstyle": "round,pad=0.25", "facecolor": "white", "edgecolor": "none",
                  "alpha": 0.85}, zorder=6)


BEYOND_BUCKETS = ("64-79", "80-95", "96-111", "112-127")  # the reference bands' bucket names


def bucket_panel(ax, metrics: dict, bands: dict):
    """Test split, positions 0..127: bucket markers (lines only within the training length
    and within the unseen positions, never across), and beyond 64 bars over the seeds' range
    when reference_bands.json holds several seeds."""
    ax.set_xlim(0, 128)
    for scheme in SCHEMES:
        if scheme not in metrics:
            continue
        buckets = [np.nan if b is None else b for b in metrics[scheme]["buckets"]]
        centers = [BUCKET * b + (BUCKET - 1) / 2 + OFFSETS[scheme] for b in range(len(buckets))]
        for i, (x, y) in enumerate(split_at(centers, buckets, TRAIN_LENGTH)):
            ax.plot(x, y, color=COLORS[scheme], linewidth=1.6, zorder=5, **MARKERS[scheme],
                    label=f"{scheme} (bucket of 16)" if i == 0 else None)
        for name, x, y in zip(BEYOND_BUCKETS, centers[TRAIN_LENGTH // BUCKET:],
                              buckets[TRAIN_LENGTH // BUCKET:]):
            band = bands.get(scheme, {}).get(f"bucket_{name}")
            if band and band["n_seeds"] > 1 and not np.isnan(y):
                ax.errorbar([x], [y], yerr=[[max(y - band["min"], 0)], [max(band["max"] - y, 0)]],
                            fmt="none", ecolor=COLORS[scheme], capsize=3, alpha=0.8, zorder=4)
    ax.axhline(1 / VOCAB, color="black", linestyle=":", linewidth=1, label="chance (1/16)")
    mark_training_length(ax, 0.62, "training length 64:\npositions 64-127 unseen\n"
                                   "(shaded)")
    ax.set_xticks(range(0, 129, BUCKET))
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("position in the 128-token test sequence (token index; targets start at 7)")
    ax.set_ylabel("accuracy (fraction of targets)")
    seeds = max((b["n_seeds"] for run in bands.values() for b in run.values()), default=1)
    ax.set_title("Test split, sequences of 128: markers per 16-position bucket (nudged "
                 "apart within it)"
                 + (f";\nseed 0, bars beyond 64: range over {seeds} seeds" if seeds > 1
                    else ", one seed"),
                 fontsize=10)
    legend_right(ax)


def accuracy_by_bucket(metrics: dict, out_dir: Path, bands: dict | None = None) -> Path:
    fig, ax = plt.subplots(figsize=(9.5, 4.4))
    bucket_panel(ax, metrics, bands or {})
    fig.suptitle("Offset retrieval (k = 7): accuracy per 16-position bucket", y=1.04)
    return save_figure(fig, out_dir, "accuracy_by_bucket")


def attention_maps(maps: dict, out_dir: Path) -> Path:
    schemes = [s for s in ("sinusoidal", "rotary") if s in maps]
    windows = list(maps[schemes[0]])
    k = maps["k"]
    fig, axes = plt.subplots(len(schemes), len(windows), squeeze=False, layout="constrained",
                             figsize=(4.3 * len(windows) + 1, 4.0 * len(schemes)))
    for row, scheme in enumerate(schemes):
        for col, window in enumerate(windows):
            ax = axes[row, col]
            start, end = (int(v) for v in window.split("-"))  # inclusive
            image = ax.imshow(np.array(maps[scheme][window]), cmap="viridis", vmin=0, vmax=1,
                              extent=(start - 0.5, end + 0.5, end + 0.5, start - 0.5),
                              interpolation="nearest")
            queries = np.arange(start + k, end + 1)
            ax.plot(queries - k, queries, color="white", linestyle=":", linewidth=0.8,
                    alpha=0.7)
            ax.set_xlim(start - 0.5, end + 0.5)
            ax.set_ylim(end + 0.5, start - 0.5)
            ax.set_title(f"{scheme}, positions {start}-{end}")
            ax.set_xlabel("key position")
            ax.set_ylabel("query position")
            ax.grid(False)
    fig.colorbar(image, ax=axes, shrink=0.8, label="attention weight")
    fig.suptitle(f"Attention weights of test sequence {maps['sequence_index']}, seed-0 models "
                 f"(dotted: the target key i − {k}; keys outside a window not shown)")
    return save_figure(fig, out_dir, "attention_maps")


def learned_table_drift(drift: dict, out_dir: Path) -> Path:
    distance = drift["row_distance"]
    fig, ax = plt.subplots(figsize=(7, 3.6))
    ax.bar(range(len(distance)), distance, width=1.0, color=COLORS["learned"])
    ax.axvline(TRAIN_LENGTH - 0.5, color="black", linestyle="--", linewidth=1,
               label="training length (64)")
    ax.set_xlim(-0.5, len(distance) - 0.5)
    ax.set_xlabel("row of the learned position table (position)")
    ax.set_ylabel("L2 distance from initial row")
    unseen = distance[TRAIN_LENGTH:]
    ax.text(TRAIN_LENGTH + 2, 0.5 * max(distance),
            f"rows {TRAIN_LENGTH}-{len(distance) - 1}: max distance {max(unseen):g}\n"
            "(never in a training sequence)", fontsize=9)
    ax.set_title("Learned table: how far each row moved in training (seed 0)")
    ax.legend()
    return save_figure(fig, out_dir, "learned_table_drift")


def make_figures(results_dir: Path, out_dir: Path) -> list[Path]:
    if not (Path(results_dir) / "metrics.json").exists():
        return []  # nothing to draw: visualize.py says what to run first
    metrics = read_json(Path(results_dir) / "metrics.json")
    paths = [accuracy_by_bucket(metrics, out_dir, read_bands(results_dir))]
    maps_path = Path(results_dir) / "attention_maps.json"
    if maps_path.exists():
        maps = read_json(maps_path)
        if "sinusoidal" in maps or "rotary" in maps:
            paths.append(attention_maps(maps, out_dir))
    if "table_drift" in metrics.get("learned", {}):
        paths.append(learned_table_drift(metrics["learned"]["table_drift"], out_dir))
    return paths
