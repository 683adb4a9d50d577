"""Problem 3 figures, drawn from problem3/results: training logs, metrics.json,
properties.json and the sample file.

Students: given; figures only, you need not read it.
"""

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import ListedColormap, TwoSlopeNorm
from matplotlib.lines import Line2D
from matplotlib.ticker import FixedLocator, NullFormatter, NullLocator

from provided.plots.style import legend_right, range_bar, read_bands, save_figure, seed_range
from provided.results import read_json

THRESHOLD = 2.0
LR_COLORS = {0.001: "tab:blue", 0.01: "tab:orange", 0.03: "tab:red"}
WARMUP_STYLES = {0: "-", 500: "--"}
# validation points: warmup 0 filled circles, warmup 500 open squares
WARMUP_MARKERS = {0: {"marker": "o", "fillstyle": "full"},
                  500: {"marker": "s", "markerfacecolor": "white"}}
LOSS_TICKS = [0.6, 0.8, 1.0, 1.5, 2.0, 3.0, 4.0, 5.0]
Z95 = 1.959963984540054  # two-sided 95% normal quantile
OUTCOME_COLORS = {"valid": "tab:green", "well_formed_invalid": "tab:orange",
                  "ill_formed": "tab:red"}
OUTCOME_LABELS = {"valid": "valid (RDKit)", "well_formed_invalid": "well-formed, invalid",
                  "ill_formed": "ill-formed"}


def load_logs(results_dir: Path, runs: list[str]) -> list[dict]:
    """The training logs of the named runs."""
    return [read_json(results_dir / f"training_log_{run}.json") for run in runs]


def sweep_curves(logs: list[dict], out_dir: Path, unigram: float | None = None) -> Path:
    """Training loss (lines) and validation loss (markers: filled circles for warmup 0, open
    squares for warmup 500) per run, one panel per norm, and the unigram entropy (the loss
    of a model that ignores the context) when given. A run whose loss became non-finite
    gets a cross at the top edge at that step, and the legend says so only when one did."""
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5), sharey=True)
    any_diverged = False
    for ax, norm in zip(axes, ("pre", "post")):
        for log in (entry for entry in logs if entry["config"]["norm"] == norm):
            lr, warmup = log["config"]["lr"], log["config"]["warmup"]
            color, style = LR_COLORS.get(lr, "black"), WARMUP_STYLES.get(warmup, ":")
            steps = [r["step"] for r in log["log"]]
            loss = [np.nan if r["train_loss"] is None else r["train_loss"] for r in log["log"]]
            ax.plot(steps, loss, color=color, linestyle=style, label=f"lr {lr}, warmup {warmup}")
            val = [(r["step"], r["val_loss"]) for r in log["val"]]
            marker = WARMUP_MARKERS.get(warmup, {"marker": "^"})
            ax.plot([s for s, v in val if v is not None], [v for s, v in val if v is not None],
                    linestyle="none", color=color, markersize=5, markeredgewidth=1.3,
                    zorder=4, **marker)
            diverged = [r["step"] for r in log["log"] if r["train_loss"] is None]
            if diverged:  # non-finite loss: marked at the top edge so it stays visible
                any_diverged = True
                ax.plot(diverged[0], 1, marker="x", color=color, markersize=10, clip_on=False,
                        markeredgewidth=2, transform=ax.get_xaxis_transform())
        ax.axhline(THRESHOLD, color="gray", linewidth=1, linestyle=":")
        if unigram is not None:
            ax.axhline(unigram, color="tab:brown", linewidth=1, linestyle="-.")
            ax.text(0.01, unigram, f"unigram entropy {unigram:.3f}: context ignored",
                    va="bottom", ha="left", color="tab:brown", fontsize=8,
                    transform=ax.get_yaxis_transform())
        ax.text(0.99, THRESHOLD, "threshold 2.0: a run trains if its final validation loss "
                "is below", va="bottom", ha="right", color="dimgray", fontsize=8,
                transform=ax.get_yaxis_transform())
        ax.set_yscale("log")
        ax.yaxis.set_major_locator(FixedLocator(LOSS_TICKS))
        ax.yaxis.set_major_formatter(lambda y, _: f"{y:g}")
        ax.yaxis.set_minor_locator(NullLocator())
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("training step (optimizer updates)")
        ax.set_title(f"{norm}-LN: training loss (lines), validation loss (markers)")
    axes[0].set_ylabel("cross-entropy per token (nats, log scale)")
    handles, labels = max((ax.get_legend_handles_labels() for ax in axes), key=lambda h: len(h[1]))
    if handles:  # one legend for both panels, below them, so that no curve is hidden
        keys = [Line2D([], [], color="dimgray", linestyle="none", markersize=6,
                       markeredgewidth=1.3, **WARMUP_MARKERS[w],
                       label=f"validation loss, warmup {w}") for w in WARMUP_MARKERS]
        if any_diverged:
            keys.append(Line2D([], [], color="dimgray", linestyle="none", marker="x",
                               markersize=9, markeredgewidth=2,
                               label="loss became non-finite (top edge)"))
        handles, labels = handles + keys, labels + [k.get_label() for k in keys]
        fig.legend(handles, labels, loc="lower center", ncol=4, fontsize=9,
                   bbox_to_anchor=(0.5, -0.14))
    steps = max((r["step"] for log in logs for r in log["log"]), default=0)
    fig.suptitle(f"Learning-rate x warmup sweep, {steps:,} steps, seed 0"
                 + (" (x at the top edge: the loss became non-finite)" if any_diverged else
                    " (no run's loss became non-finite)"))
    return save_figure(fig, out_dir, "sweep_loss_curves")


