"""Problem 3's stand-ins: stub models and helpers that run next to the code under test.

A test reaches them as `submission("tests.tiny_problem3").Name(...)`, so that they live in
the same process as the code they are handed to (a test's own lambda or class cannot cross
the seam, tests/seam.py). Each is made of torch alone and reveals no solution; a test may
also build one on its own side, as a trusted twin whose numbers it computes itself.
"""

from pathlib import Path

import torch

from provided.smiles import EOS, HOMEWORK_TOKENS, SmilesVocab
from tests.tiny import modes_during  # noqa: F401  (reached through the seam)


class TinyLM(torch.nn.Module):
    """A stand-in language model with DecoderLM's interface, small enough to follow by hand:
    logits = head(dropout(tok_emb(ids) + pos_emb(positions))), no attention (so it is
    causal at once, and each position's logits depend on its token and position only).

    Like DecoderLM it has max_len, blocks (one, empty) and head (an nn.Linear), and takes
    an optional kv_cache (a list of one dict per block): with it, a call continues the
    positions of the earlier calls, so feeding the whole prefix or only the new tokens gives
    the same logits at the last position. Seeded: every TinyLM of one seed starts alike.
    """

    def __init__(self, vocab_size: int = 12, d_model: int = 16, max_len: int = 12,
                 dropout: float = 0.0, seed: int = 0):
        super().__init__()
        torch.manual_seed(seed)
        self.max_len = max_len
        self.tok_emb = torch.nn.Embedding(vocab_size, d_model)
        self.pos_emb = torch.nn.Embedding(max_len, d_model)
        self.dropout = torch.nn.Dropout(dropout)
        self.blocks = torch.nn.ModuleList([torch.nn.Identity()])  # where a cache would live
        self.head = torch.nn.Linear(d_model, vocab_size)

    def forward(self, input_ids, kv_cache=None):
        T = input_ids.shape[1]
        start = 0
        if kv_cache is not None:
            start = kv_cache[0].get("seen", 0)
            kv_cache[0]["seen"] = start + T
        if start + T > self.max_len:
            raise ValueError(f"TinyLM holds {self.max_len} positions, not {start + T}")
        where = start + torch.arange(T, device=input_ids.device)
        return self.head(self.dropout(self.tok_emb(input_ids) + self.pos_emb(where)))


class ScriptedLM(torch.nn.Module):
    """Emits the ids of `script` in order (then EOS), whatever the temperature.

    The next id depends only on how many positions the sequence holds so far (BOS
    included), so the model gives the same answer whether the sampler re-runs the whole
    prefix each step or, with kv_cache, feeds only the new token: the cache (a list of one
    dict per block, as DecoderLM's) then remembers how many positions it has seen.
    With uses_cache=False it ignores kv_cache, as a model without a cache may (the cache
    stays empty): only the whole prefix, fed again at each step, then gives the script.
    .refed records (positions the cache held, positions fed) for each call that fed more
    than one position to a filled cache (a cache then holds the prefix twice). It has two
    blocks; .shared is True once a cache held one dict for both (DecoderLM's cache is one
    dict per block).
    """

    def __init__(self, script, vocab_size, uses_cache: bool = True):
        super().__init__()
        self.script, self.vocab_size = list(script), vocab_size
        self.uses_cache, self.refed, self.shared = uses_cache, [], False
        self.blocks = torch.nn.ModuleList([torch.nn.Identity(), torch.nn.Identity()])
        self.unused = torch.nn.Parameter(torch.zeros(1))  # so that it has a device to ask

    def forward(self, input_ids, kv_cache=None):
        seen = 0
        if kv_cache is not None and self.uses_cache:
            self.shared = self.shared or kv_cache[0] is kv_cache[-1]
            seen = kv_cache[0].get("seen", 0)
            kv_cache[0]["seen"] = seen + input_ids.shape[1]
            if seen and input_ids.shape[1] > 1:
                self.refed.append((seen, input_ids.shape[1]))
        position = seen + input_ids.shape[1] - 1  # tokens after BOS so far
        next_id = self.script[position] if position < len(self.script) else EOS
        logits = torch.full((input_ids.shape[0], input_ids.shape[1], self.vocab_size), -1e9)
        logits[:, -1, next_id] = 0.0
        return logits


