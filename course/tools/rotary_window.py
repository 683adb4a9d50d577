"""Problem 2: does rotary fail on long sequences because of keys farther than it ever saw?

    python -m course.tools.rotary_window [--seeds 0 1 2 3 4]
    (make rotary-window; about 2 min)

Rotary was trained on 64 positions, so it never saw a key more than 63 positions away. At
length 512 a query sees up to 511 earlier keys. This retrains the rotary run of each seed
into a scratch folder (the weights are not committed; the logs come out identical to the
committed ones) and runs the evaluation-only length check twice: as
course/tools/problem2_analysis.py does, and with every key 64 or more positions from its
query masked out (Windowed), so that each query sees exactly the distances of training.
Writes problem2/results/rotary_window.json:

    {"max_distance": 64, "seeds": {seed: {"full": buckets, "window": buckets}}}

Instructors only (course/tools/): evidence for the report, not part of the homework.
"""

import dataclasses
import math
import tempfile
from pathlib import Path

import torch

from course.tools.problem2_analysis import (
    TRAIN_LENGTH,
    long_sequence_accuracy,
    long_sequence_check,
    long_sequence_tokens,
)
from problem2 import train
from problem2.config import load_model
from problem2.positional import apply_rotary
from provided.common import ArgumentParser, results_dir, script
from provided.results import read_json, write_json


class Windowed(torch.nn.Module):
    """A rotary OffsetRetrievalModel with every key max_distance or more positions from its
    query masked out: query i sees only the keys i - max_distance + 1 .. i. The forward pass
    is the model's own (problem2/model.py), step by step on its parameters, but for the mask."""

    def __init__(self, model, max_distance: int):
        super().__init__()
        if model.position != "rotary":
            raise ValueError(f"the window applies to the rotary model, not {model.position!r}")
        self.model, self.max_distance = model, max_distance

    def forward(self, tokens: torch.Tensor, return_attention: bool = False):
        """tokens [B, T] -> logits [B, T, vocab] (and attention weights [B, T, T])."""
        m = self.model
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        x = m.tok_emb(tokens)  # [B, T, d]
        q, k, v = m.W_q(x), m.W_k(x), m.W_v(x)  # [B, T, d] each
        q, k = apply_rotary(q, positions), apply_rotary(k, positions)
        scores = q @ k.transpose(-2, -1) / math.sqrt(m.d_model)  # [B, T, T]
        distance = positions[:, None] - positions[None, :]  # [T, T], query - key
        seen = (distance >= 0) & (distance < self.max_distance)
        weights = torch.softmax(scores.masked_fill(~seen, float("-inf")), dim=-1)
        logits = m.head(x + m.W_o(weights @ v))
        return (logits, weights) if return_attention else logits


def seed_buckets(seed: int, scratch: Path) -> dict:
    """{"full", "window"}: the long check's buckets of one seed's rotary run, retrained."""
    out = scratch / f"seed{seed}"
    train.main(["--position", "rotary", "--seed", str(seed), "--results_dir", str(out),
                "--device", "cpu", "--threads", "1"])
    committed = results_dir("problem2") / ("" if seed == 0 else f"seeds/seed{seed}")
    log = "training_log_rotary.json"
    if read_json(out / log) != read_json(committed / log):
        raise SystemExit(f"seed {seed}: the retrained log differs from the committed one")
    model, config, _ = load_model(out / "model_rotary.pth", "cpu")
    full = long_sequence_check(model, config, "cpu")  # what analysis.json reports
    long_model = dataclasses.replace(config, max_len=full["length"]).build_model()
    long_model.load_state_dict(model.state_dict())
    tokens = long_sequence_tokens(full["num_sequences"], full["length"], full["seed"])
    window = long_sequence_accuracy(Windowed(long_model.eval(), TRAIN_LENGTH), tokens,
                                    config.k)
    return {"full": full["buckets"], "window": window["buckets"]}


@script
def main(argv=None) -> int:
    parser = ArgumentParser(__doc__)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="rotary_window_") as scratch:
        seeds = {seed: seed_buckets(seed, Path(scratch)) for seed in args.seeds}
    path = results_dir("problem2") / "rotary_window.json"
    write_json(path, {"max_distance": TRAIN_LENGTH, "seeds": seeds})
    for seed, b in seeds.items():
        print(f"seed {seed}: 448-511 full {b['full'][-1]:.4f}, window {b['window'][-1]:.4f}")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