def loss_colormap() -> ListedColormap:
    """Greens below the threshold (dark = low loss, pale near 2.0), reds above it (pale just
    above 2.0, dark = high loss): the hue changes exactly at the threshold."""
    greens = plt.get_cmap("Greens")(np.linspace(0.85, 0.25, 128))
    reds = plt.get_cmap("Reds")(np.linspace(0.35, 0.9, 128))
    return ListedColormap(np.vstack([greens, reds]), name="loss_threshold").with_extremes(
        bad="lightgrey")


def seed_line(bands: dict, cell: str) -> str:
    """'k/n seeds train' and 'loss a-b' (the range of the seeds' final losses) for a cell
    that reference_bands.json holds with several seeds, else ''."""
    trains = bands.get(cell, {}).get("trains")
    if not trains or trains["n_seeds"] < 2:
        return ""
    loss = bands[cell]["final_val_loss"]
    digits = 2 if loss["max"] - loss["min"] >= 0.05 else 3  # never "0.67-0.67"
    spread = (f"\nloss {loss['min']:.{digits}f}-{loss['max']:.{digits}f}"
              if loss["n_seeds"] > 1 else "")
    return f"\n{int(sum(trains['values']))}/{trains['n_seeds']} seeds train{spread}"


def sweep_grid(sweep: list[dict], out_dir: Path, bands: dict | None = None) -> Path:
    """Final validation loss over (warmup, lr), one panel per norm, coloured by the loss on a
    scale that turns from green to red at the threshold 2.0; diverged runs dark red, runs
    not (yet) present grey. Cells with several seeds in bands also say how many train and
    the range of their final losses (the colour stays seed 0's)."""
    bands = bands or {}
    lrs, warmups = sorted({e["lr"] for e in sweep}), sorted({e["warmup"] for e in sweep})
    losses = [e["final_val_loss"] for e in sweep if e["final_val_loss"] is not None]
    norm_scale = TwoSlopeNorm(vcenter=THRESHOLD, vmin=min([0.5, *losses]),
                              vmax=max([5.0, *losses]))
    cmap = loss_colormap()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.4), layout="constrained")
    for ax, norm in zip(axes, ("pre", "post")):
        runs = {(e["warmup"], e["lr"]): e for e in sweep if e["norm"] == norm}
        values = np.full((len(warmups), len(lrs)), np.nan)  # nan: absent
        for i, warmup in enumerate(warmups):
            for j, lr in enumerate(lrs):
                e = runs.get((warmup, lr))
                if e is None:
                    ax.text(j, i, "not run", ha="center", va="center", color="dimgrey")
                    continue
                loss = e["final_val_loss"]
                values[i, j] = norm_scale.vmax if loss is None else loss
                shade = norm_scale(values[i, j])
                text = "diverged" if loss is None else f"{loss:.2f}"
                seeds = seed_line(bands, e["run"].rsplit("_s", 1)[0])
                ax.text(j, i, f"{text}\n{'trains' if e['trains'] else 'FAILS'}{seeds}",
                        ha="center", va="center", fontsize=10, fontweight="bold",
                        color="white" if shade < 0.15 or shade > 0.8 else "black")
        image = ax.imshow(np.ma.masked_invalid(values), cmap=cmap, norm=norm_scale,
                          aspect="auto")
        ax.set_xticks(range(len(lrs)), [str(lr) for lr in lrs])
        ax.set_yticks(range(len(warmups)), [str(w) for w in warmups])
        ax.set_xlabel("peak learning rate")
        ax.set_ylabel("warmup steps")
        ax.set_title(f"{norm}-LN: final validation loss (nats/token)")
        ax.grid(False)
    bar = fig.colorbar(image, ax=axes, shrink=0.9, label="final validation loss (nats/token)")
    bar.ax.axhline(THRESHOLD, color="black", linewidth=2)
    bar.set_ticks(sorted({norm_scale.vmin, 1.0, 1.5, THRESHOLD, 3.0, 4.0, norm_scale.vmax}))
    bar.ax.yaxis.set_major_formatter(lambda y, _: f"{y:g}")
    seeded = any(seed_line(bands, e["run"].rsplit("_s", 1)[0]) for e in sweep)
    fig.suptitle(f"Sweep verdicts: a run trains if its final validation loss < {THRESHOLD} "
                 "(greens below, reds above)"
                 + ("\nseed 0's loss and verdict; seeded cells add k/n seeds that train and "
                    "the seeds' loss range" if seeded else ""))
    return save_figure(fig, out_dir, "sweep_grid")


