"""Non-solutions: the handout with every solution region replaced by a stub that does
nothing useful. No graded test may pass on one (course/grading/kit/test_stubs.py).

    python -m course.grading.stubs OUT_DIR KIND                 # every region KIND's stub
    python -m course.grading.stubs OUT_DIR KIND --parts p1a p2c # ... those parts' only
    python -m course.grading.stubs OUT_DIR any                  # every kind, by STUB_KIND

Instructors only (the handout leaves course/ out). A stub kind, STUBS, is one way to hand
in nothing: raise an exception for every input, return None, return zeros (shaped like the
first tensor argument), or return the first argument unchanged. A test that such a body
passes grants points for nothing: a test that checks an error is raised must also check, in
the same test, that valid input gives the right result, and a test of a type or a shape must
also check a value.

Each stub keeps the indentation of its region's `# BEGIN SOLUTION` line and stands where the
region stood (after the docstring and any code before the region, such as super().__init__()).
An `__init__` stub that would return something just returns None (`pass`), so that the
object still constructs, without the attributes the region would set.

Kind `any` puts every kind in one tree: each stub reads the environment variable STUB_KIND
when called, and the tree's pytest plugin stub_plugin.py (course/grading/stub_plugin.py)
runs every test once per kind, so that one pytest process (one torch import, one
collection) checks them all.
"""

import ast
import shutil
from pathlib import Path

from course.grading.handout import make_handout, solution_files
from course.grading.rubric import PARTS, REGIONS
from provided.common import REPO_ROOT, ArgumentParser, fail, script
from provided.given import BEGIN, END, definitions, source_lines

# kind: what its body does (a format string of {args}, the function's arguments after self,
# and {first}, the first of them or None); the raising kinds raise for every input
STUBS = {
    "raises": 'raise ValueError("stub: raises for every input")',
    "raises_type_error": 'raise TypeError("stub: raises for every input")',
    "raises_runtime_error": 'raise RuntimeError("stub: raises for every input")',
    "raises_file_not_found": 'raise FileNotFoundError("stub: raises for every input")',
    "returns_none": "return None",
    "returns_zeros": ("import torch as _stub_torch\n"
                      "return next((_stub_torch.zeros_like(_a) for _a in ({args}) "
                      "if isinstance(_a, _stub_torch.Tensor)), 0)"),
    "returns_input": "return {first}",
}
# the kind of the stubs that take their kind from the environment variable STUB_KIND at each
# call: one tree for every kind, which course/grading/stub_plugin.py runs every test on
ANY = "any"
PLUGIN = "stub_plugin.py"


def arguments(node: ast.FunctionDef) -> list[str]:
    """The names of a function's arguments in order, without self / cls and without the
    catch-alls (*args, **kwargs)."""
    names = [a.arg for a in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs)]
    return names[1:] if names and names[0] in ("self", "cls") else names


def stub_body(kind: str, node: ast.FunctionDef) -> str:
    """The body of a stub of that kind for the function node (no indentation)."""
    if kind == ANY:
        return any_body(node)
    if kind not in STUBS:
        raise ValueError(f"unknown stub kind {kind!r}: one of {', '.join([*STUBS, ANY])}")
    template = STUBS[kind]
    if node.name == "__init__" and template.startswith(("return", "import")):
        return "pass"
    names = arguments(node)
    if kind == "returns_zeros" and not names:
        return "return 0"
    return template.format(args="".join(f"{name}, " for name in names),
                           first=names[0] if names else "None")


def any_body(node: ast.FunctionDef) -> str:
    """The body of an ANY stub: each kind's body under `if` the environment variable
    STUB_KIND, read at every call, names it."""
    lines = ["import os as _stub_os", '_stub_kind = _stub_os.environ.get("STUB_KIND")']
    for kind in STUBS:
        body = stub_body(kind, node)
        body = "return None" if body == "pass" else body  # an if must not fall through
        lines += [f"if _stub_kind == {kind!r}:", *("    " + line for line in body.splitlines())]
    return "\n".join([*lines, 'raise RuntimeError(f"STUB_KIND {_stub_kind!r} names no stub")'])


def stub_solutions(source: str, kind: str, name: str = "<source>", keep=()) -> str:
    """source with each solution region, markers included, replaced by kind's stub; the
    regions of the functions named in keep (qualified) keep their body."""
    functions = {qualified: node for qualified, node in definitions(ast.parse(source)).items()
                 if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}
    out, indent = [], None
    for number, line in enumerate(source_lines(source), start=1):
        begin = BEGIN.match(line)
        if begin:
            indent = begin.group(1)
            inner = [q for q, node in functions.items() if node.lineno <= number <= node.end_lineno]
            if not inner:
                raise ValueError(f"{name}:{number}: a solution region outside any function")
            qualified = max(inner, key=lambda q: functions[q].lineno)  # the innermost
            if qualified in keep:
                indent = None  # the body stays, without its markers
            else:
                out.extend(f"{indent}{body}\n"
                           for body in stub_body(kind, functions[qualified]).splitlines())
        elif END.match(line):
            indent = None
        elif indent is None:
            out.append(line)
    return "".join(out)


def make_stubbed_handout(out_dir: Path, kind: str, parts=None) -> int:
    """The handout under out_dir, every solution region of the parts named (all of them by
    default) replaced by kind's stub, the others' reference bodies left in place; returns the
    number of regions replaced. Kind ANY adds the plugin that runs the tests under each kind
    (stub_plugin.py, at the tree's root)."""
    unknown = set(parts or ()) - set(PARTS)
    if unknown:
        raise ValueError(f"unknown parts {sorted(unknown)}: the parts are {', '.join(PARTS)}")
    make_handout(out_dir)
    replaced = 0
    for name in solution_files():
        source = (REPO_ROOT / name).read_text()
        keep = {function for function, part in REGIONS[name].items()
                if parts is not None and part not in parts}
        replaced += len(REGIONS[name]) - len(keep)
        (out_dir / name).write_text(stub_solutions(source, kind, name, keep))
    if kind == ANY:
        shutil.copy2(Path(__file__).with_name(PLUGIN), out_dir / PLUGIN)
    return replaced


@script
def main(argv=None) -> int:
    parser = ArgumentParser(__doc__)
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("kind", choices=[*STUBS, ANY])
    parser.add_argument("--parts", nargs="+", default=None,
                        help="stub only these parts' regions (p1a ..), the reference elsewhere")
    args = parser.parse_args(argv)
    if args.out_dir.exists() and any(args.out_dir.iterdir()):
        fail(f"{args.out_dir} exists and is not empty: give a new folder")
    removed = make_stubbed_handout(args.out_dir, args.kind, args.parts)
    print(f"wrote the handout to {args.out_dir}: {removed} solution regions, each a "
          f"{args.kind} stub")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
