"""Problem 1: the 24 heads and the fast scorer of head sets behind evaluate.py's head analysis.

Students: given. HEAD_NAMES and attention_module, first below, name the heads and find the
attention each belongs to: your remove_head in evaluate.py uses them. The rest is what
makes the head analysis fast (HeadRemovalScorer, greedy_reproduces); your Part E functions
do not need it, and you need not read it.
"""

import copy
from collections import OrderedDict

import torch
from tqdm import tqdm

from problem1.model import NUM_DIGITS

# The 24 heads, in the order of the report: encoder self-attention of layers 0 and 1, then
# per decoder layer its causal self-attention and its cross-attention.
ATTENTIONS = ["enc0.self", "enc1.self", "dec0.self", "dec0.cross", "dec1.self", "dec1.cross"]
HEAD_NAMES = [f"{attention}.h{h}" for attention in ATTENTIONS for h in range(4)]


def attention_module(model, attention: str):
    """'enc0.self' / 'dec1.cross' ... -> that layer's MultiHeadAttention module."""
    stack, kind = attention.split(".")
    layers = model.encoder_layers if stack.startswith("enc") else model.decoder_layers
    layer = layers[int(stack[3:])]
    return layer.self_attn if kind == "self" else layer.cross_attn


class HeadRemovalScorer:
    """score(removed heads) -> the split's exact match of greedy decoding without those heads,
    each removed by the remove_head it is given (evaluate.py's: remove_head(model, name)).

    It works on one copy of the model, restoring the six W_o weights before each call, and
    remembers every set's score, so that a set asked for twice is scored once. Removing
    decoder heads leaves the encoder output unchanged, so the encoder output is kept for
    the last few sets of removed encoder heads (one per encoder head, plus one).

    Exact match is decided without decoding step by step (see greedy_reproduces): one
    teacher-forced pass of the decoder per set instead of four greedy steps, with the same
    scores (only an argmax tied to the last bit could tell the two ways apart).
    """

    def __init__(self, model, dataset, device, remove_head, desc: str = "heads"):
        """dataset: .src [N, 7], .tgt_in and .tgt_out [N, 4], as an AdditionDataset."""
        self.model = copy.deepcopy(model).eval()
        self.remove_head = remove_head
        self.W_o = {a: attention_module(model, a).W_o.weight.detach().clone()
                    for a in ATTENTIONS}
        self.src = dataset.src.to(device)
        self.tgt_in, self.tgt_out = dataset.tgt_in.to(device), dataset.tgt_out
        self.memories = OrderedDict()  # removed encoder heads -> encoder output
        self.capacity = 1 + sum(name.startswith("enc") for name in HEAD_NAMES)
        self.calls = 0
        self.scores = {}  # frozenset of removed heads -> exact match
        heads = len(HEAD_NAMES)  # ablation, then pruning's 1 + 24 + 23 + ... + 1 scores
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
        with torch.no_grad():
            for attention, weight in self.W_o.items():
                attention_module(self.model, attention).W_o.weight.copy_(weight)
        for name in removed:
            self.remove_head(self.model, name)
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
