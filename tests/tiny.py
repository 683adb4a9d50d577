"""Tiny data folders and command lines shared by the tests: nothing here trains for real.

Every writer puts the homework's file layout under root/data (the folder a script's
--data_dir takes) and returns that folder.
"""

import json
import random
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.seam import Remote

FIXTURES = Path(__file__).parent / "fixtures"


def expect_raises(kind: type, function, *args, what: str, **kwargs) -> None:
    """On the tests' side: function(*args, **kwargs) must raise kind (a docstring's promise,
    the wording being the student's); otherwise fail with a message that says what was
    expected and what happened instead (another exception, an assert, or none)."""
    try:
        returned = function(*args, **kwargs)
    except kind:
        return
    except Exception as error:  # noqa: BLE001 (any other type is the mistake to name)
        got = type(error).__name__
        hint = (": an assert is not the documented exception; raise "
                f"{kind.__name__}(...) instead" if isinstance(error, AssertionError)
                else f" ({str(error).splitlines()[0][:200] if str(error) else 'no message'}):"
                f" check the argument before doing anything else with it")
        pytest.fail(f"{what} must raise {kind.__name__}, as its docstring promises, not "
                    f"{got}{hint}", pytrace=False)
    plain = (int, float, str, bool, type(None), Remote)  # a Remote shows its type
    shown = repr(returned) if isinstance(returned, plain) else f"a {type(returned).__name__}"
    pytest.fail(f"{what} must raise {kind.__name__}, as its docstring promises, but it "
                f"returned {shown[:100]}: is the check missing, or the exception caught and "
                "turned into a value?", pytrace=False)


def addition_data(root: Path, n_train: int = 4000, n_eval: int = 24) -> Path:
    """Seeded random pairs as data/addition/{train,val,test}.csv (header a,b)."""
    rng = random.Random(0)
    folder = root / "data" / "addition"
    folder.mkdir(parents=True)
    for split, n in (("train", n_train), ("val", n_eval), ("test", n_eval)):
        lines = [f"{rng.randint(0, 999)},{rng.randint(0, 999)}" for _ in range(n)]
        (folder / f"{split}.csv").write_text("a,b\n" + "\n".join(lines) + "\n")
    return root / "data"


def offset_data(root: Path, n_train: int = 40, n_test: int = 6) -> Path:
    """Seeded uniform tokens as data/offset/train.npy [n_train, 64] and test.npy [n_test, 128]."""
    rng = np.random.default_rng(0)
    folder = root / "data" / "offset"
    folder.mkdir(parents=True)
    np.save(folder / "train.npy", rng.integers(0, 16, size=(n_train, 64)))
    np.save(folder / "test.npy", rng.integers(0, 16, size=(n_test, 128)))
    return root / "data"


def offset_runs(root: Path, evaluate: bool) -> tuple[Path, Path]:
    """(data_dir, results_dir): tiny offset data, the four schemes trained for 3 steps by
    problem2/train.py, then problem2/evaluate.py if evaluate."""
    from problem2 import evaluate as evaluate_script
    from problem2 import train
    from problem2.model import POSITIONS

    data, results = offset_data(root), root / "results"
    args = script_args(root, data)
    for position in POSITIONS:
        assert train.main(["--position", position, "--steps", "3", *args]) == 0
    if evaluate:
        assert evaluate_script.main(args) == 0
    return data, results


class ReadsKeyAtDistance(torch.nn.Module):
    """Stub offset model: query i attends only to key i - distance (to itself when
    i < distance) and predicts token 0 everywhere."""

    def __init__(self, distance: int):
        super().__init__()
        self.distance = distance
        self.unused = torch.nn.Parameter(torch.zeros(1))  # so that it has a device to ask

    def forward(self, tokens, return_attention=False):
        B, T = tokens.shape
        queries = torch.arange(T)
        keys = torch.where(queries >= self.distance, queries - self.distance, queries)
        weights = torch.nn.functional.one_hot(keys, T).float().expand(B, T, T)
        logits = torch.zeros(B, T, 16)
        logits[..., 0] = 1.0
        return (logits, weights) if return_attention else logits


def smiles_data(root: Path) -> Path:
    """The 400 + 100 fixture strings as data/smiles/train.txt and val.txt."""
    folder = root / "data" / "smiles"
    folder.mkdir(parents=True)
    shutil.copy(FIXTURES / "smiles_train.txt", folder / "train.txt")
    shutil.copy(FIXTURES / "smiles_val.txt", folder / "val.txt")
    return root / "data"


def script_args(tmp_path: Path, data: Path) -> list[str]:
    """The options every script takes: this data, results under tmp_path, one CPU thread."""
    return ["--data_dir", str(data), "--results_dir", str(tmp_path / "results"),
            "--device", "cpu", "--threads", "1"]


def p3_train_args(data_dir: Path, results: Path, *extra: str) -> list[str]:
    """problem3/train.py on the fixture: pre-LN, lr 1e-3, warmup 3, batches of 16."""
    return ["--norm", "pre", "--lr", "1e-3", "--warmup", "3", "--batch_size", "16",
            "--data_dir", str(data_dir), "--results_dir", str(results), "--device", "cpu",
            "--threads", "1", *extra]


def read_log(results: Path, run: str) -> dict:
    return json.loads((results / f"training_log_{run}.json").read_text())


def tiny_lm(vocab_size: int = 12, norm: str = "pre", dropout: float = 0.0,
            seed: int = 0):
    """A 2-layer DecoderLM of width 16, seeded (made next to the code under test)."""
    from problem3.model import DecoderLM  # here: the helpers of other problems need it not

    torch.manual_seed(seed)
    return DecoderLM(vocab_size, d_model=16, num_layers=2, num_heads=2, d_ff=32, max_len=12,
                     dropout=dropout, norm=norm)


def modes_during(model: torch.nn.Module, function, *args, **kwargs) -> tuple[set, object]:
    """(the training flags (module.training) of model's submodules while function(*args,
    **kwargs) runs, what it returned): {True} if everything ran in training mode, {False}
    if in eval mode. It runs next to the code under test: reach it through the seam
    (submission("tests.tiny").modes_during), with function a handle too."""
    seen = set()
    hooks = [m.register_forward_pre_hook(lambda module, _: seen.add(module.training))
             for m in model.modules()]
    try:
        result = function(*args, **kwargs)
    finally:
        for hook in hooks:
            hook.remove()
    assert seen, "the model was never called"
    return seen, result


def run_script(name: str, main, argv: list, uses: str) -> None:
    """Run a script's main (a handle through the seam) on argv, here in a test; a failure
    says what the run used, so that a mistake found by a part's own tests is fixed first."""
    import pytest  # here only: this module also runs next to the code under test

    note = (f"this end-to-end run uses your {uses}: if their own tests fail too, fix those "
            "first (the traceback above shows where it broke)")
    try:
        code = main(argv)
    except Exception as error:  # any exception of the run is its failure
        pytest.fail(f"{name} {' '.join(map(str, argv[:4]))} ... raised {type(error).__name__}: "
                    f"{str(error).splitlines()[0] if str(error) else ''}; {note}")
    assert code == 0, f"{name} exited with status {code}; {note}"
