"""Problem 1: the head analysis's scorer and the error breakdown, given code.

Students: given; this is what makes evaluate.py's head analysis fast (HeadRemovalScorer,
greedy_reproduces) and what locates each run's errors (carries, breakdown). Your Part E
functions do not need it, and you need not read it.
"""

import copy
from collections import OrderedDict

import torch
from tqdm import tqdm

from problem1.model import NUM_DIGITS


def _evaluate():
    """problem1.evaluate, imported when first used: it imports this module itself."""
    from problem1 import evaluate

    return evaluate


class HeadRemovalScorer:
    """score(removed heads) -> the split's exact match of greedy decoding without those heads.

    It works on one copy of the model, restoring the six W_o weights before each call, and
    remembers every set's score, so that a set asked for twice is scored once. Removing
    decoder heads leaves the encoder output unchanged, so the encoder output is kept for
    the last few sets of removed encoder heads (one per encoder head, plus one).

    Exact match is decided without decoding step by step (see greedy_reproduces): one
    teacher-forced pass of the decoder per set instead of four greedy steps, with the same
    scores (only an argmax tied to the last bit could tell the two ways apart).
    """

    def __init__(self, model, dataset, device, desc: str = "heads"):
        """dataset: .src [N, 7], .tgt_in and .tgt_out [N, 4], as an AdditionDataset."""
        evaluate = _evaluate()
        self.model = copy.deepcopy(model).eval()
        self.W_o = {a: evaluate.attention_module(model, a).W_o.weight.detach().clone()
                    for a in evaluate.ATTENTIONS}
        self.src = dataset.src.to(device)
        self.tgt_in, self.tgt_out = dataset.tgt_in.to(device), dataset.tgt_out
        self.memories = OrderedDict()  # removed encoder heads -> encoder output
        self.capacity = 1 + sum(name.startswith("enc") for name in evaluate.HEAD_NAMES)
        self.calls = 0
        self.scores = {}  # frozenset of removed heads -> exact match
        heads = len(evaluate.HEAD_NAMES)  # ablation, then pruning's 1 + 24 + 23 + ... + 1 scores
        self.progress = tqdm(total=heads + 1 + heads * (heads + 1) // 2, desc=desc,
                             unit="set", mininterval=2, leave=False)

    def __call__(self, removed) -> float:
        self.calls += 1
        self.progress.update()
        if frozenset(removed) not in self.scores:  # pruning's first round repeats the ablation
            self.scores[frozenset(removed)] = self.exact_match(removed)
        return self.scores[frozenset(removed)]

    def exact_match(self, removed) -> float:
        """The split's exact match with the heads `removed`."""
        evaluate = _evaluate()
        with torch.no_grad():
            for attention, weight in self.W_o.items():
                evaluate.attention_module(self.model, attention).W_o.weight.copy_(weight)
        for name in removed:
            evaluate.remove_head(self.model, name)
        key = tuple(sorted(name for name in removed if name.startswith("enc")))
        with torch.inference_mode():
            if key not in self.memories:
                self.memories[key] = self.model.encode(self.src)[0]
                if len(self.memories) > self.capacity:
                    self.memories.popitem(last=False)
            self.memories.move_to_end(key)
            right = greedy_reproduces(self.model, self.memories[key], self.tgt_in,
                                      self.tgt_out.to(self.tgt_in.device)).cpu()
        return right.sum().item() / len(right)


def greedy_reproduces(model, memory, tgt_in, tgt_out) -> torch.Tensor:
    """[N] bool: does greedy decoding from memory output exactly tgt_out?

    Greedy decoding outputs tgt_out if and only if, at every step, the argmax over the ten
    digits after the target's own prefix is the target digit (by induction: while the
    prefix is right, greedy sees exactly what teacher forcing feeds). A causal decoder, as
    Part C requires, computes every step's logits in one teacher-forced pass, so this
    costs one decoder pass over 4 positions instead of greedy's 4 passes over 1-4.

    memory [N, 7, d_model]; tgt_in [N, 4] (BOS, then the first 3 target digits);
    tgt_out [N, 4].
    """
    logits, _, _ = model.decode(tgt_in, memory)  # [N, 4, vocab]
    return (logits[..., :NUM_DIGITS].argmax(dim=-1) == tgt_out).all(dim=1)


def column_carries(src) -> torch.Tensor:
    """src [N, 7] -> [N, 3] carries c0, c1, c2: out of the ones, tens and hundreds column."""
    a, b = src[:, :3].flip(1), src[:, 4:].flip(1)  # [N, 3], ones digit first
    carry, out = torch.zeros(len(src), dtype=torch.long), []
    for place in range(3):
        carry = ((a[:, place] + b[:, place] + carry) >= 10).long()
        out.append(carry)
    return torch.stack(out, dim=1)


def carries(src) -> torch.Tensor:
    """src [N, 7] -> [N] number of carries (0-3) in the column addition of a + b."""
    return column_carries(src).sum(dim=1)


def breakdown(predicted, dataset, digit_order: str) -> dict:
    """Where the errors are: digit accuracy per place of the sum (s0 = ones ... s3 =
    thousands) and exact match by the number of carries in the sum.

    predicted [N, 4] in output order; dataset has .src and .tgt_out, written in digit_order.
    """
    correct = predicted == dataset.tgt_out  # [N, 4] in output order
    if digit_order == "forward":
        correct = correct.flip(1)  # -> place order s0, s1, s2, s3
    count = carries(dataset.src)
    exact = correct.all(dim=1)
    pairs = {c: int((count == c).sum()) for c in range(4)}
    return {
        "place_accuracy": {f"s{p}": correct[:, p].sum().item() / len(correct) for p in range(4)},
        "exact_match_by_carries": {str(c): exact[count == c].sum().item() / n
                                   for c, n in pairs.items() if n},
        "pairs_by_carries": {str(c): n for c, n in pairs.items()},
    }
