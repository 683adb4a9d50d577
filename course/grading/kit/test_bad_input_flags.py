"""Bad flag values, for every script: one line naming the flag, a non-zero exit, no traceback,
before any work is done (nothing is read or written)."""

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.kit

# script module -> the arguments it requires
SCRIPTS = {
    "problem1.train": ["--digit_order", "forward", "--train_size", "1000"],
    "problem1.evaluate": [],
    "problem2.train": ["--position", "rotary"],
    "problem2.evaluate": [],
    "problem3.train": ["--norm", "pre", "--lr", "1e-3"],
    "problem3.sample": ["--run", "pre_lr0.001_w500_s4000"],
    "problem3.evaluate": [],
}

COMMON_BAD = [  # flags every script takes (provided.common.add_common_args)
    (["--seed", "-1"], "--seed"),
    (["--seed", "one"], "--seed"),
    (["--threads", "0"], "--threads"),
    (["--threads", "-2"], "--threads"),
    (["--device", "nonsense"], "--device"),
]

SPECIFIC_BAD = [
    ("problem1.train", ["--digit_order", "sideways", "--train_size", "1000"], "--digit_order"),
    ("problem1.train", ["--digit_order", "forward", "--train_size", "0"], "--train_size"),
    ("problem1.train", ["--digit_order", "forward", "--train_size", "many"], "--train_size"),
    ("problem1.train", ["--digit_order", "forward"], "--train_size"),  # missing
    ("problem1.train", SCRIPTS["problem1.train"] + ["--steps", "0"], "--steps"),
    ("problem1.train", SCRIPTS["problem1.train"] + ["--steps", "-5"], "--steps"),
    ("problem2.train", ["--position", "absolute"], "--position"),
    ("problem2.train", SCRIPTS["problem2.train"] + ["--steps", "0"], "--steps"),
    ("problem3.train", ["--norm", "mid", "--lr", "1e-3"], "--norm"),
    ("problem3.train", ["--norm", "pre", "--lr", "-1"], "--lr"),
    ("problem3.train", ["--norm", "pre", "--lr", "nan"], "--lr"),
    ("problem3.train", ["--norm", "pre", "--lr", "fast"], "--lr"),
    ("problem3.train", SCRIPTS["problem3.train"] + ["--steps", "0"], "--steps"),
    ("problem3.train", SCRIPTS["problem3.train"] + ["--warmup", "-1"], "--warmup"),
    ("problem3.train", SCRIPTS["problem3.train"] + ["--batch_size", "0"], "--batch_size"),
    ("problem3.train", SCRIPTS["problem3.train"] + ["--checkpoint_every", "-1"],
     "--checkpoint_every"),
    ("problem3.sample", [], "--run"),  # missing
    ("problem3.sample", SCRIPTS["problem3.sample"] + ["--num_samples", "-5"], "--num_samples"),
    ("problem3.sample", SCRIPTS["problem3.sample"] + ["--num_samples", "0"], "--num_samples"),
    ("problem3.sample", SCRIPTS["problem3.sample"] + ["--temperature", "0"], "--temperature"),
    ("problem3.sample", SCRIPTS["problem3.sample"] + ["--temperature", "inf"], "--temperature"),
    ("problem3.evaluate", ["--num_samples", "-5"], "--num_samples"),
    ("problem3.evaluate", ["--num_samples", "0"], "--num_samples"),
    ("problem3.evaluate", ["--sweep_steps", "0"], "--sweep_steps"),
    ("provided.visualize", ["problem9"], "target"),
    ("provided.visualize", [], "target"),
    ("generate_datasets", ["--only", "everything"], "--only"),
]


def main_of(module: str):
    return importlib.import_module(module).main


@pytest.mark.parametrize("module", list(SCRIPTS))
@pytest.mark.parametrize("bad, flag", COMMON_BAD, ids=lambda x: " ".join(x) if
                         isinstance(x, list) else x)
def test_common_flags(module, bad, flag, stops, tmp_path):
    argv = SCRIPTS[module] + ["--results_dir", tmp_path / "results", *bad]
    stops(main_of(module), argv, flag)
    assert not (tmp_path / "results").exists() or not any((tmp_path / "results").iterdir())


@pytest.mark.parametrize("module, argv, flag", SPECIFIC_BAD,
                         ids=[f"{m} {' '.join(a)}" for m, a, _ in SPECIFIC_BAD])
def test_script_flags(module, argv, flag, stops, tmp_path):
    stops(main_of(module), argv, flag)


@pytest.mark.parametrize("module", list(SCRIPTS))
def test_results_dir_that_is_a_file(module, stops, tmp_path):
    afile = tmp_path / "results"
    afile.write_text("not a folder\n")
    stops(main_of(module), SCRIPTS[module] + ["--results_dir", afile, "--device", "cpu"],
          "--results_dir", str(afile), "is a file")
    assert afile.read_text() == "not a folder\n"


def test_moses_csv_that_does_not_exist(stops, tmp_path):
    missing = tmp_path / "moses.csv.gz"
    stops(main_of("generate_datasets"), ["--data_dir", tmp_path / "data", "--only", "smiles",
                                         "--moses_csv", missing], "--moses_csv", str(missing))
    assert not (tmp_path / "data" / "smiles").exists()


def test_visualize_input_dir_that_does_not_exist(stops, tmp_path):
    stops(main_of("provided.visualize"), ["problem1", "--input_dir", tmp_path / "nowhere",
                                          "--out_dir", tmp_path / "figures"],
          str(tmp_path / "nowhere"))


def test_a_bad_flag_on_the_real_command_line(tmp_path, script_env, one_line):
    """The same through `python -m` (the scripts' own entry point), not only main()."""
    result = subprocess.run([sys.executable, "-m", "problem1.train", "--digit_order", "forward",
                             "--train_size", "1000", "--seed", "-1"], cwd=tmp_path,
                            env=script_env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1
    one_line(result.stderr, "--seed", "at least 0")
    result = subprocess.run([sys.executable, str(REPO / "provided" / "visualize.py"), "problem1",
                             "--input_dir", str(tmp_path), "--out_dir", str(tmp_path / "f")],
                            env=script_env, capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    one_line(result.stderr, "nothing to draw", "problem1.train")


def test_a_script_of_another_copy_stops_before_touching_this_one(tmp_path, script_env,
                                                                  one_line):
    """A script file outside the repository that `provided` comes from (a clone run with a
    virtual environment set up in another clone) stops in one line instead of reading and
    writing the other clone's files; main() called from elsewhere (here, pytest) runs."""
    other_copy = tmp_path.resolve() / "other_clone" / "problem1"
    other_copy.mkdir(parents=True)
    (other_copy / "train.py").write_text(
        "from provided.common import script\n\n"
        "@script\ndef main(argv=None):\n    print('ran')\n    return 0\n\n"
        "if __name__ == '__main__':\n    raise SystemExit(main())\n")
    result = subprocess.run([sys.executable, str(other_copy / "train.py")], cwd=other_copy,
                            env=script_env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and "ran" not in result.stdout
    one_line(result.stderr, str(other_copy / "train.py"), str(REPO), "pip install -e .")
    namespace = {}
    exec(compile((other_copy / "train.py").read_text(), str(other_copy / "train.py"), "exec"),
         namespace)
    assert namespace["main"]() == 0
