"""Generate the Problem 1 and 2 datasets (seed 641) and fetch the Problem 3 SMILES dataset.

Students: given; run it once (the README's set-up), you need not read it.

    python generate_datasets.py                      # everything, skipping what exists
    python generate_datasets.py --only smiles --force
    python generate_datasets.py --moses_csv train.csv.gz   # a local copy of MOSES' train split

Outputs (under --data_dir, default data/):
    addition/{train,val,test}.csv   header a,b; 10,000 / 2,000 / 2,000 operand pairs
    offset/train.npy [20000, 64], offset/test.npy [2000, 128]; tokens in [0, 16)
    smiles/train.txt, smiles/val.txt  100,000 / 10,000 MOSES strings, 13 to 50 tokens

The draws reproduce the examples on the homework page: the first training pairs are
391+968, 12+597, 73+439, and the first offset sequence starts 11 15 11 11 11 14 10 14.
"""

import csv
import gzip
import io
import random
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
from tqdm import tqdm

from provided.common import DATA_DIR, ArgumentParser, script
from provided.results import atomic_write_bytes, atomic_write_text
from provided.smiles import HOMEWORK_TOKENS, tokenize

SEED = 641
ADDITION_SPLITS = {"train": 10_000, "val": 2_000, "test": 2_000}
OFFSET_SHAPES = {"train": (20_000, 64), "test": (2_000, 128)}
OFFSET_VOCAB = 16

MOSES_WHEEL = "molsets==0.3.1"
MOSES_MEMBER = "moses/dataset/data/train.csv.gz"
MOSES_TRAIN_ROWS = 1_584_663
MOSES_KEPT = 1_584_424  # the rows of the train split that keep_smiles keeps (all distinct)
SMILES_MIN_TOKENS, SMILES_MAX_TOKENS = 13, 50
SMILES_SPLITS = {"train": 100_000, "val": 10_000}


class DatasetError(Exception):
    """A failure the user can fix; main() prints it as one line."""


# ----------------------------------------------------------------------------- addition
def addition_pairs(total: int, seed: int = SEED) -> list[tuple[int, int]]:
    """Draw (a, b) uniformly from 0..999 until `total` distinct unordered pairs are found."""
    rng = random.Random(seed)
    seen, pairs = set(), []
    while len(pairs) < total:
        a, b = rng.randint(0, 999), rng.randint(0, 999)
        key = (min(a, b), max(a, b))
        if key in seen:
            continue
        seen.add(key)
        pairs.append((a, b))
    return pairs


def write_addition(data_dir: Path, splits: dict[str, int] = ADDITION_SPLITS) -> None:
    pairs = addition_pairs(sum(splits.values()))
    start = 0
    for split, count in splits.items():
        lines = ["a,b"] + [f"{a},{b}" for a, b in pairs[start:start + count]]
        atomic_write_text(data_dir / "addition" / f"{split}.csv", "\n".join(lines) + "\n")
        start += count


# ------------------------------------------------------------------------------- offset
def offset_arrays(shapes: dict[str, tuple[int, int]] = OFFSET_SHAPES, seed: int = SEED):
    """Token arrays drawn in order train, then test, from NumPy's legacy seeded generator."""
    np.random.seed(seed)
    return {split: np.random.randint(0, OFFSET_VOCAB, size=shape) for split, shape in
            shapes.items()}


def write_offset(data_dir: Path, shapes: dict[str, tuple[int, int]] = OFFSET_SHAPES) -> None:
    for split, array in offset_arrays(shapes).items():
        buffer = io.BytesIO()
        np.save(buffer, array.astype(np.int64))
        atomic_write_bytes(data_dir / "offset" / f"{split}.npy", buffer.getvalue())


