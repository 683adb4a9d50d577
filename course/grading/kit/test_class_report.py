"""The class report (course/grading/class_report.py) on a class of planted mistakes, really graded,
and on a small class written by hand.

Five submissions are the reference with planted mistakes of course/grading/mutants.py (one with
two, in two parts; one without its problem2/dataset.py; one without any), graded on p1b and
p2a by course.grading.grade's own grade_folder, and a sixth that the grader fails on (a "not
graded" row). grade_folder keeps each submission's results.json in
graded_code/<submission>/, where the report looks for it. The report then builds its
catalogue of p1b's and p2a's mistakes (each planted alone and graded) and must name each
planted mistake with its count. About 40 s on 2 cores.

The hand-written class (results.json and catalogue written here, in the judge's output format,
nothing graded) checks HOW tests fail: a correct submission whose functions raise NameError
(a module constant the grader left out) fails the tests a flipped mask fails, and must be
reported as the NameError, not as the flipped mask; a genuine flip is still attributed.
"""

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from course.grading import class_report, grade, mutants, rubric
from provided.common import REPO_ROOT

pytestmark = [pytest.mark.kit, pytest.mark.timeout(400)]
PARTS = ["p1b", "p2a"]
PLANTED = {"a_no_scale": ["p1b_no_scale"],
           "b_no_scale_and_targets_forward": ["p1b_no_scale", "p2a_targets_forward"],
           "c_mask_flipped": ["p1b_mask_flipped"],
           "d_reference": [],
           "e_no_problem2_dataset": [],
           "f_grader_fails": []}
BY_NAME = {m.name: m for m in mutants.MUTANTS}


def planted(folder: Path, names: list[str]) -> Path:
    """The reference problem folders with the named mistakes planted."""
    for path in REPO_ROOT.glob("problem*/*.py"):
        name = path.relative_to(REPO_ROOT).as_posix()
        text = path.read_text()
        for mistake in names:
            if BY_NAME[mistake].file == name:
                text = BY_NAME[mistake].apply(text)
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    return folder


def report_cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "course.grading.class_report", *map(str, args)],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def graded_class(tmp_path_factory):
    """(the CSV, the report's folder, the report command's completed process)."""
    root = tmp_path_factory.mktemp("class")
    submissions = root / "submissions"
    for name, mistakes in PLANTED.items():
        planted(submissions / name, mistakes)
    (submissions / "e_no_problem2_dataset" / "problem2" / "dataset.py").unlink()
    csv_path = root / "graded" / "scores.csv"
    csv_path.parent.mkdir()
    real = grade.grade

    def grade_or_fail(path, grader, parts, out, budget, keep=None):
        if path.name == "f_grader_fails":
            raise RuntimeError("a planted grader failure")
        return real(path, grader, parts, out, budget, keep=keep)

    grader = grade.setup(PARTS)
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(grade, "grade", grade_or_fail)
            grade.grade_folder(submissions, csv_path, grader, PARTS, 300)
    finally:
        grader.close()
    done = report_cli(csv_path)  # builds the catalogue of p1b's and p2a's mistakes
    return csv_path, csv_path.parent / "class_report", done


def rows_naming(text: str, needle: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("|") and needle in line]


def count_of(row: str) -> str:
    return next(cell.strip() for cell in row.split("|") if re.fullmatch(r"\s*\d+ \(\d+ %\)\s*",
                                                                         cell))


def test_the_page_names_each_planted_mistake_with_its_count(graded_class):
    csv_path, out, done = graded_class
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    text = (out / "class_report.md").read_text()
    catalogue = json.loads((out / "mistakes.json").read_text())
    assert {m.name for m in mutants.MUTANTS if m.part in PARTS} <= set(catalogue)
    assert "6 submissions in the CSV: 5 graded, 1 not graded" in text
    assert "the grader failed (RuntimeError: a planted grader failure) (f_grader_fails)" in text
    part_b = text.split("### p1b")[1].split("###")[0]
    part_a = text.split("### p2a")[1].split("###")[0]
    expected = {("p1b_no_scale", part_b): "2 (40 %)", ("p1b_mask_flipped", part_b): "1 (20 %)",
                ("p2a_targets_forward", part_a): "1 (20 %)"}
    for (mistake, section), count in expected.items():
        found = rows_naming(section, f"`{mistake}`")
        assert len(found) == 1 and count_of(found[0]) == count, (mistake, section)
        assert BY_NAME[mistake].mistake in found[0]
    missing = rows_naming(part_a, "every test fails: file or folder missing")
    assert len(missing) == 1 and count_of(missing[0]) == "1 (20 %)"
    assert "3 (60 %) lose points" in part_b and "2 (40 %) lose points" in part_a
    assert not rows_naming(part_b, "| other |") and not rows_naming(part_a, "| other |"), \
        "a planted mistake's failing tests are all explained by it"
    top = text.split("## Most common mistakes")[1].split("##")[0]
    assert "`p1b_no_scale`" in rows_naming(top, "| p1b |")[0]
    assert "| p1b Attention | 8 |" in text


