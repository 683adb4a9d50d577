"""Problem 3 figures, drawn from problem3/results: training logs, metrics.json,
properties.json and the sample file."""

import json
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from provided.plots.style import save_figure, save_image

THRESHOLD = 2.0
LR_COLORS = {0.001: "tab:blue", 0.01: "tab:orange", 0.03: "tab:red"}
WARMUP_STYLES = {0: "-", 500: "--"}
OUTCOME_COLORS = {"valid": "tab:green", "well_formed_invalid": "tab:orange",
                  "ill_formed": "tab:red"}
OUTCOME_LABELS = {"valid": "valid (RDKit)", "well_formed_invalid": "well-formed, invalid",
                  "ill_formed": "ill-formed"}


def load_logs(results_dir: Path, steps: int = 1500) -> list[dict]:
    paths = sorted(results_dir.glob(f"training_log_*_s{steps}.json"))
    return [json.loads(p.read_text()) for p in paths]


def sweep_curves(logs: list[dict], out_dir: Path) -> Path:
    """Training loss (lines) and validation loss (dots) per run, one panel per norm."""
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5), sharey=True)
    for ax, norm in zip(axes, ("pre", "post")):
        for log in (entry for entry in logs if entry["config"]["norm"] == norm):
            lr, warmup = log["config"]["lr"], log["config"]["warmup"]
            color, style = LR_COLORS.get(lr, "black"), WARMUP_STYLES.get(warmup, ":")
            steps = [r["step"] for r in log["log"]]
            loss = [np.nan if r["train_loss"] is None else r["train_loss"] for r in log["log"]]
            ax.plot(steps, loss, color=color, linestyle=style, label=f"lr {lr}, warmup {warmup}")
            val = [(r["step"], r["val_loss"]) for r in log["val"]]
            ax.plot([s for s, v in val if v is not None], [v for s, v in val if v is not None],
                    "o", color=color, markersize=4)
            diverged = [r["step"] for r in log["log"] if r["train_loss"] is None]
            if diverged:  # non-finite loss: marked at the top edge so it stays visible
                ax.plot(diverged[0], 1, marker="x", color=color, markersize=10, clip_on=False,
                        transform=ax.get_xaxis_transform())
        ax.axhline(THRESHOLD, color="gray", linewidth=1, linestyle=":")
        ax.text(0.99, THRESHOLD, "trains below 2.0", va="bottom", ha="right", color="gray",
                fontsize=8, transform=ax.get_yaxis_transform())
        ax.set_yscale("log")
        ax.set_xlabel("training step")
        ax.set_title(f"{norm}-LN: training loss (lines), validation loss (dots)")
    axes[0].set_ylabel("cross-entropy per token (nats, log scale)")
    handles, labels = max((ax.get_legend_handles_labels() for ax in axes), key=lambda h: len(h[1]))
    if handles:  # one legend for both panels, below them, so that no curve is hidden
        fig.legend(handles, labels, loc="lower center", ncol=3, fontsize=9,
                   bbox_to_anchor=(0.5, -0.1))
    fig.suptitle("Learning-rate x warmup sweep, 1,500 steps (x at the top: loss became "
                 "non-finite)")
    return save_figure(fig, out_dir, "sweep_loss_curves")


def sweep_grid(sweep: list[dict], out_dir: Path) -> Path:
    """Final validation loss over (warmup, lr), one panel per norm: green trains, red fails,
    grey not run (yet)."""
    lrs, warmups = sorted({e["lr"] for e in sweep}), sorted({e["warmup"] for e in sweep})
    cmap = plt.get_cmap("RdYlGn").with_extremes(bad="lightgrey")
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for ax, norm in zip(axes, ("pre", "post")):
        runs = {(e["warmup"], e["lr"]): e for e in sweep if e["norm"] == norm}
        verdict = np.full((len(warmups), len(lrs)), np.nan)  # 1 trains, 0 fails, nan absent
        for i, warmup in enumerate(warmups):
            for j, lr in enumerate(lrs):
                e = runs.get((warmup, lr))
                if e is None:
                    ax.text(j, i, "not run", ha="center", va="center", color="dimgrey")
                    continue
                verdict[i, j] = float(e["trains"])
                loss = "diverged" if e["final_val_loss"] is None else f"{e['final_val_loss']:.2f}"
                ax.text(j, i, f"{loss}\n{'trains' if e['trains'] else 'fails'}", ha="center",
                        va="center", fontsize=10)
        ax.imshow(np.ma.masked_invalid(verdict), cmap=cmap, vmin=-0.3, vmax=1.3, aspect="auto")
        ax.set_xticks(range(len(lrs)), [str(lr) for lr in lrs])
        ax.set_yticks(range(len(warmups)), [str(w) for w in warmups])
        ax.set_xlabel("peak learning rate")
        ax.set_ylabel("warmup steps")
        ax.set_title(f"{norm}-LN: final validation loss (nats/token)")
        ax.grid(False)
    fig.suptitle(f"Sweep verdicts: a run trains if its final validation loss < {THRESHOLD}",
                 y=1.02)
    return save_figure(fig, out_dir, "sweep_grid")


