"""Instructors only: an alternative solution of problem1/evaluate.py's regions.

remove_head zeroes the head's columns row by row (the head width from W_o and the head
count of HEAD_NAMES, not from attributes of the attention module), the ablation and the
pruning are explicit loops with a strict-improvement tie-break, and the mean maps are
accumulated in float64 over chunks of the teacher-forced pass on the greedy predictions.
No top-level helpers: splice would append them after this script's `__main__` guard.
"""

from typing import TYPE_CHECKING

import torch

from problem1.dataset import BOS

if TYPE_CHECKING:  # names problem1/evaluate.py imports itself; splice leaves this block out
    from problem1.heads import HEAD_NAMES, attention_module


def remove_head(model, name: str) -> None:
    """Remove head `name` (e.g. 'dec1.cross.h2') in place: zero its d_k input columns of W_o."""
    # BEGIN SOLUTION
    if name not in HEAD_NAMES:
        raise ValueError(f"no head called {name!r}; heads are named like 'enc0.self.h0'")
    prefix, _, label = name.rpartition(".")
    index = int(label.lstrip("h"))
    heads_in_module = sum(1 for other in HEAD_NAMES if other.rpartition(".")[0] == prefix)
    output_projection = attention_module(model, prefix).W_o
    width = output_projection.in_features // heads_in_module
    first, last = index * width, (index + 1) * width
    weight = output_projection.weight
    with torch.no_grad():
        for row in range(weight.shape[0]):
            weight[row, first:last] = 0.0
    # END SOLUTION


def single_head_ablation(score, heads=HEAD_NAMES) -> dict:
    """{head: score([head])}: the test exact match with each head removed alone."""
    # BEGIN SOLUTION
    table = {}
    for candidate in heads:
        table[candidate] = score([candidate])
    return table
    # END SOLUTION


def greedy_pruning(score, heads=HEAD_NAMES) -> list[dict]:
    """Remove heads one at a time, each time the one whose removal costs the least.

    score(removed: list of head names) -> exact match of the model without those heads.
    The cost of every remaining head is recomputed after each removal (ties go to the
    head listed first). Returns [{'removed': [...in order], 'test_exact_match': ...}] for
    0, 1, ..., len(heads) heads removed.
    """
    # BEGIN SOLUTION
    order = list(heads)
    gone = []
    trajectory = [{"removed": [], "test_exact_match": score([])}]
    for _ in range(len(order)):
        chosen, chosen_score = None, None
        for candidate in order:
            if candidate in gone:
                continue
            value = score(gone + [candidate])
            # strictly better only: on a tie the earlier head in `heads` stays chosen
            if chosen is None or value > chosen_score:
                chosen, chosen_score = candidate, value
        gone.append(chosen)
        trajectory.append({"removed": gone[:], "test_exact_match": chosen_score})
    return trajectory
    # END SOLUTION


def mean_attention_maps(model, dataset, device=None) -> dict:
    """Mean attention weights over the split, the decoder fed its own greedy predictions.

    Returns {'encoder': [layers, h, 7, 7] self-attention, 'decoder_self': [layers, h, 4, 4],
    'decoder_cross': [layers, h, 4, 7]}, float tensors on the CPU: row j of a decoder map is
    output step j, column i of a cross map source position i.
    """
    # BEGIN SOLUTION
    if device is None:
        device = next(iter(model.parameters())).device
    model.train(False)
    sources = dataset.src.to(device)
    total = sources.shape[0]
    with torch.no_grad():
        greedy = model.generate(sources)  # [N, 4], what the decoder produced
    start_tokens = torch.full((total, 1), BOS, dtype=greedy.dtype, device=greedy.device)
    decoder_inputs = torch.cat((start_tokens, greedy[:, :-1]), dim=1)
    sums = {}
    chunk = 512
    for begin in range(0, total, chunk):
        with torch.no_grad():
            _, maps = model(sources[begin:begin + chunk], decoder_inputs[begin:begin + chunk])
        for kind in ("encoder", "decoder_self", "decoder_cross"):
            per_layer = torch.stack([w.double().sum(dim=0) for w in maps[kind]])
            sums[kind] = per_layer if kind not in sums else sums[kind] + per_layer
    return {kind: (summed / total).float().cpu() for kind, summed in sums.items()}
    # END SOLUTION