def test_no_test_output_reaches_the_page(graded_class):
    """Test names only: an assertion's message (which may hold a reference value) never."""
    csv_path, out, _ = graded_class
    text = (out / "class_report.md").read_text()
    outputs = {line.strip() for path in (csv_path.parent / "graded_code").glob("*/results.json")
               for t in json.loads(path.read_text())["tests"]
               for line in t["output"].splitlines() if len(line.strip()) > 25}
    assert outputs and not [line for line in outputs if line in text]
    assert "Expected" not in text and "Traceback" not in text


def test_the_distribution_figure_is_written(graded_class):
    _, out, done = graded_class
    figure = out / "figures" / "scores_per_part.png"
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and figure.stat().st_size > 10_000
    assert "](figures/scores_per_part.png)" in (out / "class_report.md").read_text()
    assert not list(out.rglob("*.tmp*")), "every write is renamed into place"
    assert str(out / "class_report.md") in done.stdout


def test_a_row_not_graded_is_one_warning_line(graded_class):
    _, _, done = graded_class
    lines = [line for line in done.stderr.splitlines() if "f_grader_fails" in line]
    assert len(lines) == 1 and lines[0].startswith("warning:") and "grade it again" in lines[0]
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_a_results_file_that_is_not_json_is_one_line_and_left_out(graded_class, tmp_path,
                                                                   capsys):
    csv_path, out, _ = graded_class
    copy = tmp_path / "graded"
    shutil.copytree(csv_path.parent, copy)
    broken = copy / "graded_code" / "a_no_scale" / "results.json"
    broken.write_text('{"score": 3, "tests": [')
    code = class_report.main([str(copy / "scores.csv"), "--catalogue",
                              str(out / "mistakes.json"), "--out", str(tmp_path / "report")])
    err = capsys.readouterr().err
    assert code == 0 and "Traceback" not in err
    lines = [line for line in err.splitlines() if str(broken) in line]
    assert len(lines) == 1 and "not JSON" in lines[0] and "grade a_no_scale again" in lines[0]
    text = (tmp_path / "report" / "class_report.md").read_text()
    assert re.search(r"left out: 1 whose results.json is not JSON \(.*\) \(a_no_scale\)", text)
    part_b = text.split("### p1b")[1].split("###")[0]
    assert count_of(rows_naming(part_b, "`p1b_no_scale`")[0]) == "1 (25 %)"


@pytest.mark.parametrize("case", ["no csv", "not a grading csv", "bad catalogue"])
def test_bad_input_is_one_line(graded_class, tmp_path, capsys, case):
    csv_path, out, _ = graded_class
    args, needle = [str(csv_path), "--out", str(tmp_path / "report")], str(csv_path)
    if case == "no csv":
        args[0] = needle = str(tmp_path / "nowhere.csv")
    elif case == "not a grading csv":
        args[0] = needle = str(tmp_path / "other.csv")
        Path(needle).write_text("name,points\nx,1\n")
    else:
        needle = str(tmp_path / "mistakes.json")
        Path(needle).write_text("{not json")
        args += ["--catalogue", needle]
    with pytest.raises(SystemExit) as stop:
        class_report.main(args)
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1 and err.startswith("error:") and needle in err
    assert not (tmp_path / "report" / "class_report.md").exists()


# ----------------------------------------------------------- how a test fails: a hand-made class
def named(test: str, hidden: bool = False) -> str:
    return f"problem1 B (p1b): {test}" + (" [hidden]" if hidden else "")


