"""Figures of Problem 2, drawn from problem2/results/metrics.json and attention_maps.json.

    accuracy_by_bucket.png   test accuracy per 16-position bucket over 0..127, four schemes,
                             the training length marked
    attention_maps.png       one test sequence's attention weights under the sinusoidal and
                             rotary models, positions 0-31 and 96-127 side by side
    learned_table_drift.png  distance of each learned-table row from its initial value
"""

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from provided.common import read_json
from provided.plots.style import save_figure

SCHEMES = ("none", "learned", "sinusoidal", "rotary")
COLORS = {"none": "tab:gray", "learned": "tab:blue", "sinusoidal": "tab:orange",
          "rotary": "tab:green"}
TRAIN_LENGTH, BUCKET, VOCAB = 64, 16, 16


def accuracy_by_bucket(metrics: dict, out_dir: Path) -> Path:
    fig, ax = plt.subplots(figsize=(8.5, 4.4))
    for scheme in SCHEMES:
        if scheme not in metrics:
            continue
        buckets = metrics[scheme]["buckets"]
        centers = [BUCKET * b + (BUCKET - 1) / 2 for b in range(len(buckets))]
        ax.plot(centers, buckets, marker="o", color=COLORS[scheme], label=f"{scheme} (bucket)")
        per_position = [np.nan if a is None else a for a in metrics[scheme]["per_position"]]
        ax.plot(range(len(per_position)), per_position, color=COLORS[scheme], alpha=0.3,
                linewidth=0.8)
    if "bag_of_tokens_ceiling" in metrics:
        buckets = metrics["bag_of_tokens_ceiling"]["buckets"]
        centers = [BUCKET * b + (BUCKET - 1) / 2 for b in range(len(buckets))]
        ax.plot(centers, buckets, color="black", linestyle="--", linewidth=1, marker="x",
                label="best without position\n(bag of tokens)")
    ax.axvline(TRAIN_LENGTH - 0.5, color="black", linewidth=1.5)
    ax.text(TRAIN_LENGTH + 1, 0.62, "training length 64 →\nunseen positions",
            va="center", fontsize=9)
    ax.axhline(1 / VOCAB, color="black", linestyle=":", linewidth=1, label="chance (1/16)")
    ax.set_xticks(range(0, 129, BUCKET))
    ax.set_xlim(0, 128)
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("position in the test sequence (buckets of 16; targets start at 7)")
    ax.set_ylabel("accuracy (fraction of targets)")
    ax.set_title("Offset retrieval (k = 7): accuracy by position\n"
                 "markers: per 16-position bucket; faint lines: per position")
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5))
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
    fig.suptitle(f"Attention weights of test sequence {maps['sequence_index']} "
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
    ax.set_title("Learned table: how far each row moved in training")
    ax.legend()
    return save_figure(fig, out_dir, "learned_table_drift")


def make_figures(results_dir: Path, out_dir: Path) -> list[Path]:
    metrics = read_json(Path(results_dir) / "metrics.json")
    paths = [accuracy_by_bucket(metrics, out_dir)]
    maps_path = Path(results_dir) / "attention_maps.json"
    if maps_path.exists():
        maps = read_json(maps_path)
        if "sinusoidal" in maps or "rotary" in maps:
            paths.append(attention_maps(maps, out_dir))
    if "table_drift" in metrics.get("learned", {}):
        paths.append(learned_table_drift(metrics["learned"]["table_drift"], out_dir))
    return paths
