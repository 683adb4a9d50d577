"""Each problem's run registry (RUNS in problemN/config.py) is where a run's name comes from:
its flags, given to that problem's train.py, make a Config whose run name is that name, and
`python -m problemN.config` prints the names and flags the Makefile reads."""

import dataclasses
import importlib
import inspect
import subprocess
import sys

import pytest

from provided.common import REPO_ROOT

pytestmark = pytest.mark.kit


def config_of(problem: int, flags: list[str]):
    """The Config that problemN/train.py would build from flags (without training)."""
    train = importlib.import_module(f"problem{problem}.train")
    config = importlib.import_module(f"problem{problem}.config")
    args = train.parse_args(flags)
    if problem == 1:
        return config.Config(digit_order=args.digit_order, train_size=args.train_size,
                             steps=args.steps, seed=args.seed)
    if problem == 2:
        return config.Config(position=args.position, train_sequences=1, train_length=64)
    return config.Config(norm=args.norm, lr=args.lr, warmup=args.warmup, steps=args.steps,
                         checkpoint_every=args.checkpoint_every)


@pytest.mark.parametrize("problem, count", [(1, 6), (2, 4), (3, 13)])
def test_every_registered_run_is_made_by_its_flags(problem, count):
    config = importlib.import_module(f"problem{problem}.config")
    assert len(config.RUNS) == count
    for name, options in config.RUNS.items():
        flags = config_of(problem, " ".join(
            f"--{key} {value}" for key, value in options.items()).split())
        assert flags.run == name, f"the flags of {name} make the run {flags.run}"


def test_problem1_prescribed_runs_are_the_registry():
    from problem1.config import PRESCRIBED, RUNS
    assert [config.run for config in PRESCRIBED] == list(RUNS)


def test_problem3_registry_holds_the_sweep_and_the_long_run():
    from problem3.config import MAIN_RUN, RUNS, SWEEP
    assert len(SWEEP) == 12 and all(options["steps"] == 1500 for options in SWEEP.values())
    assert {(o["norm"], o["lr"], o["warmup"]) for o in SWEEP.values()} == {
        (norm, lr, warmup) for norm in ("pre", "post") for lr in (1e-3, 1e-2, 3e-2)
        for warmup in (0, 500)}
    assert MAIN_RUN == "pre_lr0.001_w500_s4000"
    assert RUNS[MAIN_RUN] == {"norm": "pre", "lr": 1e-3, "warmup": 500, "steps": 4000,
                              "checkpoint_every": 1000}


def registry(problem: int, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", f"problem{problem}.config", *args],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)


def test_the_command_line_lists_flags_and_writes_makefile_variables():
    from problem3.config import MAIN_RUN, RUNS, SWEEP
    out = registry(3, "--list", "sweep")
    assert out.returncode == 0 and out.stdout.split() == list(SWEEP)
    out = registry(3, "--flags", MAIN_RUN)
    assert out.stdout.strip() == ("--norm pre --lr 0.001 --warmup 500 --steps 4000 "
                                  "--checkpoint_every 1000")
    lines = registry(3, "--make", "P3").stdout.splitlines()
    assert f"P3_RUNS := {' '.join(RUNS)}" in lines
    assert f"P3_MAIN := {MAIN_RUN}" in lines
    assert f"P3_FLAGS_{MAIN_RUN} := {out.stdout.strip()}" in lines


def test_an_unknown_run_name_is_one_line():
    out = registry(2, "--flags", "absolute")
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "invalid choice: 'absolute'" in out.stderr and len(out.stderr.splitlines()) == 1


@pytest.mark.parametrize("problem, model_class, fields", [
    (1, "AdditionTransformer", ("d_model", "num_heads", "d_ff", "num_layers", "dropout")),
    (2, "OffsetRetrievalModel", ("d_model", "max_len")),
    (3, "DecoderLM", ("d_model", "num_layers", "num_heads", "d_ff", "max_len", "dropout")),
])
def test_config_writes_out_the_models_defaults(problem, model_class, fields):
    """A Config states the model's numbers where a reader looks; they must stay the numbers
    the model's constructor takes by default, so that both say the homework's model."""
    config = importlib.import_module(f"problem{problem}.config")
    model = importlib.import_module(f"problem{problem}.model")
    defaults = {name: p.default for name, p in
                inspect.signature(getattr(model, model_class)).parameters.items()}
    config_defaults = {f.name: f.default for f in dataclasses.fields(config.Config)}
    differ = {name: (config_defaults[name], defaults[name]) for name in fields
              if config_defaults[name] != defaults[name]}
    assert not differ, (f"problem{problem}/config.py's Config and {model_class}'s defaults "
                        f"disagree (config, model): {differ}; change both together")
