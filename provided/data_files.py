"""Reading the data files generate_datasets.py writes, with a one-line error for a bad one.

Students: given; you need not read it. The dataset modules of the three problems read their
files through these, so that a missing, truncated or hand-edited file stops a script with
one line that names the file, the line where it can, and the command that writes it again.

    read_pairs(path)                  addition pairs, data/addition/{split}.csv -> [N, 2]
    check_offset_file(path, T, vocab) offset sequences, data/offset/{split}.npy [N, T]
    read_smiles(path)                 SMILES strings, data/smiles/{split}.txt -> list of str
    locate_smiles_error(path, err)    the file and line behind an error raised reading one
"""

from pathlib import Path

import numpy as np

from provided.common import missing_data_message
from provided.smiles import tokenize

SMILES_FIX = "regenerate it with `python generate_datasets.py --only smiles --force`"


def read_pairs(path: Path) -> np.ndarray:
    """The operand pairs of one split's CSV file (header `a,b`), as an int64 array [N, 2].

    A bad row (not two integers, or an operand outside 0..999) raises ValueError naming the
    file, the row's line number in the file (the header is line 1) and the row itself; so
    does a file with no pairs.
    """
    fix = "run `python generate_datasets.py --only addition --force`"
    with open(path) as f:
        lines = f.read().rstrip().splitlines()  # blank lines at the very end do not count
    header = lines[0].strip() if lines else ""
    if header != "a,b":
        raise ValueError(f"{path}: expected the header 'a,b', found {header!r}; {fix}")
    pairs = []
    for number, line in enumerate(lines[1:], start=2):
        fields = line.split(",")
        try:
            if len(fields) != 2:
                raise ValueError
            a, b = int(fields[0]), int(fields[1])
        except ValueError:
            raise ValueError(f"{path}, line {number}: expected two integers a,b, found "
                             f"{line!r}; {fix}") from None
        if not (0 <= a <= 999 and 0 <= b <= 999):
            raise ValueError(f"{path}, line {number}: operands must lie in 0..999, found "
                             f"{line!r}; {fix}")
        pairs.append((a, b))
    if not pairs:
        raise ValueError(f"{path} holds no pairs, only its header; {fix}")
    return np.array(pairs, dtype=np.int64).reshape(-1, 2)


def check_offset_file(path: Path, length: int, vocab_size: int) -> None:
    """Check an offset .npy file before any work is done with it: FileNotFoundError if it is
    missing, ValueError naming the file if it cannot be loaded (corrupt or truncated) or is
    not a 2-D integer array of sequences `length` long with tokens in [0, vocab_size)."""
    path = Path(path)
    fix = "run `python generate_datasets.py --only offset --force`"
    if not path.exists():
        raise FileNotFoundError(missing_data_message(path))
    try:
        array = np.load(path, allow_pickle=False)
    except Exception as err:  # numpy raises several kinds for a damaged file
        reason = (str(err).splitlines() or [type(err).__name__])[0]
        raise ValueError(f"{path} is truncated or corrupt ({reason}); {fix}") from None
    if not isinstance(array, np.ndarray):
        raise ValueError(f"{path} holds no single array (an .npz archive?); {fix}")
    if array.ndim != 2 or array.shape[0] < 1:
        raise ValueError(f"{path} holds an array of shape {tuple(array.shape)}, not "
                         f"[sequences, {length}]; {fix}")
    if not np.issubdtype(array.dtype, np.integer):
        raise ValueError(f"{path} holds {array.dtype} values, not integer tokens; {fix}")
    if array.shape[1] != length:
        raise ValueError(f"{path} holds sequences of length {array.shape[1]}, not {length} "
                         f"(shape {tuple(array.shape)}); {fix}")
    low, high = array.min().item(), array.max().item()
    if low < 0 or high >= vocab_size:
        raise ValueError(f"{path} holds tokens from {low} to {high}, outside "
                         f"[0, {vocab_size}); {fix}")


def read_smiles(path: Path) -> list[str]:
    """The lines of a SMILES file, one string each, so that item i is line i + 1 of the file.

    FileNotFoundError says how to create it; a blank line inside the file (blank lines at its
    end are ignored) or bytes that are not text raise ValueError naming the file and line.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(missing_data_message(path))
    try:
        lines = [line.strip() for line in path.read_text().splitlines()]
    except UnicodeDecodeError as err:
        raise ValueError(f"{path} is not a text file ({err.reason} at byte {err.start}): "
                         f"{SMILES_FIX}") from None
    while lines and not lines[-1]:
        lines.pop()
    for number, line in enumerate(lines, start=1):
        if not line:
            raise ValueError(f"{path}, line {number}: a blank line inside the file (every line "
                             f"holds one SMILES string): remove it, or {SMILES_FIX}")
    return lines


def locate_smiles_error(path: Path, err: ValueError) -> str:
    """One line for a ValueError raised while reading the SMILES file path (by build_vocab,
    say): err itself if it names the file, else the file, line and reason of its first line
    that does not tokenize."""
    if str(path) in str(err):
        return str(err)
    try:
        lines = read_smiles(path)
    except (OSError, ValueError) as other:
        return str(other)
    for number, smiles in enumerate(lines, start=1):
        try:
            tokenize(smiles)
        except ValueError as bad:
            return f"{path}, line {number}: {bad}; fix that line, or {SMILES_FIX}"
    return f"{path}: {err}"