def validity_curve(main: dict, out_dir: Path) -> Path:
    rows = main["by_step"]
    steps = [r["step"] for r in rows]
    fig, ax = plt.subplots(figsize=(6, 4))
    for key, label in [("well_formed", "well-formed"), ("validity", "RDKit-valid"),
                       ("uniqueness", "unique (of valid)"), ("novelty", "novel (of unique)")]:
        ax.plot(steps, [np.nan if r[key] is None else r[key] for r in rows], "o-", label=label)
    ax.set_xlabel("training step")
    ax.set_ylabel("fraction of 1,000 samples at T = 1")
    ax.set_ylim(0, 1.02)
    ax.set_xticks(steps)
    ax.set_title(f"Sample quality over training ({main['run']})")
    ax.legend()
    return save_figure(fig, out_dir, "validity_curve")


def breakdown(rows: list[dict], xlabel: str, title: str, out_dir: Path, name: str) -> Path:
    """Stacked outcome fractions per bin, with each bin's sample count on top."""
    fig, ax = plt.subplots(figsize=(6, 4))
    x = np.arange(len(rows))
    bottom = np.zeros(len(rows))
    for outcome, color in OUTCOME_COLORS.items():
        values = np.array([r[outcome] or 0.0 for r in rows])
        ax.bar(x, values, bottom=bottom, color=color, label=OUTCOME_LABELS[outcome])
        bottom += values
    for xi, r in zip(x, rows):
        ax.text(xi, 1.01, f"n={r['count']}", ha="center", va="bottom", fontsize=8)
    ax.set_xticks(x, [r["bin"] for r in rows])
    ax.set_xlabel(xlabel)
    ax.set_ylabel("fraction of samples in the bin")
    ax.set_ylim(0, 1.1)
    ax.set_title(title)
    ax.legend(fontsize=8, loc="lower left")
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
    fig.suptitle("Properties of valid samples (T = 1) against 1,000 training molecules")
    return save_figure(fig, out_dir, "properties")


def sample_grid(samples: list[str], out_dir: Path, count: int = 16) -> Path | None:
    from rdkit import Chem, RDLogger
    from rdkit.Chem import Draw

    RDLogger.DisableLog("rdApp.*")
    mols = [m for m in (Chem.MolFromSmiles(s) for s in samples if s) if m is not None][:count]
    if not mols:
        return None
    image = Draw.MolsToGridImage(mols, molsPerRow=4, subImgSize=(260, 200),
                                 legends=[f"sample #{i + 1}" for i in range(len(mols))])
    return save_image(image, out_dir, "sample_grid")


def make_figures(results_dir: Path, out_dir: Path) -> list[Path]:
    paths = []
    metrics_path = results_dir / "metrics.json"
    metrics = json.loads(metrics_path.read_text()) if metrics_path.exists() else {}
    if metrics.get("sweep"):
        sweep_steps = int(metrics["sweep"][0]["run"].rsplit("_s", 1)[1])
        paths.append(sweep_curves(load_logs(results_dir, sweep_steps), out_dir))
        paths.append(sweep_grid(metrics["sweep"], out_dir))
    main = metrics.get("main")
    if main:
        paths.append(validity_curve(main, out_dir))
        paths.append(breakdown(main["by_length"], "sample length (tokens)",
                               "Outcomes by length, final model, T = 1", out_dir, "by_length"))
        paths.append(breakdown(main["by_span"], "longest ring span (tokens between the digits)",
                               "Outcomes by ring span, final model, T = 1", out_dir, "by_span"))
        properties = results_dir / "properties.json"
        if properties.exists():
            paths.append(property_histograms(json.loads(properties.read_text()), out_dir))
        samples = results_dir / f"samples_{main['run']}.txt"
        if samples.exists():
            grid = sample_grid(samples.read_text().split("\n"), out_dir)
            paths += [grid] if grid else []
    if not paths:
        raise SystemExit(f"error: nothing to draw in {results_dir}: run problem3/evaluate.py "
                         "first")
    return paths