# ------------------------------------------------------------------------------- smiles
def download_moses_csv(cache_dir: Path) -> bytes:
    """The gzipped MOSES training CSV, read out of the molsets wheel fetched with pip."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    wheels = sorted(cache_dir.glob("molsets-0.3.1-*.whl"))
    if not wheels:
        print(f"downloading {MOSES_WHEEL} (51 MB) with pip into {cache_dir} ...", flush=True)
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", MOSES_WHEEL,
               "-d", str(cache_dir)]
        result = subprocess.run(cmd, capture_output=True, text=True)
        wheels = sorted(cache_dir.glob("molsets-0.3.1-*.whl"))
        if result.returncode != 0 or not wheels:
            reason = (result.stderr.strip().splitlines() or ["no wheel appeared"])[-1]
            raise DatasetError(
                f"could not download {MOSES_WHEEL} with pip ({reason}). Check the network, "
                f"or pass a local copy of MOSES' train split with --moses_csv PATH")
    try:
        with zipfile.ZipFile(wheels[0]) as wheel:
            return wheel.read(MOSES_MEMBER)
    except (zipfile.BadZipFile, KeyError, OSError) as err:
        wheels[0].unlink(missing_ok=True)
        raise DatasetError(f"the downloaded wheel {wheels[0].name} is corrupt ({err}); it was "
                           f"deleted, run the command again to download it anew") from err


def read_moses_csv(raw: bytes, source: str = "the MOSES CSV") -> list[str]:
    """SMILES strings of a MOSES CSV (gzipped or plain), from its SMILES column. source
    names the file in the messages."""
    try:
        text = gzip.decompress(raw).decode() if raw[:2] == b"\x1f\x8b" else raw.decode()
    except (OSError, EOFError, UnicodeDecodeError) as err:
        raise DatasetError(f"{source} is corrupt or truncated ({err})") from err
    if not text.strip():
        raise DatasetError(f"{source} is empty: it should be MOSES' train split (a SMILES "
                           f"column of {MOSES_TRAIN_ROWS} rows)")
    reader = csv.DictReader(io.StringIO(text))
    if not reader.fieldnames or "SMILES" not in reader.fieldnames:
        raise DatasetError(f"{source} has no SMILES column (header: {reader.fieldnames}); "
                           "it should be MOSES' train split")
    return [row["SMILES"] for row in reader]


def keep_smiles(smiles: str) -> bool:
    """True for strings whose tokens are all in the 22-token vocabulary, 13 to 50 of them."""
    try:
        tokens = tokenize(smiles)
    except ValueError:
        return False
    return (SMILES_MIN_TOKENS <= len(tokens) <= SMILES_MAX_TOKENS
            and all(t in HOMEWORK_TOKENS for t in tokens))


def subsample_smiles(strings: list[str], splits: dict[str, int] = SMILES_SPLITS,
                     seed: int = SEED, source: str = "the MOSES CSV") -> dict[str, list[str]]:
    """Filter, deduplicate (first occurrence kept), then draw a seeded subsample."""
    return subsample_kept([s for s in strings if keep_smiles(s)], splits, seed, source)


def subsample_kept(kept: list[str], splits: dict[str, int] = SMILES_SPLITS, seed: int = SEED,
                   source: str = "the MOSES CSV") -> dict[str, list[str]]:
    """subsample_smiles on strings that already passed keep_smiles."""
    kept = list(dict.fromkeys(kept))
    total = sum(splits.values())
    if len(kept) < total:
        raise DatasetError(f"only {len(kept)} SMILES pass the filter, {total} are needed; "
                           f"{source} is too short or not the train split")
    chosen = np.random.default_rng(seed).choice(len(kept), size=total, replace=False)
    out, start = {}, 0
    for split, count in splits.items():
        out[split] = [kept[i] for i in chosen[start:start + count]]
        start += count
    return out


def write_smiles(data_dir: Path, moses_csv: Path | None = None,
                 splits: dict[str, int] = SMILES_SPLITS) -> None:
    """The SMILES splits, from --moses_csv or the download, each checked like the other: the
    SMILES column, MOSES_TRAIN_ROWS rows and MOSES_KEPT kept by the filter (the last two only
    for the homework's split sizes), before any file is written."""
    if moses_csv is not None:
        if not moses_csv.is_file():
            raise DatasetError(f"--moses_csv {moses_csv} does not exist or is not a file")
        source = f"--moses_csv {moses_csv}"
        fix = (f"pass the whole train split ({MOSES_MEMBER} of the {MOSES_WHEEL} wheel), or "
               "leave out --moses_csv to download it")
        strings = read_moses_csv(moses_csv.read_bytes(), source)
    else:
        source, fix = "the downloaded MOSES train split", f"delete {data_dir / 'cache'} and retry"
        strings = read_moses_csv(download_moses_csv(data_dir / "cache"), source)
        if len(strings) != MOSES_TRAIN_ROWS:
            raise DatasetError(f"the MOSES train split has {len(strings)} rows, expected "
                               f"{MOSES_TRAIN_ROWS}; delete {data_dir / 'cache'} and retry")
    kept = [s for s in tqdm(strings, desc="filtering MOSES strings", unit="string",
                            mininterval=2) if keep_smiles(s)]
    chosen = subsample_kept(kept, splits, source=source)
    if splits == SMILES_SPLITS:  # the homework's sizes: the input must be the whole split
        if len(strings) != MOSES_TRAIN_ROWS:
            raise DatasetError(f"{source} has {len(strings)} rows, expected "
                               f"{MOSES_TRAIN_ROWS} (MOSES' train split): it is truncated or "
                               f"another file; {fix}")
        if len(kept) != MOSES_KEPT:
            raise DatasetError(f"{len(kept)} rows of {source} pass the filter, expected "
                               f"{MOSES_KEPT} (MOSES' train split): it is another file; {fix}")
    for split, lines in chosen.items():
        atomic_write_text(data_dir / "smiles" / f"{split}.txt", "\n".join(lines) + "\n")


# -------------------------------------------------------------------------------- summary
def summarize(data_dir: Path) -> None:
    add = data_dir / "addition"
    if (add / "train.csv").exists():
        sizes = {s: len((add / f"{s}.csv").read_text().splitlines()) - 1 for s in ADDITION_SPLITS}
        print(f"addition: {sizes}")
    off = data_dir / "offset"
    if (off / "train.npy").exists():
        shapes = {s: tuple(np.load(off / f"{s}.npy").shape) for s in OFFSET_SHAPES}
        print(f"offset:   {shapes}")
    smi = data_dir / "smiles"
    if (smi / "train.txt").exists():
        for split in SMILES_SPLITS:
            lengths = [len(tokenize(s)) for s in (smi / f"{split}.txt").read_text().split()]
            print(f"smiles:   {split} {len(lengths):,} strings, tokens min {min(lengths)} "
                  f"mean {np.mean(lengths):.1f} max {max(lengths)}")
        vocab = sorted({t for s in (smi / "train.txt").read_text().split() for t in tokenize(s)})
        print(f"smiles:   vocabulary of {len(vocab)} tokens: {' '.join(vocab)}")


OUTPUTS = {
    "addition": [f"addition/{s}.csv" for s in ADDITION_SPLITS],
    "offset": [f"offset/{s}.npy" for s in OFFSET_SHAPES],
    "smiles": [f"smiles/{s}.txt" for s in SMILES_SPLITS],
}


@script
def main(argv=None) -> int:
    parser = ArgumentParser(__doc__)
    parser.add_argument("--data_dir", type=Path, default=DATA_DIR)
    parser.add_argument("--only", nargs="+", choices=list(OUTPUTS), default=list(OUTPUTS))
    parser.add_argument("--force", action="store_true", help="regenerate files that exist")
    parser.add_argument("--moses_csv", type=Path, default=None,
                        help="a local MOSES train CSV (.csv or .csv.gz) instead of the download")
    args = parser.parse_args(argv)

    writers = {
        "addition": lambda: write_addition(args.data_dir),
        "offset": lambda: write_offset(args.data_dir),
        "smiles": lambda: write_smiles(args.data_dir, args.moses_csv),
    }
    try:
        for name in args.only:
            if not args.force and all((args.data_dir / p).exists() for p in OUTPUTS[name]):
                print(f"{name}: exists, skipped (--force to regenerate)")
                continue
            print(f"{name}: generating ...", flush=True)
            writers[name]()
    except DatasetError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    summarize(args.data_dir)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