class TableLM(torch.nn.Module):
    """Next-token logits that depend on the current token only: table[token] ([V, V], a
    row of logits per token), at every position. Feeding the whole prefix or, with
    kv_cache, only the new token gives the same logits at the last position."""

    def __init__(self, table):
        super().__init__()
        self.register_buffer("table", torch.as_tensor(table, dtype=torch.float32).clone())
        self.blocks = torch.nn.ModuleList([torch.nn.Identity()])  # for a cache per block
        self.unused = torch.nn.Parameter(torch.zeros(1))  # so that it has a device to ask

    def forward(self, input_ids, kv_cache=None):
        return self.table[input_ids]  # [B, T, V]


class FillsHeadWithNan:
    """A stand-in for problem3.train.train_step: fills the model's head.weight with NaN,
    then takes the step given (the real train_step), so that the run diverges."""

    def __init__(self, step):
        self.step = step

    def __call__(self, model, optimizer, inputs, targets, lr):
        with torch.no_grad():
            model.head.weight.fill_(float("nan"))
        return self.step(model, optimizer, inputs, targets, lr)


class CountsSteps(torch.optim.SGD):
    """SGD that counts its steps (.steps), so that a test sees whether a step was taken even
    where the step changes nothing visible (non-finite gradients)."""

    def __init__(self, params, lr: float = 0.1):
        super().__init__(params, lr=lr)
        self.steps = 0

    def step(self, closure=None):
        self.steps += 1
        return super().step(closure)


class RaisesError:
    """A stand-in function that raises RuntimeError(message) whatever it is given (e.g. for
    tokenize, to see which exceptions is_well_formed lets through)."""

    def __init__(self, message: str):
        self.message = message

    def __call__(self, *args, **kwargs):
        raise RuntimeError(self.message)


def incremental_logits(model, input_ids):
    """model's logits [B, T, V] for input_ids [B, T] fed one token at a time with a kv_cache
    (a list of one dict per block), or None when the model leaves the cache empty (it
    ignores kv_cache, which the homework allows)."""
    cache = [dict() for _block in range(len(model.blocks))]
    steps = [model(input_ids[:, :1], kv_cache=cache)]
    if not any(cache):
        return None
    for t in range(1, input_ids.shape[1]):
        steps.append(model(input_ids[:, t:t + 1], kv_cache=cache))
    return torch.cat(steps, dim=1)


class Answers:
    """A stand-in function that answers each argument from a table given as data, e.g.
    Answers({"CCO": True, "CC(": False}); an argument not in the table raises KeyError."""

    def __init__(self, table: dict):
        self.table = dict(table)

    def __call__(self, value):
        return self.table[value]




class StandInLM(TinyLM):
    """A stand-in for the class DecoderLM where a script builds its model (problem3.config):
    a TinyLM that takes DecoderLM's arguments (vocab_size, d_model, max_len, dropout; the
    others, norm, num_layers, num_heads and d_ff, it has no use for)."""

    def __init__(self, vocab_size: int, d_model: int = 16, max_len: int = 12,
                 dropout: float = 0.0, **unused):
        super().__init__(vocab_size, d_model=d_model, max_len=max_len, dropout=dropout)


class HomeworkVocab:
    """A stand-in for build_vocab: HomeworkVocab()(path) is the vocabulary of the homework's
    22 SMILES tokens (provided/smiles.py), whatever the file holds."""

    def __call__(self, path=None) -> SmilesVocab:
        return SmilesVocab(HOMEWORK_TOKENS)


class GivenSmilesSplit(torch.utils.data.Dataset):
    """A SmilesDataset stand-in made from given tensors: .inputs and .targets [N, L] whole,
    items (inputs[i], targets[i]), and .smiles (the strings it stands for, if given)."""

    def __init__(self, inputs, targets, smiles=()):
        self.inputs, self.targets, self.smiles = inputs, targets, list(smiles)

    def __len__(self) -> int:
        return self.inputs.shape[0]

    def __getitem__(self, index: int):
        return self.inputs[index], self.targets[index]


class GivenSmilesSplits:
    """A stand-in for the class SmilesDataset where a script makes its splits:
    GivenSmilesSplits(table)(path, vocab) is the GivenSmilesSplit of table[file name] =
    (inputs, targets), e.g. table["train.txt"] (the table is data the test made)."""

    def __init__(self, table: dict):
        self.table = {name: tuple(tensors) for name, tensors in table.items()}

    def __call__(self, path, vocab=None):
        return GivenSmilesSplit(*self.table[Path(path).name])


