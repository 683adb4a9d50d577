"""Problem 3's run configuration: one dataclass, saved in every checkpoint and training log.

Students: given; skim it for the run's settings.

The homework fixes the model (DecoderLM's defaults: d_model 128, 4 layers, 4 heads, d_ff 512,
max_len 52, dropout 0.1), Adam with betas (0.9, 0.98), batch size 128 and clipping at norm
1.0. A run chooses the norm placement, the peak learning rate, the warmup and the number of
steps, and is named {norm}_lr{lr}_w{warmup}_s{steps}. RUNS holds the prescribed runs: the
12 cells of the sweep at 1,500 steps and the 4,000-step MAIN_RUN (`python -m problem3.config
--list`). A checkpoint holds the Config, the weights and the vocabulary, so `load_model`
rebuilds a model from the file alone.
"""

import re
from dataclasses import dataclass

from problem3.model import NORMS, DecoderLM
from provided.common import registry_main
from provided.results import BadFileError, load_trained
from provided.smiles import SmilesVocab

MODEL_ARGS = ("d_model", "num_layers", "num_heads", "d_ff", "max_len", "dropout")  # DecoderLM's
BETAS = (0.9, 0.98)
CLIP_NORM = 1.0
LOG_EVERY = 50  # training loss, learning rate and gradient norms
VAL_EVERY = 250  # validation loss, and the resume file's save
TRAIN_THRESHOLD = 2.0  # a run "trains" if its final validation loss is below this


@dataclass(frozen=True, kw_only=True)
class Config:
    norm: str
    lr: float
    warmup: int = 0
    steps: int = 1500
    checkpoint_every: int = 0
    batch_size: int = 128
    seed: int = 0
    threads: int = 1  # torch's CPU threads: they can change the last bits of the numbers
    # the model, as the homework fixes it (DecoderLM's defaults)
    d_model: int = 128
    num_layers: int = 4
    num_heads: int = 4
    d_ff: int = 512
    max_len: int = 52
    dropout: float = 0.1
    vocab_size: int = 0

    @property
    def run(self) -> str:
        return run_name(self.norm, self.lr, self.warmup, self.steps)

    def build_model(self) -> DecoderLM:
        return DecoderLM(self.vocab_size, norm=self.norm,
                         **{name: getattr(self, name) for name in MODEL_ARGS})


def run_name(norm: str, lr: float, warmup: int, steps: int) -> str:
    """e.g. pre_lr0.001_w500_s1500 (the learning rate as Python's str of the float)."""
    return f"{cell_name(norm, lr, warmup)}_s{steps}"


def cell_name(norm: str, lr: float, warmup: int) -> str:
    """A sweep cell, the runs of one setting whatever their steps or seed: pre_lr0.001_w500."""
    return f"{norm}_lr{float(lr)}_w{warmup}"


# the prescribed runs: name -> train.py's options
SWEEP_STEPS = 1500
SWEEP_LRS = (1e-3, 1e-2, 3e-2)
SWEEP_WARMUPS = (0, 500)
SWEEP = {run_name(norm, lr, warmup, SWEEP_STEPS):
         {"norm": norm, "lr": lr, "warmup": warmup, "steps": SWEEP_STEPS}
         for norm in NORMS for lr in SWEEP_LRS for warmup in SWEEP_WARMUPS}
MAIN = {"norm": "pre", "lr": 1e-3, "warmup": 500, "steps": 4000, "checkpoint_every": 1000}
MAIN_RUN = run_name(MAIN["norm"], MAIN["lr"], MAIN["warmup"], MAIN["steps"])  # the long run
RUNS = {**SWEEP, MAIN_RUN: MAIN}


RUN_NAME = re.compile(r"(pre|post)_lr[0-9.e-]+_w[0-9]+_s[0-9]+")  # what run_name makes


def differences(saved: dict, wanted: dict) -> list[str]:
    """'key: saved -> wanted' for every key whose value differs, for a one-line refusal."""
    return [f"{key} {saved.get(key)!r} -> {wanted.get(key)!r}"
            for key in sorted(saved.keys() | wanted.keys()) if saved.get(key) != wanted.get(key)]


def checkpoint_extras(vocab: SmilesVocab, step: int) -> dict:
    """What a Problem 3 checkpoint holds besides config and weights."""
    return {"vocab": vocab.chemistry_tokens, "step": step}


def load_model(path, device) -> tuple[DecoderLM, Config, dict]:
    """(model in eval mode on device, its Config, the checkpoint) from a checkpoint written
    by train.py: provided.results.load_trained's shape, as in every problem. The checkpoint
    holds the vocabulary (vocab_of) and the step it was saved at (checkpoint["step"])."""
    model, config, checkpoint = load_trained(Config, path, device)
    if not {"vocab", "step"} <= checkpoint.keys():
        raise BadFileError(f"{path} has no vocabulary or step: it was not written by "
                           "problem3/train.py; delete it and re-run the run")
    return model, config, checkpoint


def vocab_of(checkpoint: dict) -> SmilesVocab:
    """The vocabulary a checkpoint of load_model was trained with."""
    return SmilesVocab(checkpoint["vocab"])


if __name__ == "__main__":
    raise SystemExit(registry_main(RUNS, {"sweep": list(SWEEP), "main": [MAIN_RUN]}))
