"""Problem 3: measure what the report's pre-LN / post-LN argument says, over the first steps.

    python -m course.tools.mechanism            # writes problem3/results/mechanism.json

For pre-LN and post-LN at the sweep's boundary setting (lr 1e-2, no warmup) and at the
healthy setting (lr 1e-3, no warmup), it trains the first 200 steps exactly as train.py does
(the same batches, seed 0) and records every 10 steps:

    update_ratio   per block, ||W_after - W_before|| / ||W_before|| over the block's weight
                   matrices: how far one Adam step moves the layer, relative to its size
    ln_input_rms   per block and LayerNorm (ln1, ln2), the root-mean-square of the LayerNorm's
                   input: in post-LN the sum x + F(x) that it normalizes into the next
                   stream, in pre-LN the residual stream x itself (read, not changed)
    residual_rms   per block, the RMS of the block's output (the residual stream)
    head_grad_norm, total_grad_norm, loss   as in the training log

Instructors only (course/tools/): evidence for the report, not part of the homework.
"""

import math

import torch

from problem3.config import BETAS, Config
from problem3.run_files import load_data
from problem3.train import batch_indices, lr_at_step, train_step
from provided.common import DATA_DIR, ArgumentParser, results_dir, script
from provided.results import write_json

SETTINGS = [("pre", 1e-2), ("post", 1e-2), ("pre", 1e-3), ("post", 1e-3)]
STEPS = 200
EVERY = 10


def rms(x: torch.Tensor) -> float:
    return x.detach().pow(2).mean().sqrt().item()


def measure(norm: str, lr: float, train_set, vocab_size: int) -> dict:
    torch.manual_seed(0)
    config = Config(norm=norm, lr=lr, warmup=0, steps=STEPS, vocab_size=vocab_size)
    model = config.build_model()
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, betas=BETAS)
    seen = {}
    hooks = []
    for i, block in enumerate(model.blocks):
        for name in ("ln1", "ln2"):
            hooks.append(getattr(block, name).register_forward_hook(
                lambda m, args, out, key=f"block{i}.{name}": seen.__setitem__(key, rms(args[0]))))
        hooks.append(block.register_forward_hook(
            lambda m, args, out, key=f"block{i}": seen.__setitem__(key, rms(out))))
    records = []
    for step in range(1, STEPS + 1):
        recorded = step == 1 or step % EVERY == 0
        before = [[p.detach().clone() for p in block.parameters() if p.dim() == 2]
                  for block in model.blocks] if recorded else None
        index = batch_indices(step, len(train_set), config.batch_size, config.seed)
        loss, head, total = train_step(model, optimizer, train_set.inputs[index],
                                       train_set.targets[index], lr_at_step(step, lr, 0))
        if not recorded:
            continue
        ratios = []
        for block, old in zip(model.blocks, before):
            new = [p.detach() for p in block.parameters() if p.dim() == 2]
            moved = math.sqrt(sum((n - o).pow(2).sum().item() for n, o in zip(new, old)))
            size = math.sqrt(sum(o.pow(2).sum().item() for o in old))
            ratios.append(moved / size)
        records.append({"step": step, "loss": loss, "head_grad_norm": head,
                        "total_grad_norm": total, "update_ratio": ratios,
                        "ln_input_rms": {k: v for k, v in seen.items() if ".ln" in k},
                        "residual_rms": [seen[f"block{i}"] for i in range(len(model.blocks))]})
    for hook in hooks:
        hook.remove()
    return {"norm": norm, "lr": lr, "warmup": 0, "records": records}


@script
def main(argv=None) -> int:
    parser = ArgumentParser(__doc__)
    parser.parse_args(argv)
    torch.set_num_threads(1)
    vocab, train_set, _, _ = load_data(DATA_DIR, Config.batch_size)
    runs = [measure(norm, lr, train_set, len(vocab)) for norm, lr in SETTINGS]
    path = results_dir("problem3") / "mechanism.json"
    write_json(path, {"steps": STEPS, "every": EVERY, "runs": runs})
    for run in runs:
        last = run["records"][-1]
        print(f"{run['norm']:>4} lr {run['lr']}: loss {last['loss']:.3f}, update ratio "
              f"{[round(r, 4) for r in last['update_ratio']]}, residual rms "
              f"{[round(r, 2) for r in last['residual_rms']]}")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