VALIDITY_SERIES = [  # (key, label, style): distinct markers and lines, nudged apart in x
    ("well_formed", "well-formed", {"marker": "o", "linestyle": "-", "color": "tab:blue"}),
    ("validity", "RDKit-valid", {"marker": "D", "linestyle": "-", "color": "tab:orange"}),
    ("uniqueness", "unique (of valid)", {"marker": "s", "linestyle": "--", "color": "tab:green",
                                         "markerfacecolor": "white", "markersize": 9,
                                         "markeredgewidth": 1.8}),
    ("novelty", "novel (of unique)", {"marker": "^", "linestyle": ":", "color": "tab:red",
                                      "markersize": 6}),
]


def validity_curve(main: dict, out_dir: Path, bands: dict | None = None) -> Path:
    """The four rates at every checkpoint of the long run (seed 0); where reference_bands.json
    holds the run with several seeds ("main"), a bar at the last checkpoint spans their range."""
    bands = bands or {}
    rows = main["by_step"]
    steps = np.array([r["step"] for r in rows], dtype=float)
    nudge = 0.012 * (steps.max() - steps.min() or 1.0)
    fig, (ax, zoom) = plt.subplots(1, 2, figsize=(10.5, 4.2), width_ratios=[1.5, 1],
                                   layout="constrained")
    for i, (key, label, style) in enumerate(VALIDITY_SERIES):
        values = [np.nan if r[key] is None else r[key] for r in rows]
        for a in (ax, zoom):
            a.plot(steps + (i - 1.5) * nudge, values, label=label, linewidth=1.5,
                   **{"markersize": 7, **style})
            range_bar(a, steps[-1] + (i - 1.5) * nudge, values[-1],
                      seed_range(bands, "main", key), style["color"])
    count = rows[0].get("num_samples", 1000)
    ax.set_xlabel("training step")
    ax.set_ylabel(f"fraction (of {count:,} samples at T = 1,\nof the valid, or of the unique)")
    ax.set_ylim(0, 1.03)
    ax.set_xticks(steps)
    ax.set_title(f"All four rates ({main['run']})")
    high = [r[key] for r in rows for key in ("uniqueness", "novelty") if r[key] is not None]
    high += [seed_range(bands, "main", key)[0] for key in ("uniqueness", "novelty")
             if seed_range(bands, "main", key)]
    low = min(high, default=0.99)
    zoom.set_ylim(min(low - 0.004, 0.99), 1.0015)
    zoom.set_xticks(steps)
    zoom.set_xlabel("training step")
    zoom.set_ylabel("fraction (zoomed)")
    zoom.set_title("Zoom on uniqueness and novelty")
    zoom.yaxis.set_major_formatter(lambda y, _: f"{y:.3f}")
    legend_right(zoom, fontsize=9)
    spread = seed_range(bands, "main", "validity")
    fig.suptitle(f"Sample quality over training, seed 0: {count:,} samples at T = 1 per "
                 "checkpoint (markers nudged apart in x)"
                 + (f"\nbars at step {steps[-1]:.0f}: range over {spread[2]} seeds" if spread
                    else ""))
    return save_figure(fig, out_dir, "validity_curve")