FLIPPED = ("AssertionError: a boolean mask must let each query attend where it is True and "
           "nowhere else, the scores scaled as without a mask: your result is exactly what it "
           "gives when the mask's polarity is flipped (True must mean attend, not block)\n"
           "Tensor-likes are not close!\n\nMismatched elements: {n} / 120 (100.0%)\n\n"
           "    def test_sdpa_masks(qkv, shape):\n>       assert_close(out, expected)\n"
           "E       AssertionError: a boolean mask must let each query attend where it is True\n"
           "\ntests/test_problem1_attention.py:180: AssertionError")
MHA_WRONG = ("AssertionError: MultiHeadAttention must match torch.nn.MultiheadAttention with the "
             "same weights: MultiHeadAttention gives the wrong result, and "
             "scaled_dot_product_attention fails its own tests too: fix "
             "scaled_dot_product_attention first\n\n"
             "E       AssertionError: MultiHeadAttention must match\n"
             "\ntests/test_problem1_attention.py:280: AssertionError")
HIDDEN_WRONG = "AssertionError: the blocked keys' weight must be 0, got 0.4183 (expected 0.0)"
NAME_ERROR = ("NameError: name 'NEG_INF' is not defined\nin the code under test:\n"
              "Traceback (most recent call last):\n"
              '  File "problem1/attention.py", line 26, in scaled_dot_product_attention\n'
              "    scores = scores.masked_fill(~mask, NEG_INF)\n"
              "NameError: name 'NEG_INF' is not defined\n\n"
              ">       out, weights = scaled_dot_product_attention(q, k, v, mask)\n"
              "E       NameError: name 'NEG_INF' is not defined\n"
              "\ntests/test_problem1_attention.py:177: NameError")
CAUSAL_WRONG = ("AssertionError: causal_mask must return a bool tensor (True = attend), not "
                "torch.int64\n\nE       AssertionError: causal_mask must return a bool tensor")
CAUSAL_UPPER = ("AssertionError: causal_mask(4) is wrong: it is True above the diagonal, False "
                "on and below: torch's convention (True = blocked)")
NOT_IMPLEMENTED = ("NotImplementedError: write scaled_dot_product_attention (Problem 1, Part B)"
                   "\n\nE       NotImplementedError")
TESTS = [named("test_causal_mask"), named("test_sdpa_scales_by_sqrt_dk"),
         named("test_sdpa_masks[query_key]"), named("test_sdpa_masks[per_sequence]"),
         named("test_mha_matches_torch_multihead_attention[True]"),
         named("test_blocked_weights_zero", hidden=True)]
FLIP_TESTS = {TESTS[2]: FLIPPED.format(n=120), TESTS[3]: FLIPPED.format(n=96),
              TESTS[4]: MHA_WRONG, TESTS[5]: HIDDEN_WRONG}
CLASS = {"a_reference": {},
         "b_handout": dict.fromkeys(TESTS, NOT_IMPLEMENTED),
         "c_partial": {TESTS[0]: CAUSAL_WRONG, **FLIP_TESTS},  # flipped: 96 of 120 differ
         "d_neg_inf_dropped": dict.fromkeys(TESTS[2:], NAME_ERROR)}


def hand_catalogue(path: Path, old: bool = False) -> Path:
    """p1b_mask_flipped, p1b_causal_mask_upper and p1b_no_scale as course.grading.mutants --json
    writes them (the kinds as failure_kind reads the planted mistake's outputs), or in the
    format before the kinds (old)."""
    caught = {"p1b_mask_flipped": {**FLIP_TESTS, TESTS[3]: FLIPPED.format(n=120)},
              "p1b_causal_mask_upper": {TESTS[0]: CAUSAL_UPPER},
              "p1b_no_scale": {TESTS[1]: "AssertionError: scores must be scaled by 1/sqrt(d_k)"}}
    data = {}
    for name, outputs in caught.items():
        data[name] = {"public": [t for t in outputs if not t.endswith("[hidden]")],
                      "hidden": [t for t in outputs if t.endswith("[hidden]")]}
        if not old:
            data[name]["kinds"] = {t: class_report.failure_kind(o) for t, o in outputs.items()}
    path.write_text(json.dumps(data))
    return path


