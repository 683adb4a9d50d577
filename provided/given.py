"""The given code of the problem folders as the handout has it, and a solution file put back
the way the grader takes it.

Students: given; `make submission` and `python -m provided.submission --check` use it, you
need not read it.

The grader runs each solution file (a problemN/*.py with functions to write) as you wrote
it, with one change: the *given* code, every function, method and class that holds nothing
for you to write, is the handout's, whatever your file has there. Every other given file of
a problem folder (config.py, ...) is the handout's whole, except its __init__.py: empty in
the handout, it is yours (a helper there is graded). So that you can see this before the
deadline, the handout's code of the problem folders is kept in
provided/handout_code.json; `python -m provided.submission` says which given function of
yours differs from it, and `--check` runs the public tests on your zip with it put back.

In the instructors' copy (the course's own, which holds the grader) the solution files
still hold their `# BEGIN SOLUTION` / `# END SOLUTION` regions: there the handout's code is
derived from them (as the grader does), and `python -m provided.given --update` writes
provided/handout_code.json, which a kit test keeps equal to it.

graded_source here is a copy of the grader's own, which the handout cannot import (the
grader is not part of it); a kit test of the course holds the two to the same output.
"""

import ast
import json
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from provided.common import REPO_ROOT, ArgumentParser, HomeworkError, script

SNAPSHOT = "provided/handout_code.json"  # relative to the homework's root
BEGIN = re.compile(r"^(\s*)# BEGIN SOLUTION\s*$")
END = re.compile(r"^\s*# END SOLUTION\s*$")
PROBLEM_CODE = "problem[0-9]/*.py"  # the problem folders' modules the handout gives


@dataclass(frozen=True)
class Handout:
    """The handout's code of the problem folders."""
    files: dict  # {"problem1/attention.py": its text in the handout}, every problemN/*.py
    regions: dict  # {solution file: [qualified names of the functions to write]}
    given: tuple = ()  # the problem folders' other files (REPORT.md, position_table.pt, ...)


# ------------------------------------------------------------------ the handout's code
def handout_code(root: Path = REPO_ROOT) -> Handout | None:
    """The handout's code of root's problem folders: in the instructors' copy (root holds
    the grader) derived from the solution regions of its files, as the grader derives it; in
    the handout read from root's SNAPSHOT; None where that is missing or damaged."""
    if (root / "course" / "grading").is_dir():
        return derived(root)
    try:
        data = json.loads((root / SNAPSHOT).read_text(encoding="utf-8"))
        return Handout(dict(data["files"]), {k: list(v) for k, v in data["regions"].items()},
                       tuple(data["given"]))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def derived(root: Path) -> Handout:
    """The handout's code from the regions of root's files (strip_solutions, as the grader
    strips the reference)."""
    files, regions = {}, {}
    for path in sorted(root.glob(PROBLEM_CODE)):
        name, text = path.relative_to(root).as_posix(), path.read_text(encoding="utf-8")
        if any(BEGIN.match(line) for line in source_lines(text)):
            files[name] = strip_solutions(text, name)
            regions[name] = region_functions(text)
        else:
            files[name] = text
    given = []  # every other file of the problem folders, outside results/
    for path in sorted(root.glob("problem[0-9]/**/*")):
        parts = path.relative_to(root).parts
        if (path.is_file() and path.suffix != ".py" and parts[1] != "results"
                and "__pycache__" not in parts):
            given.append("/".join(parts))
    return Handout(files, regions, tuple(given))


def snapshot_text(handout: Handout) -> str:
    return json.dumps({"files": handout.files, "regions": handout.regions,
                       "given": list(handout.given)}, indent=1, sort_keys=True) + "\n"


