"""A try never mixes with results: the README's tries (train, sample, evaluate, figures) run
each in its own --results_dir and touch no real results folder; visualize.py draws a try's
figures into the try's figures/ only; `make submission` leaves a try's files out and says
so, and says when a figure was drawn from another metrics.json than the one beside it."""

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from provided import submission, visualize
from provided.common import REPO_ROOT
from tests.tiny import addition_data, offset_data, smiles_data

pytestmark = pytest.mark.kit

PROBLEMS = ("problem1", "problem2", "problem3")
TRIES = re.compile(r"<!-- tries: begin[^>]*-->\s*```bash\n(.*?)```\s*<!-- tries: end -->", re.S)


def readme_tries() -> list[list[str]]:
    """The README's try commands, each an argv (a line ending in a backslash goes on)."""
    block = TRIES.search((REPO_ROOT / "README.md").read_text(encoding="utf-8"))
    assert block, "README.md has no <!-- tries: begin --> ... <!-- tries: end --> block"
    text = block.group(1).replace("\\\n", " ")
    return [shlex.split(line) for line in text.splitlines() if line.strip()]


def real_results() -> dict[str, tuple[int, int]]:
    """{file of a real results folder: (size, mtime in ns)}."""
    return {str(path): (path.stat().st_size, path.stat().st_mtime_ns)
            for problem in PROBLEMS for path in (REPO_ROOT / problem / "results").rglob("*")
            if path.is_file()}


# ------------------------------------------------------------------------- README's tries
def test_the_readme_shows_one_try_of_each_problem_end_to_end():
    commands = readme_tries()
    scripts = [argv[2] if argv[1] == "-m" else argv[1] for argv in commands]
    for n in (1, 2, 3):
        assert f"problem{n}.train" in scripts and f"problem{n}.evaluate" in scripts
        folders = {argv[argv.index("--results_dir") + 1] for argv in commands
                   if f"problem{n}" in " ".join(argv[:3])}
        assert len(folders) == 1, f"problem {n}'s try uses one --results_dir: {folders}"
    assert "problem3.sample" in scripts
    assert all("--results_dir" in argv for argv in commands), "every try line names its folder"
    p3_eval = next(argv for argv in commands if argv[2:3] == ["problem3.evaluate"])
    assert {"--run", "--sweep_steps", "--num_samples"} <= set(p3_eval)