def hand_class(root: Path) -> Path:
    """CLASS's scores.csv, with graded_code/<submission>/results.json beside it."""
    share = 8 / len(TESTS)
    lines = ["submission,score,max_score,p1b,note"]
    for name, failing in CLASS.items():
        tests = [{"name": t, "score": 0.0 if t in failing else share, "max_score": share,
                  "visibility": "after_published" if t.endswith("[hidden]") else "visible",
                  "output": failing.get(t, ""), "tags": ["p1b"]} for t in TESTS]
        score = sum(t["score"] for t in tests)
        (root / "graded_code" / name).mkdir(parents=True)
        (root / "graded_code" / name / "results.json").write_text(
            json.dumps({"score": score, "tests": tests}))
        lines.append(f"{name},{score},8,{score},")
    (root / "scores.csv").write_text("\n".join(lines) + "\n")
    return root / "scores.csv"


def test_an_exception_is_reported_as_such_not_as_the_mistake_whose_tests_it_fails(tmp_path,
                                                                                  capsys):
    csv_path = hand_class(tmp_path)
    code = class_report.main([str(csv_path), "--catalogue",
                              str(hand_catalogue(tmp_path / "mistakes.json")),
                              "--out", str(tmp_path / "report")])
    err = capsys.readouterr().err
    assert code == 0 and "Traceback" not in err and not err.strip(), err
    text = (tmp_path / "report" / "class_report.md").read_text()
    part_b = text.split("### p1b")[1].split("###")[0]
    assert "3 (75 %) lose points" in part_b
    flipped = rows_naming(part_b, "`p1b_mask_flipped`")
    assert len(flipped) == 1 and count_of(flipped[0]) == "1 (25 %)", \
        "the genuine flip (c_partial) alone, not d_neg_inf_dropped's NameErrors"
    raised = rows_naming(part_b, "NameError: name 'NEG_INF' is not defined")
    assert len(raised) == 1 and count_of(raised[0]) == "1 (25 %)", part_b
    assert "`p1b_mask_flipped`" not in raised[0] and "`test_sdpa_masks[query_key]`" in raised[0]
    every = rows_naming(part_b, "every test fails: not implemented")
    assert len(every) == 1 and count_of(every[0]) == "1 (25 %)"
    causal = rows_naming(part_b, "`test_causal_mask`")
    assert len(causal) == 1 and causal[0].startswith("| other |"), \
        "failing differently from p1b_causal_mask_upper is not that mistake"
    assert "(catches `p1b_causal_mask_upper`)" in causal[0]
    assert not rows_naming(part_b, "`p1b_causal_mask_upper` |")
    top = text.split("## Most common mistakes")[1].split("##")[0]
    assert len(rows_naming(top, "`p1b_mask_flipped`")) == 1 and "NameError" not in top
    for message in (FLIPPED, MHA_WRONG, HIDDEN_WRONG, CAUSAL_WRONG):  # no test's message
        assert message.splitlines()[0].split(": ", 1)[1][:40] not in text
    assert "0.4183" not in text and "Traceback" not in text and "NEG_INF)" not in text


def test_a_catalogue_without_failure_kinds_is_refused_in_one_line(tmp_path, capsys):
    old = hand_catalogue(tmp_path / "old.json", old=True)
    with pytest.raises(SystemExit) as stop:
        class_report.main([str(hand_class(tmp_path)), "--catalogue", str(old),
                           "--out", str(tmp_path / "report")])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1 and err.startswith("error:") and str(old) in err
    assert "older format" in err and "delete it" in err
    assert not (tmp_path / "report" / "class_report.md").exists()


def test_the_catalogue_records_how_each_catching_test_fails(tmp_path, monkeypatch):
    """mutants.run's JSON (and the catalogue the report builds from it) has each failing
    test's kind; graded_failures is replaced here by the outputs a flipped mask gives."""
    def graded_failures(chosen):
        for mutant in chosen:
            yield mutant, [{"name": t, "visibility": "hidden" if t.endswith("[hidden]")
                            else "visible", "output": o, "score": 0, "max_score": 1,
                            "tags": [mutant.part]} for t, o in FLIP_TESTS.items()]

    monkeypatch.setattr(mutants, "graded_failures", graded_failures)
    found = mutants.run([BY_NAME["p1b_mask_flipped"]])["p1b_mask_flipped"]
    assert found["hidden"] == [TESTS[5]] and set(found["kinds"]) == set(FLIP_TESTS)
    assert found["kinds"][TESTS[2]] == found["kinds"][TESTS[3]], "numbers are not the kind"
    assert found["kinds"][TESTS[2]].startswith("AssertionError: a boolean mask must")
    monkeypatch.setattr(mutants, "MUTANTS", [BY_NAME["p1b_mask_flipped"]])
    catalogue = class_report.read_catalogue(tmp_path / "built.json", ["p1b"])
    assert catalogue == {"p1b_mask_flipped": found["kinds"]}


