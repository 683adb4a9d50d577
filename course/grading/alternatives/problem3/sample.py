"""Alternative solution for problem3/sample.py (instructors only).

No key/value cache: every step runs the model over the whole prefix of the sequences that
are still unfinished (the homework allows it). sample.py runs as a script, so the body uses
no new top-level helper.
"""

import torch

from provided.smiles import BOS, EOS, SmilesVocab


def generate_batch(model, vocab: SmilesVocab, size: int, temperature: float, max_len: int,
                   device: torch.device, generator: torch.Generator | None) -> list[str]:
    """size strings sampled together (generate's work for one batch).

    Every sequence starts at BOS [size, 1]; each step draws the next id of every unfinished
    sequence from softmax(model(ids)[:, -1] / temperature), drawing with generator (so
    that the same generator state gives the same strings), until every sequence has
    produced EOS or holds max_len - 2 tokens after BOS.
    The rows are decoded with vocab.decode, which stops at EOS. model(input_ids) -> logits
    [B, T, V] is all that is needed; DecoderLM's optional kv_cache may make it faster.
    """
    prefix = torch.full((size, 1), BOS, dtype=torch.long, device=device)
    kept = [[] for _ in range(size)]  # the ids drawn for each row, up to its EOS
    open_rows = list(range(size))
    budget = max_len - 2
    while open_rows and prefix.shape[1] <= budget:
        rows = torch.tensor(open_rows, dtype=torch.long, device=device)
        scores = model(prefix[rows])[:, -1, :] / temperature
        # Finished rows are not run again; they draw from a uniform stand-in (the draw is
        # thrown away), so that every row still takes one draw from the generator per step.
        probs = torch.ones(size, scores.shape[-1], dtype=scores.dtype, device=device)
        probs[rows] = torch.softmax(scores, dim=-1)
        drawn = torch.multinomial(probs, num_samples=1, generator=generator)
        prefix = torch.cat((prefix, drawn), dim=1)
        tokens = drawn.view(-1).tolist()
        for row in open_rows:
            kept[row].append(tokens[row])
        open_rows = [row for row in open_rows if tokens[row] != EOS]
    return [vocab.decode(ids) for ids in kept]
