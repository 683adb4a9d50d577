"""A submission's solution file is graded whole, as the student ran it: graded_source keeps
every statement of the file in its own order and puts only the given code back as the
handout has it; read_source decodes the bytes as Python does."""

import ast
import codecs

import pytest

from course.grading import intake, trusted
from course.grading.rubric import REGIONS
from provided.common import REPO_ROOT
from provided.given import (
    definitions,
    graded_source,
    read_source,
    region_functions,
    strip_solutions,
)

pytestmark = pytest.mark.kit

ATTENTION = "problem1/attention.py"
MODEL = "problem1/model.py"


def parts_of(name: str) -> tuple[str, str, list[str]]:
    """(the reference file, its handout, its region functions)."""
    reference = (REPO_ROOT / name).read_text()
    return reference, strip_solutions(reference, name), region_functions(reference)


def without(source: str, qualified: str) -> str:
    """source with one definition removed."""
    node = definitions(ast.parse(source))[qualified]
    lines = source.splitlines(keepends=True)
    return "".join(lines[:node.lineno - 1] + lines[node.end_lineno:])


@pytest.mark.parametrize("name", list(REGIONS))
def test_a_file_whose_given_code_is_the_handouts_is_graded_exactly_as_written(name):
    reference, handout, regions = parts_of(name)
    assert graded_source(reference, handout, regions) == reference
    assert graded_source(handout, handout, regions) == handout


def test_module_level_statements_stay_in_their_order():
    reference, handout, regions = parts_of(ATTENTION)
    student = reference.replace("import math\n", 'import math\nNEG_INF = float("-inf")\n'
                                "print('loaded')\n", 1)
    student = student.replace('float("-inf"))', "NEG_INF)", 1)
    out = graded_source(student, handout, regions)
    assert out == student
    namespace = {}
    exec(compile(out, ATTENTION, "exec"), namespace)  # NEG_INF exists before its use
    assert namespace["NEG_INF"] == float("-inf")


def test_edited_given_code_is_the_handouts_again():
    reference, handout, regions = parts_of(MODEL)
    edited = reference.replace("def score_predictions(", "def score_predictions_old(", 1)
    edited = edited.replace("class AdditionTransformer(nn.Module):",
                            "class AdditionTransformer(nn.Module):\n    EXTRA = 1\n", 1)
    out = graded_source(edited, handout, regions)
    defined = definitions(ast.parse(out))
    assert "score_predictions" in defined, "a given function the file lacks comes back"
    given = ast.get_source_segment(out, defined["AdditionTransformer"])
    assert "EXTRA" not in given, "a given class is the handout's"
    assert "score_predictions_old" in defined, "the student's own function stays"
    compile(out, MODEL, "exec")


def test_a_deleted_solution_function_is_the_handouts_stub():
    reference, handout, regions = parts_of(ATTENTION)
    out = graded_source(without(reference, "MultiHeadAttention.split_heads"), handout,
                        regions)
    stub = definitions(ast.parse(out))["MultiHeadAttention.split_heads"]
    assert "NotImplementedError" in ast.get_source_segment(out, stub)
    out = graded_source(without(reference, "MultiHeadAttention"), handout, regions)
    assert "MultiHeadAttention.forward" in definitions(ast.parse(out))


@pytest.mark.parametrize("data, text", [
    ("# -*- coding: latin-1 -*-\nx = 'caf\xe9'\n".encode("latin-1"),
     "# -*- coding: utf-8 -*-\nx = 'caf\xe9'\n"),
    (codecs.BOM_UTF8 + b"x = 1\r\ny = 2\r\n", "x = 1\ny = 2\n"),
    (b"#!/usr/bin/env python\n# vim: set fileencoding=latin-1 :\nx = '\xe9'\n",
     "#!/usr/bin/env python\n# -*- coding: utf-8 -*-\nx = '\xe9'\n"),
])
def test_read_source_decodes_as_python_does(data, text):
    assert read_source(data) == text
    namespace = {}
    exec(compile(read_source(data), "f.py", "exec"), namespace)


def test_a_file_python_refuses_fails_its_parts_with_a_reason(tmp_path):
    sub = tmp_path / "sub"
    (sub / "problem1").mkdir(parents=True)
    for name in REGIONS:
        if name.startswith("problem1/"):
            (sub / name).write_bytes((REPO_ROOT / name).read_bytes())
    (sub / ATTENTION).write_bytes(b"# -*- coding: no-such-codec -*-\nx = 1\n")
    kit = trusted.Kit(trusted.tree_files(), {}, {}, {})
    code, reasons = intake.submission_code(kit, sub)
    problem1 = {part: why for part, why in reasons.items() if part.startswith("p1")}
    assert set(problem1) == {"p1b"} and "unknown encoding" in problem1["p1b"], reasons
    assert "problem1/dataset.py" in code


# -------------------------------------------- what the grader takes from a problem folder
POSITIONAL = "problem2/positional.py"


