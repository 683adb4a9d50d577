"""Figures of Problem 1 (the addition transformer), drawn from the committed results only:
the training logs, metrics.json and attention_maps.json of problem1/results/.

Students: given; figures only, you need not read it.

    python provided/visualize.py problem1
"""

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from provided.plots.style import (
    half_up,
    legend_below,
    range_bar,
    read_bands,
    save_figure,
    seed_range,
)
from provided.results import read_json

ORDERS = ("forward", "reversed")
SIZES = (1000, 2000, 4000)
SIZE_COLORS = {1000: "tab:orange", 2000: "tab:green", 4000: "tab:blue"}
ORDER_STYLES = {"forward": "-", "reversed": "--"}
ORDER_COLORS = {"forward": "tab:blue", "reversed": "tab:orange"}
SOURCE_LABELS = ["a2", "a1", "a0", "+", "b2", "b1", "b0"]
PLACES = {0: "1s", 1: "10s", 2: "100s", 3: "1000s"}


def output_labels(order: str) -> list[str]:
    """Row labels of a cross-attention map: output step j and the place of its digit."""
    places = [3, 2, 1, 0] if order == "forward" else [0, 1, 2, 3]
    return [f"j={j}: s{p} ({PLACES[p]})" for j, p in enumerate(places)]


def training_logs(results_dir: Path) -> dict:
    """{(digit_order, train_size): training log} of the finished runs in results_dir, keyed
    by each log's saved config, so that the figures never spell a run's name."""
    logs = {}
    for path in sorted(results_dir.glob("training_log_*.json")):
        if not path.name.endswith(".partial.json"):  # a run still training
            log = read_json(path)
            logs[log["config"]["digit_order"], log["config"]["train_size"]] = log
    return logs


def validation_curves(logs: dict, out_dir: Path):
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    drawn = False
    for order in ORDERS:
        for size in SIZES:
            if (order, size) not in logs:
                continue
            log = logs[order, size]["log"]
            ax.plot([p["step"] for p in log], [p["val_exact_match"] for p in log],
                    ORDER_STYLES[order], color=SIZE_COLORS[size], label=f"{order}, n={size}")
            drawn = True
    if not drawn:
        plt.close(fig)
        return None
    ax.axhline(0.95, color="gray", lw=1, ls=":",
               label="0.95: steps_to_95 is the first step at or above it")
    ax.set(xlabel="training step (optimizer updates)",
           ylabel="validation exact match\n(fraction of the validation split, greedy "
                  "decoding)",
           title="Validation exact match during training, seed 0 (checked every 50 steps)",
           ylim=(-0.02, 1.02))
    legend_below(ax, ncol=3)  # below the axes: it hides no curve
    return save_figure(fig, out_dir, "val_exact_match")