def test_the_readme_tries_run_and_write_only_into_their_folders(tmp_path):
    """Every line of the README's try block, as written but for the folder (/tmp/tryN: one
    here) and tiny data (--data_dir, appended): each exits 0, each try folder ends with its
    metrics.json and figures drawn from it, and no real results folder changes."""
    data = addition_data(tmp_path)
    offset_data(tmp_path)
    smiles_data(tmp_path)
    before = real_results()
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    for argv in readme_tries():
        argv = [arg.replace("/tmp/", f"{tmp_path}/") for arg in argv]
        if argv[1] == "-m":
            argv += ["--data_dir", str(data)]
        done = subprocess.run([sys.executable, *argv[1:]], cwd=REPO_ROOT, env=env,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, f"{shlex.join(argv)}\n{done.stderr[-3000:]}"
    for n in (1, 2, 3):
        folder = tmp_path / f"try{n}"
        figures = sorted((folder / "figures").glob("*.png"))
        assert figures and (folder / "metrics.json").is_file(), n
        digest = visualize.metrics_digest(folder)
        assert all(visualize.drawn_from(p.read_bytes()) == (True, digest) for p in figures)
    assert real_results() == before


# ----------------------------------------------------------------------- visualize.py
def one_log(results: Path) -> Path:
    results.mkdir(parents=True)
    log = {"run": "forward_n1000", "config": {"digit_order": "forward", "train_size": 1000},
           "steps_to_95": None, "log": [{"step": 50, "val_exact_match": 0.1}]}
    (results / "training_log_forward_n1000.json").write_text(json.dumps(log))
    return results


@pytest.mark.parametrize("flag", ["--results_dir", "--input_dir"])
def test_a_tries_figures_go_into_its_own_folder(tmp_path, capsys, flag):
    """The issue's case: a try's results drawn (--input_dir, the old name, as well) land in
    the try's figures/, never in the real problemN/results/figures."""
    before = real_results()
    results = one_log(tmp_path / "try")
    assert visualize.main(["problem1", flag, str(results)]) == 0
    assert capsys.readouterr().out.startswith(f"wrote {results / 'figures'}/")
    assert [p.name for p in (results / "figures").iterdir()] == ["val_exact_match.png"]
    assert real_results() == before


@pytest.mark.parametrize("argv, says", [
    (["problem1", "--results_dir", "{try}", "--out_dir", "{real}"],
     "is problem1's real figures folder, and the figures would be drawn from"),
    (["data", "--results_dir", "{try}"], "the data figures are drawn from --data_dir"),
    (["problem1", "--data_dir", "{try}"], "problem1's figures are drawn from --results_dir"),
    (["problem1", "--results_dir", "{try}", "--input_dir", "{try}"], "not both"),
])
def test_visualize_refuses_a_try_into_real_figures_and_mixed_flags(tmp_path, capsys, argv,
                                                                   says):
    before = real_results()
    results = one_log(tmp_path / "try")
    real = REPO_ROOT / "problem1" / "results" / "figures"
    argv = [a.format(**{"try": results, "real": real}) for a in argv]
    with pytest.raises(SystemExit) as stop:
        visualize.main(argv)
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.startswith("error: ") and says in err, err
    assert len(err.splitlines()) == 1
    assert real_results() == before and not (results / "figures").exists()


def test_a_figure_records_the_metrics_it_was_drawn_from(tmp_path):
    png = (REPO_ROOT / "data" / "figures" / "carries.png")
    data = png.read_bytes() if png.is_file() else visualize.PNG_SIGNATURE + (
        b"\x00\x00\x00\x00IEND\xaeB`\x82")
    stamped = visualize.with_text(data, visualize.STAMP, json.dumps({"metrics.json": "ab"}))
    assert visualize.drawn_from(stamped) == (True, "ab")
    assert visualize.drawn_from(data) == (False, None)
    assert visualize.png_texts(b"not a png") == {}


# ---------------------------------------------------------------------- make submission
def fake_results(root: Path) -> None:
    """Every problem's graded result files (contents that do not matter here)."""
    from course.grading.kit.test_submission import fake_weights, write

    for problem in PROBLEMS:
        for name in submission.graded_results(problem):
            data = fake_weights() if name.endswith(".pth") else (
                "{}" if name.endswith(".json") else "C\n")
            write(root / problem / "results" / name, data)
        for path in (REPO_ROOT / problem).glob("*.py"):
            write(root / problem / path.name, path.read_bytes())
        write(root / problem / "REPORT.md", "# report\n")
    write(root / "provided" / "handout_code.json",
          (REPO_ROOT / "provided" / "handout_code.json").read_bytes())


def pack(root: Path, out: Path, capsys) -> tuple[int, list[str], set[str]]:
    """(exit status, stderr lines, names in the zip) of make submission on root."""
    import zipfile

    code = submission.main(["--root", str(root), "--out", str(out)])
    lines = capsys.readouterr().err.splitlines()
    with zipfile.ZipFile(out) as archive:
        return code, lines, set(archive.namelist())


def test_a_tries_files_in_a_results_folder_are_left_out_and_named(tmp_path, capsys):
    root = tmp_path / "hw"
    fake_results(root)
    results = root / "problem3" / "results"
    for name in ("training_log_pre_lr0.001_w10_s40.json", "model_pre_lr0.001_w10_s40.pth",
                 "samples_pre_lr0.001_w10_s40.txt"):
        (results / name).write_text("{}")
    metrics = {"main": {"run": "pre_lr0.001_w10_s40"}, "sweep": [{"run": "post_lr0.01_w0_s20"}]}
    (results / "metrics.json").write_text(json.dumps(metrics))
    code, lines, names = pack(root, tmp_path / "s.zip", capsys)
    assert code == 0, lines
    assert lines == [
        "warning: problem3/results holds files of runs that config.py does not prescribe "
        "(tries?), left out of the zip: model_pre_lr0.001_w10_s40.pth, "
        "samples_pre_lr0.001_w10_s40.txt, training_log_pre_lr0.001_w10_s40.json; keep a try "
        "in its own --results_dir",
        "warning: problem3/results/metrics.json is of runs that config.py does not prescribe "
        "(post_lr0.01_w0_s20, pre_lr0.001_w10_s40): a try's evaluation? run `python -m "
        "problem3.evaluate` again (and its figures)"]
    assert not any("w10_s40" in name for name in names)


def test_a_figure_drawn_from_another_metrics_file_is_named(tmp_path, capsys):
    """The issue's case: the real results evaluated, then a try's figures drawn into the real
    figures/ (an --out_dir of old): make submission names them; figures drawn from the
    metrics.json beside them, or from before figures recorded it, are not named."""
    root = tmp_path / "hw"
    fake_results(root)
    results = root / "problem2" / "results"
    (results / "metrics.json").write_text('{"none": {}}')
    figure = visualize.PNG_SIGNATURE + b"\x00\x00\x00\x00IEND\xaeB`\x82"
    (results / "figures").mkdir()
    for name, digest in (("accuracy_by_bucket", visualize.metrics_digest(results)),
                         ("attention_maps", "0" * 64), ("learned_table_drift", None)):
        data = figure if digest is None else visualize.with_text(
            figure, visualize.STAMP, json.dumps({"metrics.json": digest}))
        (results / "figures" / f"{name}.png").write_bytes(data)
    code, lines, names = pack(root, tmp_path / "s.zip", capsys)
    assert code == 0
    assert lines == [
        "warning: problem2/results/figures: 1 figure(s) drawn from another metrics.json than "
        "problem2/results/metrics.json (a try's, or one since replaced): attention_maps.png; "
        "draw them again: python provided/visualize.py problem2"]
    assert "problem2/results/figures/attention_maps.png" in names  # packed all the same