def wilson_interval(successes: float, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval (lower, upper) of a binomial proportion successes / n."""
    if n <= 0:
        return (np.nan, np.nan)
    p = successes / n
    denominator = 1 + z * z / n
    center = (p + z * z / (2 * n)) / denominator
    half = z / denominator * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    if successes <= 0:  # exact at the edges: the formula gives them up to rounding
        return (0.0, min(1.0, center + half))
    if successes >= n:
        return (max(0.0, center - half), 1.0)
    return (max(0.0, center - half), min(1.0, center + half))


def breakdown(rows: list[dict], xlabel: str, title: str, out_dir: Path, name: str) -> Path:
    """Stacked outcome fractions per bin, each bin's sample count on top, and 95% Wilson
    intervals on the two boundaries: the valid fraction (top of the green) and the
    ill-formed fraction (bottom of the red, drawn as 1 - its interval)."""
    fig, ax = plt.subplots(figsize=(7.5, 4.3))
    x = np.arange(len(rows))
    bottom = np.zeros(len(rows))
    for outcome, color in OUTCOME_COLORS.items():
        values = np.array([r[outcome] or 0.0 for r in rows])
        ax.bar(x, values, bottom=bottom, color=color, label=OUTCOME_LABELS[outcome], width=0.7)
        bottom += values
    for xi, r in zip(x, rows):
        ax.text(xi, 1.045, f"n={r['count']}", ha="center", va="bottom", fontsize=8.5)
    for outcome, shift, flip, label in (
            ("valid", -0.12, False, "95% Wilson interval, valid fraction"),
            ("ill_formed", 0.12, True,
             "95% Wilson interval, ill-formed fraction\n"
             "(drawn at its lower edge, 1 - ill-formed)")):
        points, lows, highs = [], [], []
        for xi, r in zip(x, rows):
            n = int(r["count"])
            if n == 0 or r[outcome] is None:
                continue
            low, high = wilson_interval(round(r[outcome] * n), n)
            value = r[outcome]
            if flip:  # drawn at the boundary 1 - ill_formed
                value, low, high = 1 - value, 1 - high, 1 - low
            points.append((xi + shift, value))
            lows.append(max(0.0, value - low))  # >= 0 despite rounding at p = 0 or 1
            highs.append(max(0.0, high - value))
        if points:
            xs, ys = zip(*points)
            ax.errorbar(xs, ys, yerr=[lows, highs], fmt="o" if not flip else "s",
                        color="black", markerfacecolor="white" if flip else "black",
                        markersize=4, capsize=3.5, linewidth=1.2, label=label, zorder=5)
    ax.set_xticks(x, [r["bin"] for r in rows])
    ax.set_xlabel(xlabel)
    ax.set_ylabel("fraction of the samples in the bin")
    ax.set_ylim(0, 1.12)
    ax.set_title(f"{title}\n(n = samples in the bin; error bars: 95% Wilson intervals)",
                 fontsize=10.5)
    legend_right(ax)
    return save_figure(fig, out_dir, name)


def property_histograms(props: dict, out_dir: Path) -> Path:
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    for ax, key, label in zip(axes, ("qed", "logp", "mol_wt"),
                              ("QED (drug-likeness, 0 to 1)", "logP (Crippen)",
                               "molecular weight (g/mol)")):
        both = props["samples"][key] + props["train"][key]
        bins = np.linspace(min(both), max(both), 30) if both else 10
        ax.hist(props["train"][key], bins=bins, density=True, alpha=0.5,
                label=f"training ({len(props['train'][key])})")
        ax.hist(props["samples"][key], bins=bins, density=True, alpha=0.5,
                label=f"valid samples ({len(props['samples'][key])})")
        ax.set_xlabel(label)
        ax.set_ylabel("density")
        ax.legend(fontsize=8)
    fig.suptitle("Properties of valid samples (seed 0, T = 1) against 1,000 training "
                 "molecules")
    return save_figure(fig, out_dir, "properties")


def sample_grid(samples: list[str], out_dir: Path, count: int = 16,
                title: str = "") -> Path | None:
    from rdkit import Chem, RDLogger
    from rdkit.Chem import Draw

    RDLogger.DisableLog("rdApp.*")
    mols = [m for m in (Chem.MolFromSmiles(s) for s in samples if s) if m is not None][:count]
    if not mols:
        return None
    image = Draw.MolsToGridImage(mols, molsPerRow=4, subImgSize=(260, 200),
                                 legends=[f"sample #{i + 1}" for i in range(len(mols))])
    fig, ax = plt.subplots(figsize=(image.width / 100, image.height / 100 + 0.5))
    ax.imshow(image)
    ax.set_axis_off()
    ax.set_title(title or f"The first {len(mols)} valid samples", fontsize=11)
    return save_figure(fig, out_dir, "sample_grid")


def make_figures(results_dir: Path, out_dir: Path) -> list[Path]:
    paths = []
    metrics_path = results_dir / "metrics.json"
    metrics = read_json(metrics_path) if metrics_path.exists() else {}
    if metrics.get("sweep"):
        runs = sorted(entry["run"] for entry in metrics["sweep"])
        paths.append(sweep_curves(load_logs(results_dir, runs), out_dir,
                                  metrics.get("unigram_entropy")))
        paths.append(sweep_grid(metrics["sweep"], out_dir, read_bands(results_dir)))
    main = metrics.get("main")
    if main:
        paths.append(validity_curve(main, out_dir, read_bands(results_dir)))
        paths.append(breakdown(main["by_length"], "sample length (tokens)",
                               f"Outcomes by length, {main['run']} (seed 0), T = 1", out_dir,
                               "by_length"))
        paths.append(breakdown(main["by_span"], "longest ring span (tokens between the digits)",
                               f"Outcomes by ring span, {main['run']} (seed 0), T = 1",
                               out_dir,
                               "by_span"))
        properties = results_dir / "properties.json"
        if properties.exists():
            paths.append(property_histograms(read_json(properties), out_dir))
        samples = results_dir / f"samples_{main['run']}.txt"
        if samples.exists():
            grid = sample_grid(samples.read_text().split("\n"), out_dir, title=(
                f"The first 16 valid samples of {main['run']} (seed 0, T = 1), as RDKit "
                "draws them"))
            paths += [grid] if grid else []
    return paths  # none: visualize.py says what to run first
