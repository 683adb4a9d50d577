"""Figures of the datasets: carries per sum (addition) and 16 training molecules (SMILES).

Students: given; figures only, you need not read it.
"""

import csv
from collections import Counter
from pathlib import Path

import matplotlib.pyplot as plt

from provided.plots.style import save_figure, save_image
from provided.results import BadFileError


def carries(a: int, b: int) -> int:
    """Number of carries in the schoolbook addition of a and b (391 + 968 -> 2)."""
    count, carry = 0, 0
    while a or b:
        carry = int(a % 10 + b % 10 + carry >= 10)
        count += carry
        a, b = a // 10, b // 10
    return count


def carries_figure(data_dir: Path, out_dir: Path) -> Path:
    path = data_dir / "addition" / "train.csv"
    with open(path) as f:
        try:
            pairs = [(int(row["a"]), int(row["b"])) for row in csv.DictReader(f)]
        except (KeyError, TypeError, ValueError) as err:
            raise BadFileError(f"{path} is not an addition CSV (a,b rows of integers; "
                               f"{type(err).__name__}: {err}): run `python generate_datasets.py "
                               "--only addition --force`") from None
    counts = Counter(carries(a, b) for a, b in pairs)
    xs = range(4)
    fig, ax = plt.subplots(figsize=(4.5, 3.2))
    bars = ax.bar(xs, [counts[x] for x in xs], color="tab:blue")
    ax.bar_label(bars, labels=[f"{counts[x]:,}" for x in xs], fontsize=9)
    ax.set_xticks(list(xs))
    ax.set_xlabel("carries in the sum")
    ax.set_ylabel("training pairs")
    ax.set_title(f"Carries per sum, addition training split ({len(pairs):,} pairs)")
    return save_figure(fig, out_dir, "carries")


def molecules_figure(data_dir: Path, out_dir: Path, count: int = 16) -> Path:
    from rdkit import Chem
    from rdkit.Chem import Draw

    smiles = (data_dir / "smiles" / "train.txt").read_text().split()[:count]
    mols = [Chem.MolFromSmiles(s) for s in smiles]
    image = Draw.MolsToGridImage(mols, molsPerRow=4, subImgSize=(260, 200),
                                 legends=[f"train #{i + 1}" for i in range(len(mols))])
    return save_image(image, out_dir, "train_molecules")


def make_figures(data_dir: Path, out_dir: Path) -> list[Path]:
    paths = []
    if (data_dir / "addition" / "train.csv").exists():
        paths.append(carries_figure(data_dir, out_dir))
    if (data_dir / "smiles" / "train.txt").exists():
        paths.append(molecules_figure(data_dir, out_dir))
    return paths  # none: visualize.py says what to run first
