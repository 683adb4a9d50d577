"""The single entry point for every figure of the repository.

Students: given; run it for the figures, you need not read it.

    python provided/visualize.py data                           # figures of the datasets
    python provided/visualize.py problem1                       # ... problem2, problem3
    python provided/visualize.py problem3 --results_dir /tmp/try3   # a try's figures

Each target's figures are drawn by provided/plots/<target>.py from a problem's results
folder, --results_dir (default: the real one, problemN/results/), and written as PNGs into
its figures/ subfolder: a try's figures stay with the try. The datasets' figures are drawn
from --data_dir (default data/) into its figures/ (data/figures/ is the one committed
folder of data/). --out_dir puts the PNGs elsewhere, but never into a problem's real
figures/ folder from other results than that problem's real ones. A figure whose results
are not there yet is skipped, one line each saying which file or entry it lacks and what
writes it.

Each PNG of a problem records the SHA-256 of the metrics.json it was drawn from (a PNG text
entry, STAMP), so that `make submission` can say when a figure beside a metrics.json was
drawn from another one (a try's, or an evaluation since replaced).
"""

import fnmatch
import hashlib
import importlib
import json
import os
import struct
import zlib
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


# ------------------------------------------------------------------ where a figure is from
STAMP = "homework-drawn-from"  # the PNG text entry: {"metrics.json": its SHA-256 or null}
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def metrics_digest(results_dir: Path) -> str | None:
    """The SHA-256 of results_dir/metrics.json, None where there is none."""
    try:
        return hashlib.sha256((Path(results_dir) / "metrics.json").read_bytes()).hexdigest()
    except OSError:
        return None


def png_texts(data: bytes) -> dict[str, str]:
    """{keyword: text} of a PNG's tEXt entries ({} for what is not a PNG)."""
    texts, at = {}, len(PNG_SIGNATURE)
    if not data.startswith(PNG_SIGNATURE):
        return texts
    while at + 8 <= len(data):
        length, kind = struct.unpack(">I4s", data[at:at + 8])
        body = data[at + 8:at + 8 + length]
        if kind == b"tEXt" and b"\0" in body:
            keyword, _, text = body.partition(b"\0")
            texts[keyword.decode("latin-1")] = text.decode("latin-1")
        if kind == b"IEND":
            break
        at += 12 + length
    return texts


def with_text(data: bytes, keyword: str, text: str) -> bytes:
    """A PNG's bytes with one tEXt entry added before its end (IEND)."""
    end = data.rfind(b"IEND") - 4
    if not data.startswith(PNG_SIGNATURE) or end < len(PNG_SIGNATURE):
        return data
    body = keyword.encode("latin-1") + b"\0" + text.encode("latin-1")
    chunk = (struct.pack(">I", len(body)) + b"tEXt" + body
             + struct.pack(">I", zlib.crc32(b"tEXt" + body) & 0xFFFFFFFF))
    return data[:end] + chunk + data[end:]


def stamp(path: Path, digest: str | None) -> None:
    """Record in the PNG at path the metrics.json it was drawn from (atomically)."""
    data = with_text(path.read_bytes(), STAMP, json.dumps({"metrics.json": digest}))
    tmp = path.with_name(f".{path.stem}.stamp.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def drawn_from(data: bytes) -> tuple[bool, str | None]:
    """(whether a PNG says what it was drawn from, the SHA-256 of that metrics.json)."""
    try:
        return True, json.loads(png_texts(data)[STAMP])["metrics.json"]
    except (KeyError, ValueError, TypeError):
        return False, None


# ------------------------------------------------------------------------------ the script
def folders(parser, args) -> tuple[Path, Path]:
    """(the folder drawn from, the folder the PNGs go to) of the command line."""
    target = args.target
    default_input = default_dirs(target)[0]
    if target == "data" and args.results_dir is not None:
        parser.error("argument --results_dir: the data figures are drawn from --data_dir")
    if target != "data" and args.data_dir is not None:
        parser.error(f"argument --data_dir: {target}'s figures are drawn from --results_dir")
    given = [flag for flag, value in (("--input_dir", args.input_dir),
                                      ("--results_dir", args.results_dir),
                                      ("--data_dir", args.data_dir)) if value is not None]
    if len(given) > 1:
        parser.error(f"argument {given[1]}: give {' or '.join(given)}, not both")
    input_dir = Path(args.input_dir or args.results_dir or args.data_dir or default_input)
    out_dir = Path(args.out_dir or input_dir / "figures")
    for problem in TARGETS[1:]:
        results, figures = default_dirs(problem)
        if (out_dir.resolve() == figures.resolve()
                and input_dir.resolve() != results.resolve()):
            raise HomeworkError(f"--out_dir {out_dir} is {problem}'s real figures folder, and "
                                f"the figures would be drawn from {input_dir}: leave out "
                                f"--out_dir (they go to {input_dir / 'figures'})")
    return input_dir, out_dir


@script
def main(argv=None) -> int:
    parser = ArgumentParser(__doc__)
    parser.add_argument("target", choices=TARGETS)
    parser.add_argument("--results_dir", type=Path, default=None,
                        help="the problem's results folder to draw, e.g. a try's (default: "
                             "problemN/results); the PNGs go to its figures/")
    parser.add_argument("--data_dir", type=Path, default=None,
                        help="the data folder, for the target data (default: data/)")
    parser.add_argument("--input_dir", type=Path, default=None,
                        help="the folder to draw: --results_dir or --data_dir by its old name")
    parser.add_argument("--out_dir", type=Path, default=None,
                        help="where the PNGs go (default: figures/ in the folder drawn)")
    args = parser.parse_args(argv)
    input_dir, out_dir = folders(parser, args)
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
    if args.target != "data":
        digest = metrics_digest(input_dir)
        for path in paths:
            stamp(path, digest)
    for path in paths:
        print(f"wrote {path}")
    for line in skipped(args.target, input_dir, paths):
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
