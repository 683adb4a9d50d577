"""Problem 1's run configuration: one dataclass, saved in every checkpoint and training log.

Students: given; skim it for the run's settings.

The homework fixes everything but the digit order and the training size: Adam at learning
rate 1e-3, batch size 128, 2,400 steps, greedy validation every 50 steps, and the model's
defaults (2 + 2 layers, d_model 128, 4 heads, d_ff 256, dropout 0.1). A run is named
{digit_order}_n{train_size}; RUNS holds the six prescribed runs (`python -m problem1.config
--list`). `load_model` rebuilds a trained model from its checkpoint alone.
"""

from dataclasses import dataclass

from problem1.dataset import DIGIT_ORDERS
from problem1.model import AdditionTransformer
from provided.common import registry_main
from provided.results import load_trained

TRAIN_SIZES = (1000, 2000, 4000)
ANALYSED_TRAIN_SIZE = 4000  # the runs whose heads are ablated, pruned and mapped
THRESHOLD = 0.95  # steps_to_95: the first logged step whose val exact match reaches this
MODEL_ARGS = ("d_model", "num_heads", "d_ff", "num_layers", "dropout")  # as AdditionTransformer's


@dataclass(frozen=True, kw_only=True)
class Config:
    digit_order: str
    train_size: int
    lr: float = 1e-3
    batch_size: int = 128
    steps: int = 2400
    eval_every: int = 50
    seed: int = 0
    # the model, as the homework fixes it (AdditionTransformer's defaults)
    d_model: int = 128
    num_heads: int = 4
    d_ff: int = 256
    num_layers: int = 2
    dropout: float = 0.1

    @property
    def run(self) -> str:
        return run_name(self.digit_order, self.train_size)

    def build_model(self) -> AdditionTransformer:
        return AdditionTransformer(**{name: getattr(self, name) for name in MODEL_ARGS})


def run_name(digit_order: str, train_size: int) -> str:
    return f"{digit_order}_n{train_size}"


# the prescribed runs: name -> train.py's options
RUNS = {run_name(order, size): {"digit_order": order, "train_size": size}
        for order in DIGIT_ORDERS for size in TRAIN_SIZES}
PRESCRIBED = [Config(**options) for options in RUNS.values()]
# the runs whose heads are analysed (evaluate.py) and whose carries are probed: name -> order
ANALYSED = {run_name(order, ANALYSED_TRAIN_SIZE): order for order in DIGIT_ORDERS}


def load_model(path, device) -> tuple[AdditionTransformer, Config, dict]:
    """(model in eval mode on device, its Config, the checkpoint) from a checkpoint written
    by train.py: provided.results.load_trained's shape, as in every problem."""
    return load_trained(Config, path, device)


if __name__ == "__main__":
    raise SystemExit(registry_main(RUNS, {"analysed": list(ANALYSED)}))