@pytest.mark.parametrize("output, kind", [
    (NAME_ERROR, "NameError: name 'NEG_INF' is not defined"),
    (FLIPPED.format(n=7), class_report.failure_kind(FLIPPED.format(n=120))),
    ("AssertionError: 3 heads of 4 wrong, max error 1.5e-03 at 0x7f3a\n\nE  ...",
     "AssertionError: # heads of # wrong, max error # at #"),
    ("assert 3 == 4\n\n>       assert len(out) == 4\nE       assert 3 == 4",
     "AssertionError: assert # == #"),
    ("AssertionError: assert [0.12...5013046647816] == approx([0.1...57 ± 1.0e-05])",
     "AssertionError: assert [#..#] == approx([#..# ± #])"),
    ("RuntimeError: shape '[2, 4, 5, 4]' is invalid for input of size 160\nin the code ...",
     "RuntimeError: shape '[#, #, #, #]' is invalid for input of size #"),
    ("tests.seam.RemoteError: problem1.attention.Oops: bad float32 value",
     "tests.seam.RemoteError: problem1.attention.Oops: bad float32 value"),
    ("\n\nsome source line\nE       TypeError: unsupported operand 2\nE       more",
     "TypeError: unsupported operand #"),
    ("Failed: DID NOT RAISE <class 'ValueError'>", "Failed: DID NOT RAISE <class 'ValueError'>"),
    ("not graded: this test waited or slept for 100 s (none of its processes running: a "
     "lock never released, a queue never fed, a worker that never ends?)", "Timeout"),
    ("not graded: this test ran over its time limit of 20 CPU-seconds (an endless loop, or a "
     "far too slow implementation?)", "Timeout"),
    ("not graded: the tests of p1a (public) ran over their time limit of 60 CPU-seconds "
     "together", "Timeout"),
    ("skipped (a graded test never skips)", "Skipped"),
    ("the model's loss went up", "Unknown: the model's loss went up"),
    ("", "Unknown"),
])
def test_failure_kind(output, kind):
    assert class_report.failure_kind(output) == kind


@pytest.mark.parametrize("kind, error", [
    ("NameError: name 'x' is not defined", True), ("NotImplementedError", True),
    ("tests.seam.RemoteError: a.B: c", True), ("AssertionError: wrong", False),
    ("Failed: DID NOT RAISE", False), ("Timeout", False), ("Unknown: x", False)])
def test_is_error(kind, error):
    assert class_report.is_error(kind) is error


# ------------------------------------------- the results entries, grouped by why they lost points
def results_entry(problem: str, quantity: str, output: str, share: float) -> dict:
    return {"name": f"{problem} results: {quantity}", "score": 0.0 if output else share,
            "max_score": share, "visibility": "after_published", "output": output,
            "tags": [f"{problem}-results"]}


