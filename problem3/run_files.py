"""What train.py needs around its training loop: the data checks, the vocabulary file and
resuming an interrupted run.

Students: given; you need not read it.

A run reads data/smiles/train.txt and val.txt (checked first, each problem named in one
line) and keeps its vocabulary in results/vocab.json, which every run in a folder must
share. Every 250 steps it saves results/resume_{run}.pth: the model, the optimizer, the
random generators' states, the log so far and the data files' fingerprints. The same
command after an interruption continues from there and ends with the same log as an
uninterrupted run; a resume file of another configuration or other data is refused.
"""

from dataclasses import asdict
from pathlib import Path

import torch

from problem3.config import Config, differences
from problem3.dataset import SmilesDataset, build_vocab
from provided.common import HomeworkError, missing_data_message
from provided.data_files import locate_smiles_error
from provided.results import BadFileError, file_fingerprint, load_checkpoint
from provided.smiles import HOMEWORK_TOKENS, SmilesVocab, tokenize


def load_data(data_dir: Path, batch_size: int):
    """(vocab, training set, validation set, data fingerprints), or HomeworkError naming the
    file that is missing, empty or unreadable. The training file is checked first."""
    paths = {split: data_dir / "smiles" / f"{split}.txt" for split in ("train", "val")}
    for path in paths.values():
        if not path.exists():
            raise HomeworkError(missing_data_message(path))
    try:
        vocab = build_vocab(paths["train"])
        train_set = SmilesDataset(paths["train"], vocab)
    except ValueError as err:
        raise HomeworkError(locate_smiles_error(paths["train"], err)) from None
    check_tokens(vocab, train_set, paths["train"])
    if len(train_set) < batch_size:
        raise HomeworkError(f"{paths['train']} has {len(train_set)} strings, fewer than one "
                            f"batch of {batch_size}: regenerate it with `python "
                            "generate_datasets.py --only smiles --force`")
    try:
        val_set = SmilesDataset(paths["val"], vocab)
    except ValueError as err:
        raise HomeworkError(str(err)) from None
    if len(val_set) == 0:
        raise HomeworkError(f"{paths['val']} holds no strings: regenerate it with `python "
                            "generate_datasets.py --only smiles --force`")
    fingerprints = [file_fingerprint(path) for path in paths.values()]
    return vocab, train_set, val_set, fingerprints


def check_tokens(vocab: SmilesVocab, train_set: SmilesDataset, path: Path) -> None:
    """HomeworkError, naming the first line that holds it, at a token outside
    HOMEWORK_TOKENS (it would silently grow the vocabulary and the model)."""
    unexpected = sorted(set(vocab.chemistry_tokens) - HOMEWORK_TOKENS)
    if unexpected:
        line = next(number for number, smiles in enumerate(train_set.smiles, start=1)
                    if set(tokenize(smiles)) & set(unexpected))
        raise HomeworkError(f"{path}, line {line}: token {unexpected[0]!r} is not one of the "
                            f"homework's {len(HOMEWORK_TOKENS)} SMILES tokens; regenerate the "
                            "file with `python generate_datasets.py --only smiles --force`")


def check_vocab(vocab: SmilesVocab, out: Path) -> None:
    """Save the vocabulary to out/vocab.json, or HomeworkError if the runs already there were
    trained over another vocabulary (their files and this run's must not mix)."""
    path = out / "vocab.json"
    if path.exists():
        saved = SmilesVocab.load(path)
        if saved != vocab:
            raise HomeworkError(f"{path} holds another vocabulary "
                                f"({' '.join(saved.chemistry_tokens)}) than this training file "
                                f"({' '.join(vocab.chemistry_tokens)}): use another "
                                "--results_dir, or delete the runs there")
    vocab.save(path)


def rng_state(device) -> dict:
    state = {"cpu": torch.get_rng_state()}
    if device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(device)
    return state


def set_rng_state(state: dict, device) -> None:
    torch.set_rng_state(state["cpu"])
    if device.type == "cuda" and "cuda" in state:
        torch.cuda.set_rng_state(state["cuda"], device)


def resume(path: Path, config: Config, data: list[dict], model, optimizer, device):
    """(log, first step) of a run resumed from its resume file, or None if there is none.
    HomeworkError if the file is damaged or belongs to another configuration."""
    if not path.exists():
        return None
    try:
        state = load_checkpoint(path, device, trusted=True)
    except BadFileError as err:
        raise BadFileError(f"{err} (it only saves progress: deleting it starts the run "
                           "over)") from None
    changed = differences(state["config"], asdict(config))
    if state.get("data") != data:
        changed.append("the data files (their bytes differ)")
    if changed:
        raise HomeworkError(f"{path} was saved by another configuration "
                            f"({'; '.join(changed)}): re-run with the same flags and data to "
                            "resume, or delete it to start over")
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    set_rng_state(state["rng"], device)
    print(f"{config.run}: resuming after step {state['step']}")
    return state["log"], state["step"] + 1
