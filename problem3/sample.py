"""Sample SMILES strings from a trained model (Problem 3, Part D).

    python sample.py --run pre_lr0.001_w500_s4000        # writes results/samples_{run}.txt

Sampling is batched and incremental: every sequence starts at BOS, the next id is drawn
from softmax(logits / T) at the last position, a sequence is finished at its first EOS,
and a key/value cache means each new token costs one position's work.
"""

import argparse
import sys
from pathlib import Path

import torch

if __package__ in (None, ""):  # run as `python sample.py` from inside problem3/
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from problem3.model import NORMS, DecoderLM  # noqa: E402
from problem3.train import MODEL_CONFIG  # noqa: E402
from provided.common import (  # noqa: E402
    add_common_args,
    atomic_write_text,
    fail,
    load_weights,
    setup,
)
from provided.smiles import BOS, EOS, PAD, SmilesVocab  # noqa: E402

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
        samples += _generate_batch(model, vocab, size, temperature, max_len,
                                   torch.device(device), generator)
    return samples


def _generate_batch(model, vocab, size, temperature, max_len, device, generator) -> list[str]:
    # BEGIN SOLUTION
    ids = torch.full((size, 1), BOS, dtype=torch.long, device=device)
    finished = torch.zeros(size, dtype=torch.bool, device=device)
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
        step_input = next_id
    return [vocab.decode(row.tolist()) for row in ids.cpu()]
    # END SOLUTION


def load_model(results_dir: Path, run: str, device, weights: str | None = None):
    """(model, vocab) of a run, from results/vocab.json and results/model_{weights}.pth."""
    vocab_path = results_dir / "vocab.json"
    if not vocab_path.exists():
        fail(f"{vocab_path} not found: train a run first (python train.py ...)")
    vocab = SmilesVocab.load(vocab_path)
    norm = run.split("_", 1)[0]
    if norm not in NORMS:
        fail(f"run {run!r} does not name a norm: runs are named like pre_lr0.001_w500_s4000")
    model = DecoderLM(len(vocab), norm=norm, **MODEL_CONFIG).to(device)
    try:
        model.load_state_dict(load_weights(results_dir / f"model_{weights or run}.pth", device))
    except FileNotFoundError as err:
        fail(str(err))
    return model.eval(), vocab


def sample_run(model, vocab, num_samples: int, temperature: float, seed: int,
               device) -> list[str]:
    """Seeded samples: the same (run, temperature, seed) always gives the same strings."""
    generator = torch.Generator(device=device).manual_seed(seed)
    return generate(model, vocab, num_samples, temperature, max_len=MODEL_CONFIG["max_len"],
                    device=device, generator=generator)


def main(argv=None) -> Path:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", required=True, help="e.g. pre_lr0.001_w500_s4000")
    parser.add_argument("--num_samples", type=int, default=NUM_SAMPLES)
    parser.add_argument("--temperature", type=float, default=1.0)
    add_common_args(parser, "problem3")
    args = parser.parse_args(argv)
    if not args.temperature > 0:
        parser.error("--temperature must be positive")
    device = setup(args)
    model, vocab = load_model(args.results_dir, args.run, device)
    samples = sample_run(model, vocab, args.num_samples, args.temperature, args.seed, device)
    suffix = "" if args.temperature == 1.0 else f"_T{args.temperature}"
    path = args.results_dir / f"samples_{args.run}{suffix}.txt"
    atomic_write_text(path, "\n".join(samples) + "\n")
    print(f"wrote {len(samples)} samples to {path}")
    return path


if __name__ == "__main__":
    main()
