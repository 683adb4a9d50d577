"""Training throughput of each problem's model at its prescribed batch.

    python -m course.tools.bench                    # one thread, a markdown table for the README
    python -m course.tools.bench --threads 2 --steps 20
    python -m course.tools.bench --profile          # where Problem 3's step spends its time

For each model it times full training steps (forward, backward, optimizer), counts the
model's FLOPs per step with torch's FlopCounterMode (matrix multiplies and attention,
forward and backward), and divides the achieved rate by this machine's measured fp32
matrix-multiply rate. Problem 3 is measured side by side with a straightforward
nanoGPT-style implementation of the same configuration (fused qkv projection, is_causal
attention), to show that the course model loses nothing to it.
"""

import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile
from torch.utils.flop_counter import FlopCounterMode

from provided.common import ArgumentParser, positive_int, script


def matmul_rate(size: int = 1024, repeats: int = 10) -> float:
    """Measured fp32 matrix-multiply rate, FLOP/s (best of `repeats`)."""
    a, b = torch.randn(size, size), torch.randn(size, size)
    a @ b
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - start)
    return 2 * size**3 / best


def step_flops(step) -> int:
    with FlopCounterMode(display=False) as counter:
        step()
    return counter.get_total_flops()


def time_steps(step, steps: int, warmup: int = 3) -> float:
    """Median seconds per call of step."""
    for _ in range(warmup):
        step()
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2]


def training_step(model, loss_fn):
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)

    def step():
        optimizer.zero_grad(set_to_none=True)
        loss_fn(model).backward()
        optimizer.step()
    return step


# ------------------------------------------------------------------------------ models
def problem1_step():
    from problem1.model import AdditionTransformer

    src, tgt = torch.randint(0, 12, (128, 7)), torch.randint(0, 10, (128, 4))

    def loss(model):
        logits, _ = model(src, tgt)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1))
    return training_step(AdditionTransformer().train(), loss)


def problem2_step():
    from problem2.model import OffsetRetrievalModel

    tokens = torch.randint(0, 16, (64, 64))

    def loss(model):
        logits = model(tokens)
        return F.cross_entropy(logits.reshape(-1, 16), tokens.reshape(-1))
    return training_step(OffsetRetrievalModel("rotary").train(), loss)


def lm_loss(ids):
    def loss(model):
        logits = model(ids[:, :-1])
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))
    return loss


def problem3_step():
    from problem3.config import Config

    model = Config(norm="pre", lr=1e-3, vocab_size=25).build_model()
    return training_step(model.train(), lm_loss(torch.randint(3, 25, (128, 52))))


class NanoGPTBlock(nn.Module):
    """nanoGPT's Block (Karpathy), as written there: fused qkv, is_causal attention."""

    def __init__(self, d, h, d_ff, dropout):
        super().__init__()
        self.h = h
        self.ln_1, self.ln_2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.c_attn, self.c_proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, d_ff), nn.GELU(), nn.Linear(d_ff, d),
                                 nn.Dropout(dropout))
        self.resid_dropout = nn.Dropout(dropout)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.h, C // self.h).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.resid_dropout(self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C)))
        return x + self.mlp(self.ln_2(x))


class NanoGPT(nn.Module):
    def __init__(self, vocab, d=128, layers=4, h=4, d_ff=512, max_len=52, dropout=0.1):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(max_len, d)
        self.drop = nn.Dropout(dropout)
        self.h = nn.ModuleList(NanoGPTBlock(d, h, d_ff, dropout) for _ in range(layers))
        self.ln_f, self.lm_head = nn.LayerNorm(d), nn.Linear(d, vocab)

    def forward(self, idx):
        x = self.drop(self.wte(idx) + self.wpe(torch.arange(idx.shape[1])))
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x))


def nanogpt_step():
    return training_step(NanoGPT(25).train(), lm_loss(torch.randint(3, 25, (128, 52))))


def profile_table(step, steps: int, rows: int) -> str:
    """torch.profiler's operator table of `steps` calls of step (after 3 warm-up calls),
    by self CPU time: where the step's time goes, operator by operator."""
    for _ in range(3):
        step()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            step()
    return prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=rows)


BENCHMARKS = {
    "Problem 1: addition transformer, batch 128": problem1_step,
    "Problem 2: offset retrieval (rotary), batch 64 x 64": problem2_step,
    "Problem 3: DecoderLM (pre-LN), batch 128 x 51": problem3_step,
    "Problem 3 as nanoGPT writes it (reference)": nanogpt_step,
}


@script
def main(argv=None) -> int:
    parser = ArgumentParser(__doc__)
    parser.add_argument("--threads", type=positive_int, default=1)
    parser.add_argument("--steps", type=positive_int, default=10, help="timed steps per model")
    parser.add_argument("--profile", action="store_true",
                        help="instead of the table, profile Problem 3's step and the "
                             "nanoGPT-style one, operator by operator")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    if args.profile:
        for name in list(BENCHMARKS)[2:]:
            print(f"{name}, {args.steps} steps\n"
                  f"{profile_table(BENCHMARKS[name](), args.steps, rows=15)}")
        return 0
    peak = matmul_rate()
    print(f"fp32 matmul rate, {args.threads} thread(s): {peak / 1e9:.1f} GFLOP/s\n")
    print("| model | steps/s | s/step | GFLOP/step | GFLOP/s | of matmul rate |")
    print("|---|---|---|---|---|---|")
    rows = []
    for name, make_step in BENCHMARKS.items():
        step = make_step()
        flops = step_flops(step)
        seconds = time_steps(step, args.steps)
        rows.append({"model": name, "seconds": seconds, "flops": flops})
        print(f"| {name} | {1 / seconds:.2f} | {seconds:.3f} | {flops / 1e9:.2f} | "
              f"{flops / seconds / 1e9:.1f} | {flops / seconds / peak:.0%} |", flush=True)
    ours, reference = rows[2]["seconds"], rows[3]["seconds"]
    print(f"\nProblem 3 step time, ours / nanoGPT-style: {ours / reference:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
