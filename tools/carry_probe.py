"""Problem 1: where are the carries? Linear probes on the encoder, over five seeds.

    python -m tools.carry_probe     # or `make carry-probe`, which trains the missing models

The report's reading of the attention maps says that in forward order the encoder moves the
lower columns into the higher digits' positions, so that the memory vectors the decoder reads
for a high place already hold the carry into it, and that reversed order has no such need.
This measures that directly. For each n4000 model (forward and reversed, seeds 0-4) a
logistic-regression probe is fitted to read a carry from

    input    the encoder's input at some source positions (token embedding + position)
    memory   the encoder's output (the memory the decoder attends to) at the same positions

and scored on the test pairs. The probes (carry c_i is the carry out of column i):

    c0@tens       c0 from the positions of a1 and b1 (the tens digits)
    c0@hundreds   c0 from the positions of a2 and b2 (the hundreds digits)
    c1@hundreds   c1 from the positions of a2 and b2

From the input no probe can do better than guessing: those positions do not hold the digits
the carry depends on. Where the memory reads well, the encoder has put the lower columns'
carry there. (A probe from all seven input positions would read every carry: c_i is a
linear threshold of the operands' lower digits, e.g. c2 = [a + b >= 1000].) Fitted on
training pairs 4,001-10,000 (pairs the model never trained on), scored on the 2,000 test
pairs; features standardized, L2 penalty 1e-3, L-BFGS.
Writes problem1/results/carry_probe.json:

    {"probes": [...], "majority": {probe: test accuracy of always guessing the commoner value},
     "runs": {run: {seed: {probe: {"input": accuracy, "memory": accuracy}}}}}

Instructors only (tools/): evidence for the report, not part of the homework.
"""

from pathlib import Path

import torch
import torch.nn.functional as F

from problem1.config import ANALYSED_TRAIN_SIZE, load_model, run_name
from problem1.dataset import DIGIT_ORDERS, AdditionDataset
from problem1.heads import column_carries
from provided.common import ArgumentParser, add_common_args, fail, script, setup
from provided.results import write_json

RUNS = {run_name(order, ANALYSED_TRAIN_SIZE): order for order in DIGIT_ORDERS}
SEEDS = (0, 1, 2, 3, 4)
TRAINED_PAIRS = 4000  # the n4000 runs trained on the first 4,000 training pairs
# source positions: a2 a1 a0 + b2 b1 b0
POSITIONS = {"tens": [1, 5], "hundreds": [0, 4]}
PROBES = {"c0@tens": (0, "tens"), "c0@hundreds": (0, "hundreds"),
          "c1@hundreds": (1, "hundreds")}
L2 = 1e-3


@torch.no_grad()
def features(model, src: torch.Tensor) -> dict:
    """{'input': [N, 7, d_model], 'memory': [N, 7, d_model]} of a model in eval mode."""
    return {"input": model.embed(src), "memory": model.encode(src)[0]}


def probe_accuracy(x_fit, y_fit, x_test, y_test) -> float:
    """Test accuracy of an L2-penalized logistic regression fitted on (x_fit, y_fit)."""
    mean, std = x_fit.mean(0), x_fit.std(0).clamp_min(1e-6)
    x_fit, x_test = (x_fit - mean) / std, (x_test - mean) / std
    torch.manual_seed(0)
    weight = torch.zeros(x_fit.shape[1], requires_grad=True)
    bias = torch.zeros(1, requires_grad=True)
    optimizer = torch.optim.LBFGS([weight, bias], max_iter=200, line_search_fn="strong_wolfe")

    def closure():
        optimizer.zero_grad()
        loss = F.binary_cross_entropy_with_logits(x_fit @ weight + bias, y_fit.float())
        loss = loss + L2 * weight.square().sum()
        loss.backward()
        return loss
    optimizer.step(closure)
    with torch.no_grad():
        return ((x_test @ weight + bias > 0).long() == y_test).float().mean().item()


def probe_model(model, fit_src, test_src) -> dict:
    """{probe: {'input': accuracy, 'memory': accuracy}} of one model."""
    fit, test = features(model, fit_src), features(model, test_src)
    fit_y, test_y = column_carries(fit_src), column_carries(test_src)
    out = {}
    for probe, (carry, where) in PROBES.items():
        cols = POSITIONS[where]
        out[probe] = {kind: probe_accuracy(fit[kind][:, cols].flatten(1), fit_y[:, carry],
                                           test[kind][:, cols].flatten(1), test_y[:, carry])
                      for kind in ("input", "memory")}
    return out


def model_path(results: Path, run: str, seed: int) -> Path:
    """Seed 0's weights sit in results/, the other seeds' in results/seeds/seed{S}/."""
    folder = results if seed == 0 else results / "seeds" / f"seed{seed}"
    return folder / f"model_{run}.pth"


@script
def main(argv=None) -> int:
    parser = ArgumentParser(__doc__)
    add_common_args(parser, "problem1")
    args = parser.parse_args(argv)
    setup(args)
    paths = {(run, seed): model_path(args.results_dir, run, seed) for run in RUNS for seed in SEEDS}
    missing = [path for path in paths.values() if not path.exists()]
    if missing:
        fail(f"{missing[0]} not found ({len(missing)} of {len(RUNS) * len(SEEDS)} models "
             "missing): `make carry-probe` trains them (about 25 minutes on two cores)")
    src = {split: AdditionDataset(args.data_dir, split, "forward").src
           for split in ("train", "test")}
    fit_src, test_src = src["train"][TRAINED_PAIRS:], src["test"]
    test_y = column_carries(test_src)
    result = {"probes": list(PROBES),
              "majority": {probe: max(test_y[:, c].float().mean().item(),
                                      1 - test_y[:, c].float().mean().item())
                           for probe, (c, _) in PROBES.items()},
              "runs": {}}
    for run in RUNS:
        result["runs"][run] = {}
        for seed in SEEDS:
            model, _ = load_model(paths[run, seed], "cpu")
            result["runs"][run][str(seed)] = probe_model(model, fit_src, test_src)
            print(run, seed, result["runs"][run][str(seed)])
    out = args.results_dir / "carry_probe.json"
    write_json(out, result)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