def student_copy(out):
    """The reference's solution files, as a student's (no region markers), in out."""
    for name in REGIONS:
        text = "".join(line for line in (REPO_ROOT / name).read_text().splitlines(True)
                       if "# BEGIN SOLUTION" not in line and "# END SOLUTION" not in line)
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_text(text)
    return out


def test_the_grader_takes_what_make_submission_packs(tmp_path):
    """Packages at any depth and data files come along as they are (the issue's lost
    kinds); the given problem1/__init__.py is the student's; config.py and the other kit
    files stay the kit's; tests, other kinds and REPORT.md are not code. Exactly the files
    of the problem folders that provided.submission packs, less the kit's."""
    from provided import submission

    sub = student_copy(tmp_path / "sub")
    own = {"problem1/attn_utils/__init__.py": b"from .masks import lower\n",
           "problem1/attn_utils/masks/__init__.py": b"",
           "problem1/attn_utils/masks/causal.py": b"def lower(n):\n    return n\n",
           "problem1/__init__.py": b"def helper():\n    return 1\n",
           "problem2/constants.json": b'{"base": 10000.0}',
           "problem2/tables/omega.npy": b"\x93NUMPY",
           "problem3/vocab.txt": b"C\nN\n"}
    other = {"problem1/config.py": b"EDITED = 1\n", "problem1/position_table.pt": b"x",
             "problem1/attn_utils/test_masks.py": b"def test_x():\n    pass\n",
             "problem2/table.pkl": b"\x80\x04N.", "problem2/my-utils/x.py": b"x = 1\n",
             "problem3/REPORT.md": b"# report\n", "problem3/results/extra.json": b"{}"}
    for name, data in {**own, **other}.items():
        (sub / name).parent.mkdir(parents=True, exist_ok=True)
        (sub / name).write_bytes(data)
    kit = trusted.Kit(trusted.tree_files(), {}, {}, {})
    code, reasons = intake.submission_code(kit, sub)
    assert reasons == {}
    assert {n: code[n] for n in own} == own
    assert set(code) == set(REGIONS) | set(own), sorted(set(code) ^ (set(REGIONS) | set(own)))
    packed = submission.submission_files(sub, dict.fromkeys(submission.PROBLEMS, {}))
    kits = {n for n in packed
            if n in kit.files and n not in REGIONS and n not in submission.OWN_GIVEN}
    assert set(code) == {n for n in packed if submission.problem_file_kind(n) in ("code", "data")
                         } - kits


def test_data_past_the_limit_is_left_out_as_make_submission_leaves_it(tmp_path, monkeypatch):
    from provided import submission

    monkeypatch.setattr(submission, "DATA_BYTES", 100)
    sub = student_copy(tmp_path / "sub")
    (sub / "problem1" / "a.json").write_bytes(b"0" * 60)
    (sub / "problem2" / "b.json").write_bytes(b"0" * 60)
    kit = trusted.Kit(trusted.tree_files(), {}, {}, {})
    code, _ = intake.submission_code(kit, sub)
    assert "problem1/a.json" in code and "problem2/b.json" not in code


def test_the_given_code_put_back_is_told_to_its_parts(tmp_path):
    """A given function edited (each part of its file is told, in the words of
    `provided.submission --check`), a solution function deleted (its stub), a given file
    edited (each part of its problem); the student's own problem1/__init__.py is never
    told."""
    sub = student_copy(tmp_path / "sub")
    path = sub / POSITIONAL
    path.write_text(path.read_text().replace(
        "def _omega(d_model: int) -> torch.Tensor:",
        "def _omega(d_model: int, base: float = 10000.0) -> torch.Tensor:", 1))
    path = sub / ATTENTION
    path.write_text(without(path.read_text(), "causal_mask"))
    (sub / "problem3").mkdir(exist_ok=True)
    (sub / "problem3" / "config.py").write_text("EDITED = 1\n")
    (sub / "problem1" / "__init__.py").write_text("def helper():\n    return 1\n")
    (sub / "problem2" / "config.py").write_bytes((REPO_ROOT / "problem2/config.py").read_bytes()
                                                 + b"# only a comment: no change\n")
    kit = trusted.Kit(trusted.tree_files(), {}, {}, {})
    told = intake.given_code_told(kit, sub)
    omega = f"{POSITIONAL}: _omega is given code you changed: the handout's version is used"
    assert told["p2b"] == told["p2c"] == [omega]
    assert told["p1b"] == [f"{ATTENTION}: causal_mask is not in your file: the handout's stub "
                           "is used (it raises NotImplementedError)"]
    edited = "problem3/config.py: a given file: the handout's is used, not yours"
    assert all(told[part] == [edited] for part in ("p3a", "p3b", "p3c", "p3d", "p3e"))
    assert set(told) == {"p1b", "p2b", "p2c", "p3a", "p3b", "p3c", "p3d", "p3e"}, told
    assert intake.given_code_told(kit, student_copy(tmp_path / "clean")) == {}