def test_results_rows_are_grouped_by_reason_and_the_maximum_is_exact(tmp_path, capsys):
    """Three submissions lose the results points of Problem 1 (3 points over 7 quantities, so
    float shares): two for want of weights, one outside a band. The page has one row per
    reason with its submissions and quantities, never a row of "other" per quantity, and the
    total's maximum is the rubric's (8 for p1b, 8 for the results) exactly, whatever float
    the CSV's max_score holds."""
    runs = ["forward_n1000", "forward_n2000", "forward_n4000", "reversed_n1000",
            "reversed_n2000", "reversed_n4000", "verdicts"]
    share = 3 / len(runs)
    no_weights = {run: f"unverified, no points: there is no model_{run}.pth" for run in runs}
    outside = {runs[0]: "recomputed from your files 0.41: outside the reference range"}
    lines = ["submission,score,max_score,p1b,results,note"]
    for name, failing in {"a": no_weights, "b": no_weights, "c": outside}.items():
        tests = [{"name": named("test_causal_mask"), "score": 8.0, "max_score": 8.0,
                  "visibility": "visible", "output": "", "tags": ["p1b"]}]
        tests += [results_entry("problem1", f"{run} test_exact_match", failing.get(run, ""),
                                share) for run in runs]
        (tmp_path / "graded_code" / name).mkdir(parents=True)
        (tmp_path / "graded_code" / name / "results.json").write_text(
            json.dumps({"score": 0, "tests": tests}))
        results = sum(t["score"] for t in tests[1:])
        lines.append(f"{name},{8 + results},{16 - 2e-14},8,{results},")
    (tmp_path / "scores.csv").write_text("\n".join(lines) + "\n")
    code = class_report.main([str(tmp_path / "scores.csv"), "--catalogue",
                              str(hand_catalogue(tmp_path / "mistakes.json")),
                              "--out", str(tmp_path / "report")])
    assert code == 0 and not capsys.readouterr().err.strip()
    text = (tmp_path / "report" / "class_report.md").read_text()
    section = text.split("### problem1 results")[1].split("###")[0]
    assert "3 (100 %) lose points" in section
    weights = rows_naming(section, "no weights (a model_*.pth missing)")
    assert len(weights) == 1 and count_of(weights[0]) == "2 (67 %)"
    assert "| 7 graded quantities |" in weights[0]
    band = rows_naming(section, "outside the reference range")
    assert len(band) == 1 and count_of(band[0]) == "1 (33 %)"
    assert "| 1 graded quantity |" in band[0]
    assert not rows_naming(section, "| other |")
    assert "| **total** | 16 |" in text and "15.99" not in text


@pytest.mark.parametrize("output, reason", [
    ("unverified, no points: there is no model_rotary.pth", "no weights (a model_*.pth missing)"),
    ("unverified, no points: your submission has no problem2/results/metrics.json",
     "no metrics.json"),
    ("recomputed from your files 0.5: outside the reference range", "outside the reference range"),
    ("not graded: --code-only (the grader graded the code alone, without its data)",
     "not graded: --code-only"),
    ("unverified, no points: model_none.pth holds another model's weights (missing ['a'], ...)",
     "unverified: model_*.pth holds another model's weights (missing ['a'], ...)"),
    ("unverified, no points: training_log_x_s1500.json does not log every 50 steps up to 1500",
     "unverified: training_log_*.json does not log every # steps up to #"),
    ("unverified, no points: needs both n1000 test scores (reversed_n1000, forward_n1000)",
     "unverified: needs both n1000 test scores (reversed_n1000, forward_n1000)"),
    ("unverified, no points: steps_to_95 is 350, not 0.95e-3 of it",
     "unverified: steps_to_95 is #, not # of it"),
])
def test_results_reason(output, reason):
    assert class_report.results_reason(output) == reason


def test_part_titles_say_point_or_points():
    assert class_report.part_title("problem2-results") == (
        "problem2 results in the reference bands (2 points)")
    assert rubric.points_phrase(1) == "1 point" and rubric.points_phrase("0.5") == "0.5 points"


def test_a_test_over_its_time_limit_has_a_row_of_its_own():
    """Stopped over its own limit or its group's (the lines the judges write): the code's
    time, in its own row, not 'other' and not 'the grader did not run it'."""
    from provided.limits import OVER_GROUP_CPU, OVER_TEST_CPU

    outputs = [OVER_TEST_CPU.format(seconds=40),
               OVER_GROUP_CPU.format(group="p1b's public tests", seconds=120)]
    tally = {}
    for submission, output in zip(("slow_a", "slow_b"), outputs):
        tests = [{"name": TESTS[0], "score": 0.0, "max_score": 1.0, "output": output,
                  "tags": ["p1b"]},
                 {"name": TESTS[1], "score": 1.0, "max_score": 1.0, "output": "",
                  "tags": ["p1b"]}]
        class_report.attribute(tests, {}, tally, submission)
    entry = tally["p1b"]
    assert entry.slow == {"slow_a", "slow_b"} and entry.slow_tests == {TESTS[0]}
    assert not entry.other and not entry.not_run and not entry.errors
    # a part whose every test ran over its group's limit is one row saying so
    assert class_report.why_all_fail(outputs[1:]) == "over a test's or its group's time limit"
    assert class_report.why_all_fail(["not graded: the grading time limit was reached"]) == (
        "not run (grading time limit)")
