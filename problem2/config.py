"""Problem 2's run configuration: one dataclass, saved in every checkpoint and training log.

Students: given; skim it for the run's settings.

The homework fixes everything but the position scheme: Adam at learning rate 1e-3, batch
size 64, 5 epochs, d_model 64, one head, offset k = 7, a 128-row learned table; the log's
test accuracy covers the first 64 positions of each test sequence. A run is named after its
position scheme; RUNS holds the four prescribed runs (`python -m problem2.config --list`).
`load_model` rebuilds a trained model, and `Config.build_model` its initial weights, from the
Config alone.
"""

from dataclasses import dataclass

import torch

from problem2.model import POSITIONS, OffsetRetrievalModel
from provided.common import registry_main
from provided.results import load_trained


@dataclass(frozen=True, kw_only=True)
class Config:
    lr: float = 1e-3
    batch_size: int = 64
    epochs: int = 5
    d_model: int = 64  # the model as the homework fixes it (OffsetRetrievalModel's defaults)
    k: int = 7
    max_len: int = 128  # rows of the learned table
    test_positions: int = 64
    position: str
    seed: int = 0
    max_steps: int | None = None  # a cap on optimizer steps, for tests only
    train_sequences: int  # the shape of the training split the run saw
    train_length: int

    @property
    def run(self) -> str:
        return run_name(self.position)

    def build_model(self) -> OffsetRetrievalModel:
        """The untrained model of the run. Torch's generator is reseeded with the run's seed
        right before construction, so that evaluate.py rebuilds exactly the initial weights
        (e.g. the learned table) and training continues from that generator state."""
        torch.manual_seed(self.seed)
        return OffsetRetrievalModel(self.position, d_model=self.d_model, max_len=self.max_len)


def run_name(position: str) -> str:
    return position


# the prescribed runs: name -> train.py's options
RUNS = {run_name(position): {"position": position} for position in POSITIONS}


def load_model(path, device) -> tuple[OffsetRetrievalModel, Config, dict]:
    """(model in eval mode on device, its Config, the checkpoint) from a checkpoint written
    by train.py: provided.results.load_trained's shape, as in every problem."""
    return load_trained(Config, path, device)


if __name__ == "__main__":
    raise SystemExit(registry_main(RUNS))