def test_vs_train_size(metrics: dict, names: dict, out_dir: Path, bands: dict | None = None):
    """Test exact match and steps_to_95 against training size: seed 0's points, and when
    reference_bands.json holds more seeds, bars over their range (min to max). names maps
    (digit_order, train_size) to the run's name, the key of metrics and bands."""
    bands = bands or {}
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(10.5, 4))
    fig.subplots_adjust(wspace=0.38)
    for order in ORDERS:
        sizes = [s for s in SIZES if names.get((order, s)) in metrics]
        if not sizes:
            continue
        runs = [metrics[names[order, s]] for s in sizes]
        ax.plot(sizes, [r["test_exact_match"] for r in runs], ORDER_STYLES[order], marker="o",
                color=ORDER_COLORS[order], label=order)
        for size, r in zip(sizes, runs):
            run = names[order, size]
            range_bar(ax, size, r["test_exact_match"],
                      seed_range(bands, run, "test_exact_match"), ORDER_COLORS[order])
            range_bar(ax2, size, r["steps_to_95"], seed_range(bands, run, "steps_to_95"),
                      ORDER_COLORS[order])
        reached = [(s, r["steps_to_95"]) for s, r in zip(sizes, runs) if r["steps_to_95"]]
        if reached:
            ax2.plot(*zip(*reached), ORDER_STYLES[order], marker="o", color=ORDER_COLORS[order],
                     label=f"{order} (reached 0.95)")
        for size, step in reached:  # how many seeds reach 0.95 at all, where not every one
            band = bands.get(names[order, size], {}).get("steps_to_95", {})
            if band.get("missing"):
                total = band["n_seeds"] + len(band["missing"])
                ax2.annotate(f"{band['n_seeds']} of {total} seeds\nreach 0.95", (size, step),
                             textcoords="offset points", xytext=(8, -4), fontsize=8,
                             color=ORDER_COLORS[order])
        never = [s for s, r in zip(sizes, runs) if r["steps_to_95"] is None]
        if never:  # no point to plot: a marker on the x axis, named in the legend
            ax2.plot(never, [0.0] * len(never), linestyle="none", marker="X", markersize=10,
                     color=ORDER_COLORS[order], clip_on=False, zorder=5,
                     transform=ax2.get_xaxis_transform(),
                     label=f"{order}: never reached 0.95 in 2,400 steps "
                           f"(n={', '.join(map(str, never))})")
    seeds = max((b["n_seeds"] for run in bands.values() for b in run.values()), default=1)
    spread = f"\n(seed 0; bars: range over {seeds} seeds)" if seeds > 1 else ""
    ax.set(xscale="log", xlabel="training pairs (log scale)",
           ylabel="test exact match (fraction of the test pairs)",
           title="Test exact match by training size" + spread, ylim=(-0.02, 1.02))
    ax2.set(xscale="log", xlabel="training pairs (log scale)",
            ylabel="steps to 0.95 validation exact match\n(training steps)",
            title="steps_to_95 (a cross on the x axis: never reached)"
                  + ("\n(seed 0; bars: range over the seeds that reach 0.95)" if spread else ""))
    for a in (ax, ax2):
        a.set_xticks(SIZES, [str(s) for s in SIZES])
        a.minorticks_off()
    for a in (ax, ax2):
        if a.get_legend_handles_labels()[0]:
            legend_below(a, ncol=1)
    return save_figure(fig, out_dir, "test_vs_train_size")


def attention_grid(maps: np.ndarray, rows: list[str], title: str, out_dir: Path, name: str,
                   layer_name: str, row_title: str):
    """maps [layers, heads, T_q, 7]: one panel per layer and head, shared colour scale."""
    layers, heads = maps.shape[:2]
    fig, axes = plt.subplots(layers, heads, figsize=(3.1 * heads, 0.45 * len(rows) * layers + 1.6),
                             squeeze=False, constrained_layout=True)
    for l in range(layers):
        for h in range(heads):
            ax = axes[l, h]
            image = ax.imshow(maps[l, h], vmin=0, vmax=1, cmap="viridis", aspect="auto")
            for i in range(maps.shape[2]):
                for k in range(maps.shape[3]):
                    value = maps[l, h, i, k]
                    if value >= 0.1:
                        ax.text(k, i, f"{value:.2f}", ha="center", va="center", fontsize=6,
                                color="black" if value > 0.6 else "white")
            ax.set_xticks(range(7), SOURCE_LABELS)
            ax.set_yticks(range(len(rows)), rows if h == 0 else [""] * len(rows))
            ax.grid(False)
            ax.set_title(f"{layer_name} {l}, head {h}", fontsize=9)
            if l == layers - 1:
                ax.set_xlabel("source position (key)")
            if h == 0:
                ax.set_ylabel(row_title)
    fig.colorbar(image, ax=axes, shrink=0.8, label="mean attention weight")
    fig.suptitle(title)
    return save_figure(fig, out_dir, name)


