"""Sample SMILES strings from a trained model (Problem 3, Part D).

Students: you write generate_batch; the rest is given.

    python sample.py --run pre_lr0.001_w500_s4000        # writes results/samples_{run}.txt

Sampling is batched and incremental: every sequence starts at BOS, the next id is drawn
from softmax(logits / T) at the last position, a sequence is finished at its first EOS,
and a key/value cache (optional) lets each new token cost one position's work.
"""

import argparse

import torch

from problem3.config import RUN_NAME, load_model, vocab_of
from problem3.model import DecoderLM
from provided.common import (
    ArgumentParser,
    HomeworkError,
    add_common_args,
    explicit_results_dir,
    positive_int,
    script,
    setup,
)
from provided.results import atomic_write_text
from provided.smiles import BOS, EOS, PAD, SmilesVocab

NUM_SAMPLES = 1000


@torch.no_grad()
def generate(model: DecoderLM, vocab: SmilesVocab, num_samples: int, temperature: float = 1.0,
             max_len: int = 52, batch_size: int = 500, device="cpu",
             generator: torch.Generator | None = None) -> list[str]:
    """num_samples strings sampled at temperature T; max_len counts BOS and EOS.

    A sequence that reaches max_len - 2 tokens without EOS is decoded as it is.
    generator, if given, must live on device.
    """
    if temperature <= 0:
        raise ValueError(f"temperature must be positive, got {temperature}")
    model.eval()
    samples = []
    for start in range(0, num_samples, batch_size):
        size = min(batch_size, num_samples - start)
        samples += generate_batch(model, vocab, size, temperature, max_len,
                                   torch.device(device), generator)
    return samples


def generate_batch(model, vocab: SmilesVocab, size: int, temperature: float, max_len: int,
                   device: torch.device, generator: torch.Generator | None) -> list[str]:
    """size strings sampled together (generate's work for one batch).

    Every sequence starts at BOS [size, 1]; each step draws the next id of every unfinished
    sequence from softmax(model(ids)[:, -1] / temperature), drawing with generator (so
    that the same generator state gives the same strings), until every sequence has
    produced EOS or holds max_len - 2 tokens after BOS.
    The rows are decoded with vocab.decode, which stops at EOS. model(input_ids) -> logits
    [B, T, V] is all that is needed; DecoderLM's optional kv_cache may make it faster.

    A finished row (one that has produced EOS) gets no more tokens: whatever is drawn or
    written for it after its EOS is never decoded. Drawing for every row at every step and
    putting PAD in the finished rows (so that the generator advances the same way whatever
    has finished), or drawing for the unfinished rows only, are both correct: the strings
    then differ for one seed, and no test compares them with another implementation's.
    """
    # BEGIN SOLUTION
    ids = torch.full((size, 1), BOS, dtype=torch.long, device=device)
    finished = torch.zeros(size, dtype=torch.bool, device=device)
    # The key/value cache: each step then feeds only the newest token. A model that ignores
    # kv_cache (the homework does not ask for one) leaves it empty, and then every step
    # re-runs the whole prefix instead.
    cache = [{} for _ in model.blocks]
    step_input = ids
    for _ in range(max_len - 2):  # BOS, at most max_len - 2 tokens, and room for EOS
        logits = model(step_input, kv_cache=cache)[:, -1] / temperature
        next_id = torch.multinomial(torch.softmax(logits, dim=-1), 1, generator=generator)
        next_id[finished] = PAD
        ids = torch.cat([ids, next_id], dim=1)
        finished |= next_id.squeeze(1) == EOS
        if finished.all():
            break
        step_input = next_id if cache[0] else ids
    return [vocab.decode(row.tolist()) for row in ids.cpu()]
    # END SOLUTION


def sample_run(model, vocab, num_samples: int, temperature: float, seed: int,
               device) -> list[str]:
    """Seeded samples: the same (run, temperature, seed) always gives the same strings."""
    generator = torch.Generator(device=device).manual_seed(seed)
    return generate(model, vocab, num_samples, temperature, max_len=model.max_len,
                    device=device, generator=generator)


def parse_args(argv=None) -> argparse.Namespace:
    parser = ArgumentParser(__doc__)
    parser.add_argument("--run", required=True,
                        help="the run whose results/model_{run}.pth is sampled, e.g. "
                             "pre_lr0.001_w500_s4000")
    parser.add_argument("--num_samples", type=positive_int, default=NUM_SAMPLES)
    parser.add_argument("--temperature", type=float, default=1.0)
    add_common_args(parser, "problem3")
    args = parser.parse_args(argv)
    if not (args.temperature > 0 and args.temperature < float("inf")):
        parser.error(f"argument --temperature: must be a positive number, not "
                     f"{args.temperature}")
    if not RUN_NAME.fullmatch(args.run):
        parser.error(f"argument --run: {args.run!r} is not a run name; runs are named like "
                     "pre_lr0.001_w500_s4000 ({pre,post}_lr{lr}_w{warmup}_s{steps})")
    if (args.seed, args.num_samples) != (0, NUM_SAMPLES):
        explicit_results_dir(args, "problem3", f"sampling with --seed {args.seed} "
                                               f"--num_samples {args.num_samples}")
    return args


@script
def main(argv=None) -> int:
    args = parse_args(argv)
    device = setup(args)
    path = args.results_dir / f"model_{args.run}.pth"
    model, config, checkpoint = load_model(path, device)
    vocab = vocab_of(checkpoint)
    if config.run != args.run:
        raise HomeworkError(f"{path} holds the run {config.run}, not {args.run}: it was renamed or "
                            "overwritten; train the run again")
    samples = sample_run(model, vocab, args.num_samples, args.temperature, args.seed, device)
    suffix = "" if args.temperature == 1.0 else f"_T{args.temperature}"
    path = args.results_dir / f"samples_{args.run}{suffix}.txt"
    atomic_write_text(path, "\n".join(samples) + "\n")
    print(f"wrote {len(samples)} samples to {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
