"""Figure conventions shared by every plotting module: one save function, one look.

Students: given; figures only, you need not read it.
"""

import os
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import matplotlib.pyplot as plt

from provided.results import read_json

plt.rcParams.update({
    "figure.dpi": 110,
    "savefig.dpi": 130,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "font.size": 10,
    "legend.framealpha": 0.9,
})


def read_bands(results_dir: Path) -> dict:
    """results_dir/reference_bands.json (the reference runs' seed bands), {} where there is
    none: figures then show seed 0 alone."""
    path = Path(results_dir) / "reference_bands.json"
    return read_json(path) if path.exists() else {}


def seed_range(bands: dict, run: str, quantity: str):
    """(min, max, n seeds) of a quantity in reference_bands.json, or None under two seeds."""
    band = bands.get(run, {}).get(quantity)
    return None if not band or band["n_seeds"] < 2 else (band["min"], band["max"], band["n_seeds"])


def range_bar(ax, x: float, y: float, spread, color: str) -> None:
    """A vertical bar over the seeds' range at (x, y), y being seed 0 (inside the range)."""
    if spread is not None and y is not None:
        low, high, _ = spread
        ax.errorbar([x], [y], yerr=[[max(y - low, 0)], [max(high - y, 0)]], fmt="none",
                    ecolor=color, elinewidth=1.2, capsize=4, alpha=0.8)


def half_up(value: float, places: int) -> str:
    """value rounded half up to `places` decimals from its decimal text, as the reports'
    tables round a JSON number (0.8775 -> '0.878'); '%.3f' rounds the binary float instead,
    which lies just under 0.8775 (-> '0.877')."""
    return str(Decimal(repr(float(value))).quantize(Decimal(1).scaleb(-places),
                                                    rounding=ROUND_HALF_UP))


def legend_below(ax, ncol: int = 3, **kwargs):
    """The axes' legend outside and below them (under the x label), so that it hides no
    curve; save_figure's tight bounding box keeps it in the PNG."""
    return ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=ncol,
                     fontsize=kwargs.pop("fontsize", 8.5), **kwargs)


def legend_right(ax, **kwargs):
    """The axes' legend outside and to the right of them, so that it hides no curve."""
    return ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5),
                     fontsize=kwargs.pop("fontsize", 8.5), **kwargs)


def save_figure(fig, out_dir: Path, name: str) -> Path:
    """Save fig as out_dir/name.png (written to a temporary file, then renamed) and close it."""
    path = Path(out_dir) / f"{name}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.tmp.png")
    fig.savefig(tmp, bbox_inches="tight")
    plt.close(fig)
    os.replace(tmp, path)
    return path


def save_image(image, out_dir: Path, name: str) -> Path:
    """Save a PIL image (e.g. RDKit's MolsToGridImage) as out_dir/name.png, atomically."""
    path = Path(out_dir) / f"{name}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.tmp.png")
    image.save(tmp)
    os.replace(tmp, path)
    return path