# --------------------------------------------------------------------- solution regions
def source_lines(source: str) -> list[str]:
    """source's lines with their ends, split where Python's tokenizer splits them (at
    newlines only: str.splitlines also splits at form feeds, U+2028 and others, which would
    put the line numbers of ast out of step)."""
    normal = source.replace("\r\n", "\n").replace("\r", "\n")
    parts = normal.split("\n")
    return [part + "\n" for part in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def strip_solutions(source: str, name: str = "<source>") -> str:
    """source with each solution region replaced by one `raise NotImplementedError` line."""
    out, indent = [], None
    for number, line in enumerate(source_lines(source), start=1):
        begin = BEGIN.match(line)
        if begin:
            if indent is not None:
                raise ValueError(f"{name}:{number}: BEGIN SOLUTION inside another region")
            indent = begin.group(1)
            out.append(f'{indent}raise NotImplementedError("your solution here")\n')
        elif END.match(line):
            if indent is None:
                raise ValueError(f"{name}:{number}: END SOLUTION without BEGIN SOLUTION")
            indent = None
        elif indent is None:
            out.append(line)
    if indent is not None:
        raise ValueError(f"{name}: a BEGIN SOLUTION region is never closed")
    return "".join(out)


def definitions(tree: ast.Module) -> dict[str, ast.AST]:
    """{qualified name: node} of the functions and classes of a module, methods included
    ('MultiHeadAttention.forward')."""
    found = {}

    def walk(node, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                found[prefix + child.name] = child
                if isinstance(child, ast.ClassDef):
                    walk(child, f"{prefix}{child.name}.")
    walk(tree, "")
    return found


def region_functions(source: str) -> list[str]:
    """Qualified names of the functions that hold a solution region, in file order."""
    lines = [number for number, line in enumerate(source_lines(source), start=1)
             if BEGIN.match(line)]
    return [name for name, node in definitions(ast.parse(source)).items()
            if not isinstance(node, ast.ClassDef)
            and any(node.lineno <= line <= node.end_lineno for line in lines)]


def _span(node: ast.AST) -> tuple[int, int]:
    """(first line, last line), 1-based and inclusive, decorators included."""
    first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
    return first, node.end_lineno


def _reindent(lines: list[str], indent: str) -> list[str]:
    """lines moved to the indentation `indent` (their first line sets the current one)."""
    current = re.match(r"\s*", lines[0]).group(0)
    return [indent + line[len(current):] if line.startswith(current) else line
            for line in lines]


# ------------------------------------------------------------ a submission's file, graded
CODING_COOKIE = re.compile(r"^[ \t\f]*#.*?coding[:=][ \t]*[-\w.]+")


def read_source(data: bytes) -> str:
    """A Python file's bytes decoded as Python decodes them: a BOM, a PEP 263 encoding
    cookie, CRLF or CR line ends. The cookie (on line 1 or 2) is rewritten to utf-8, the
    encoding the grader writes the file in, so that every line keeps its number.
    SyntaxError or UnicodeDecodeError where Python would refuse the file."""
    import importlib.util

    text = importlib.util.decode_source(data)
    lines = source_lines(text)
    for number in range(min(2, len(lines))):
        if CODING_COOKIE.match(lines[number]):
            lines[number] = "# -*- coding: utf-8 -*-\n"
            break
        if not lines[number].lstrip().startswith("#") and lines[number].strip():
            break
    return "".join(lines)


def given_names(handout_defs: dict, regions) -> list[str]:
    """The given definitions of a solution file (qualified names): each function, method
    and class of the handout that holds no solution region, a method of a given class only
    through its class."""
    holds = {".".join(name.split(".")[:depth]) for name in regions
             for depth in range(1, name.count(".") + 2)}  # a region's function, its classes
    return [name for name, node in handout_defs.items() if name not in holds
            and not any(name.startswith(outer + ".") for outer in handout_defs
                        if outer not in holds and isinstance(handout_defs[outer], ast.ClassDef))]


def graded_source(student: str, handout: str, regions) -> str:
    """The file the grader runs for a submission's solution file: the student's file as it
    is, every top-level statement in its own order (imports, constants of any expression,
    helpers, decorators, the `__main__` block), with the *given* code put back as the
    handout has it. Given code is each function, method and class of the handout that
    holds no solution region (regions: the qualified names of those that do): where the
    student's file defines it, the handout's text replaces it. A definition of the handout
    the file lacks, given or a solution's stub (raising NotImplementedError), is added (a
    method at the end of its class, anything else before the `__main__` block), and so are
    the handout's imports the file lacks, after its docstring. So a file whose given code
    is the handout's is graded exactly as written."""
    student, handout = "".join(source_lines(student)), "".join(source_lines(handout))
    ours, theirs = ast.parse(student), ast.parse(handout)
    defined, given_defs = definitions(ours), definitions(theirs)
    given = given_names(given_defs, regions)
    lines, handout_lines = source_lines(student), source_lines(handout)
    replaced = [n for n in given if n in defined]
    for name in sorted(replaced, key=lambda n: -_span(defined[n])[0]):  # bottom up
        start, end = _span(defined[name])
        h_start, h_end = _span(given_defs[name])
        indent = re.match(r"\s*", lines[start - 1]).group(0)
        lines[start - 1:end] = _reindent(handout_lines[h_start - 1:h_end], indent)
    body = "".join(lines)
    for name, node in given_defs.items():  # what the file lacks: given code, or a stub
        outer = name.rpartition(".")[0]
        if name not in defined and (not outer or outer in defined):
            start, end = _span(node)
            body = _add_definition(body, name, "".join(handout_lines[start - 1:end]))
    ours = ast.parse(body)
    present = {ast.dump(node) for node in ours.body if isinstance(node, (ast.Import,
                                                                         ast.ImportFrom))}
    imports = [ast.get_source_segment(handout, node) + "\n" for node in theirs.body
               if isinstance(node, (ast.Import, ast.ImportFrom)) and ast.dump(node) not in present
               and getattr(node, "module", "") != "__future__"]
    return _after_docstring(body, "".join(imports))


def given_changes(student: str, handout: str, regions) -> tuple[list[str], list[str]]:
    """(the given definitions that the student's file changed, those it lacks), qualified
    names in the handout's order: what graded_source puts back. A change is one Python sees
    (ast): comments, blank lines and layout are no change. A lacking function to write
    (its handout stub is added, raising NotImplementedError) is in the second list too."""
    ours = definitions(ast.parse("".join(source_lines(student))))
    theirs = definitions(ast.parse("".join(source_lines(handout))))
    changed = [name for name in given_names(theirs, regions)
               if name in ours and ast.dump(ours[name]) != ast.dump(theirs[name])]
    lacking = [name for name in theirs if name not in ours
               and (not name.rpartition(".")[0] or name.rpartition(".")[0] in ours)]
    return changed, lacking


def _add_definition(source: str, name: str, text: str) -> str:
    """source with a definition it lacks added: a method (qualified name) at the end of its
    class, where the class is there; anything else before the `__main__` block."""
    outer, _, _ = name.rpartition(".")
    found = definitions(ast.parse(source)).get(outer) if outer else None
    if isinstance(found, ast.ClassDef):
        lines = source_lines(source)
        indent = re.match(r"\s*", lines[found.body[0].lineno - 1]).group(0)
        added = _reindent(source_lines(text), indent)
        if not lines[found.end_lineno - 1].endswith("\n"):
            lines[found.end_lineno - 1] += "\n"
        lines[found.end_lineno:found.end_lineno] = ["\n", *added]
        return "".join(lines)
    return _before_main_guard(source, "".join(_reindent(source_lines(text), "")) + "\n\n")


def _before_main_guard(source: str, text: str) -> str:
    """source with text inserted before its `if __name__ == "__main__":` block (so that a
    script finds the helpers when it runs), or at its end."""
    if not text:
        return source
    for node in ast.parse(source).body:
        if isinstance(node, ast.If) and "__main__" in ast.unparse(node.test):
            lines = source_lines(source)
            return "".join(lines[:node.lineno - 1]) + text + "".join(lines[node.lineno - 1:])
    return source.rstrip("\n") + "\n\n\n" + text.rstrip("\n") + "\n"


def _after_docstring(source: str, text: str) -> str:
    """source with text inserted after its module docstring and __future__ imports."""
    if not text:
        return source
    tree = ast.parse(source)
    line = 0
    for node in tree.body:
        is_doc = (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
                  and isinstance(node.value.value, str))
        is_future = isinstance(node, ast.ImportFrom) and node.module == "__future__"
        if (is_doc and node is tree.body[0]) or is_future:
            line = node.end_lineno
        else:
            break
    lines = source_lines(source)
    return "".join(lines[:line]) + text + "".join(lines[line:])


# ----------------------------------------------------------------------------- the script
@script
def main(argv=None) -> int:
    parser = ArgumentParser(__doc__)
    parser.add_argument("--update", action="store_true", required=True,
                        help=f"write {SNAPSHOT} from the solution regions (instructors)")
    parser.parse_args(argv)
    if not any("# BEGIN SOLUTION" in path.read_text(encoding="utf-8", errors="replace")
               for path in REPO_ROOT.glob(PROBLEM_CODE)):
        raise HomeworkError(f"no problem file of {REPO_ROOT} holds a solution region: "
                            f"{SNAPSHOT} is made in the instructors' copy only")
    out = REPO_ROOT / SNAPSHOT
    fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(snapshot_text(derived(REPO_ROOT)))
        os.chmod(tmp, 0o644)
        os.replace(tmp, out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    print(f"wrote {SNAPSHOT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
