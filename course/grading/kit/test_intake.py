"""A submission's solution file is graded whole, as the student ran it: graded_source keeps
every statement of the file in its own order and puts only the given code back as the
handout has it; read_source decodes the bytes as Python does."""

import ast
import codecs

import pytest

from course.grading import intake, trusted
from course.grading.handout import (
    definitions,
    graded_source,
    read_source,
    region_functions,
    strip_solutions,
)
from course.grading.rubric import REGIONS
from provided.common import REPO_ROOT

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