class ScriptedSamples:
    """A stand-in for problem3.sample.generate_batch: ScriptedSamples(strings)(model, vocab,
    size, ...) is the first `size` strings of `strings` repeated, whatever the model."""

    def __init__(self, strings):
        self.strings = list(strings)

    def __call__(self, model, vocab, size: int, *rest, **options) -> list[str]:
        return [self.strings[i % len(self.strings)] for i in range(size)]


def backward_error(model: torch.nn.Module, ids: torch.Tensor) -> str | None:
    """None when the sum of model(ids)'s logits backpropagates in training mode, else the
    first line of the error autograd raised."""
    model.train()
    try:
        model(ids).sum().backward()
    except RuntimeError as error:
        return str(error).splitlines()[0] if str(error) else "RuntimeError"
    return None


def inputs_during(module: torch.nn.Module, function, *args, **kwargs) -> tuple[list, object]:
    """(the input of each call of module while function(*args, **kwargs) runs: its first
    positional argument, or the keyword argument x; what function returned)."""
    seen = []

    def record(_, positional, keywords):
        seen.append((positional[0] if positional else keywords["x"]).detach().clone())

    hook = module.register_forward_pre_hook(record, with_kwargs=True)
    try:
        result = function(*args, **kwargs)
    finally:
        hook.remove()
    return seen, result


# ------------------------------------------------------ used by the tests, on their side
def given_smiles_splits(vocab_size: int = len(HOMEWORK_TOKENS) + 3, length: int = 20,
                        sizes=(("train.txt", 400), ("val.txt", 100))) -> dict:
    """{file name: (inputs, targets) [N, length]} for GivenSmilesSplits: random token ids
    of a vocabulary of vocab_size (BOS first in the inputs, the last targets IGNORE_INDEX as
    padding), not the encoded fixture strings (those are Part A's to build)."""
    from provided.common import IGNORE_INDEX
    from provided.smiles import BOS, SPECIALS

    table = {}
    for seed, (name, n) in enumerate(sizes):
        generator = torch.Generator().manual_seed(seed)
        inputs = torch.randint(len(SPECIALS), vocab_size, (n, length), generator=generator)
        inputs[:, 0] = BOS
        targets = torch.randint(len(SPECIALS), vocab_size, (n, length), generator=generator)
        targets[:, -3:] = IGNORE_INDEX  # as padding
        table[name] = (inputs, targets)
    return table


def stand_in_parts_a_and_b(monkeypatch, scripts=("problem3.run_files",)) -> None:
    """Make the scripts under test run on stand-ins of Parts A and B: build_vocab is
    HomeworkVocab and SmilesDataset GivenSmilesSplits of given_smiles_splits() where the
    modules named make them (train.py's in problem3.run_files, evaluate.py's own), and the
    model built or loaded (problem3.config's DecoderLM) a StandInLM."""
    from tests.seam import submission

    stubs = submission("tests.tiny_problem3")
    splits = stubs.GivenSmilesSplits(given_smiles_splits())
    for script in scripts:
        monkeypatch.setattr(submission(script), "build_vocab", stubs.HomeworkVocab())
        monkeypatch.setattr(submission(script), "SmilesDataset", splits)
    monkeypatch.setattr(submission("problem3.config"), "DecoderLM", stubs.StandInLM)


def write_run(results: Path, log: dict | None = None, checkpoints=(), **options) -> str:
    """A run's files as train.py writes them, written next to the code under test (whose
    DecoderLM must be the StandInLM: stand_in_parts_a_and_b): the untrained model of
    Config(**options), its step checkpoints (steps), its training log (empty, updated by
    log) and vocab.json (HomeworkVocab's). Returns the run's name."""
    from tests.seam import submission

    config_module, saved = submission("problem3.config"), submission("provided.results")
    vocab = submission("tests.tiny_problem3").HomeworkVocab()()
    config = config_module.Config(vocab_size=len(vocab), **options)
    model = config.build_model()
    Path(results).mkdir(parents=True, exist_ok=True)
    vocab.save(Path(results) / "vocab.json")
    for step in checkpoints:
        saved.save_checkpoint(Path(results) / f"model_{config.run}_step{step}.pth", config,
                              model, **config_module.checkpoint_extras(vocab, step))
    run = config.run
    entries = {"run": run, "config": submission("dataclasses").asdict(config), "log": [],
               "val": [], "final_val_loss": None, **(log or {})}
    saved.save_run(results, config, entries, model,
                   **config_module.checkpoint_extras(vocab, options["steps"]))
    return run
