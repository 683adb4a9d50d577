"""Problem 2's run configuration: one dataclass, saved in every checkpoint and training log.

Students: given; skim it for the run's settings.

The homework fixes everything but the position scheme: Adam at learning rate 1e-3, batch
size 64, 5 epochs, d_model 64, one head, offset k = 7, a 128-row learned table; the log's
test accuracy covers the first 64 positions of each test sequence. A run is named after its
position scheme. `load_model` rebuilds a trained model, and `build_model` its initial
weights, from the Config alone.
"""

from dataclasses import dataclass

import torch

from problem2.model import OffsetRetrievalModel
from provided.common import (
    config_from_checkpoint,
    load_checkpoint,
    load_state,
    signature_defaults,
)

_MODEL_DEFAULTS = signature_defaults(OffsetRetrievalModel)


@dataclass(frozen=True, kw_only=True)
class Config:
    optimizer: str = "Adam"
    lr: float = 1e-3
    batch_size: int = 64
    epochs: int = 5
    d_model: int = _MODEL_DEFAULTS["d_model"]
    num_heads: int = 1
    k: int = 7
    max_len: int = _MODEL_DEFAULTS["max_len"]
    test_positions: int = 64
    position: str
    seed: int = 0
    max_steps: int | None = None  # a cap on optimizer steps, for tests only
    train_sequences: int  # the shape of the training split the run saw
    train_length: int

    @property
    def run(self) -> str:
        return self.position

    @property
    def prescribed(self) -> bool:
        return self.seed == 0 and self.max_steps is None


def build_model(config: Config) -> OffsetRetrievalModel:
    """The untrained model of a run: torch's generator is reseeded right before construction,
    so evaluate.py rebuilds exactly the initial weights (e.g. the learned table)."""
    torch.manual_seed(config.seed)
    return OffsetRetrievalModel(config.position, d_model=config.d_model, max_len=config.max_len)


def load_model(path, device) -> tuple[OffsetRetrievalModel, Config]:
    """(model in eval mode on device, its Config) from a checkpoint written by train.py."""
    checkpoint = load_checkpoint(path, device)
    config = config_from_checkpoint(Config, checkpoint, path)
    model = load_state(build_model(config), checkpoint, path)
    return model.to(device).eval(), config