def attention_figures(maps: dict, out_dir: Path) -> list[Path]:
    paths = []
    for run, run_maps in maps.items():
        order = run.split("_n")[0]
        paths.append(attention_grid(
            np.array(run_maps["decoder_cross"]), output_labels(order),
            f"{run}, seed 0: mean cross-attention over the test split (decoder fed its own "
            "predictions)",
            out_dir, f"cross_attention_{run}", "decoder layer", "output step (query)"))
        paths.append(attention_grid(
            np.array(run_maps["encoder"]), SOURCE_LABELS,
            f"{run}, seed 0: mean encoder self-attention over the test split",
            out_dir, f"encoder_attention_{run}", "encoder layer", "source position (query)"))
    return paths


def ablation_figure(ablation: dict, metrics: dict, out_dir: Path):
    runs = list(ablation)
    fig, axes = plt.subplots(1, len(runs), figsize=(4.6 * len(runs), 4.2), squeeze=False,
                             constrained_layout=True)
    for ax, run in zip(axes[0], runs):
        # head names 'enc0.self.h2': one row per attention, in the order evaluate.py wrote them
        attentions = list(dict.fromkeys(name.rsplit(".", 1)[0] for name in ablation[run]))
        table = np.array([[ablation[run][f"{a}.h{h}"] for h in range(4)] for a in attentions])
        image = ax.imshow(table, vmin=0, vmax=1, cmap="magma", aspect="auto")
        for i in range(table.shape[0]):
            for h in range(4):
                ax.text(h, i, half_up(table[i, h], 3), ha="center", va="center", fontsize=8,
                        color="black" if table[i, h] > 0.5 else "white")
        ax.set_xticks(range(4), [f"h{h}" for h in range(4)])
        ax.set_yticks(range(len(attentions)), attentions)
        ax.set_ylabel("attention (layer.kind)")
        ax.grid(False)
        full = metrics.get(run, {}).get("test_exact_match")
        ax.set_title(f"{run} (all heads: {half_up(full, 3)})" if full is not None else run,
                     fontsize=10)
        ax.set_xlabel("head")
    fig.colorbar(image, ax=axes, shrink=0.8, label="test exact match with the head removed")
    fig.suptitle("Single-head ablation, seed 0")
    return save_figure(fig, out_dir, "ablation")


def pruning_figure(pruning: dict, out_dir: Path):
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    for run, curve in pruning.items():
        removed = [len(p["removed"]) for p in curve]
        order = run.split("_n")[0]
        ax.plot(removed, [p["test_exact_match"] for p in curve], ORDER_STYLES.get(order, "-"),
                color=ORDER_COLORS.get(order), marker="o", ms=3, label=run)
    ax.axhline(0.95, color="gray", lw=1, ls=":", label="0.95 test exact match")
    ax.set(xlabel="heads removed (of 24), greedily", ylabel="test exact match (fraction of "
           "the test pairs)", title="Greedy head pruning, seed 0", ylim=(-0.02, 1.02),
           xlim=(-0.5, 24.5), xticks=range(0, 25, 2))
    top = ax.secondary_xaxis("top", functions=(lambda x: 24 - x, lambda x: 24 - x))
    top.set_xticks(range(0, 25, 4))  # heads left: 0 to 24, never 25 or -1
    top.set_xlabel("heads left")
    ax.legend(loc="lower left")
    return save_figure(fig, out_dir, "pruning")


def make_figures(results_dir: Path, out_dir: Path) -> list[Path]:
    results_dir, out_dir = Path(results_dir), Path(out_dir)
    logs = training_logs(results_dir)
    paths = [validation_curves(logs, out_dir)]
    metrics_path = results_dir / "metrics.json"
    if metrics_path.exists():
        metrics = read_json(metrics_path)
        names = {setting: log["run"] for setting, log in logs.items()}
        paths.append(test_vs_train_size(metrics, names, out_dir, read_bands(results_dir)))
        if metrics.get("ablation"):
            paths.append(ablation_figure(metrics["ablation"], metrics, out_dir))
        if metrics.get("pruning"):
            paths.append(pruning_figure(metrics["pruning"], out_dir))
    maps_path = results_dir / "attention_maps.json"
    if maps_path.exists():
        paths.extend(attention_figures(read_json(maps_path), out_dir))
    return [p for p in paths if p is not None]
