"""Mutation testing of the reference: every solution region mutated by Cosmic Ray's operators,
each mutant run against the graded tests of its region's part only (public and hidden).

    python -m course.tools.mutation                    # every region (make mutation; ~N min)
    python -m course.tools.mutation --parts p1b        # one part's regions
    python -m course.tools.mutation --list             # the mutants, none run
    python -m course.tools.mutation --write      # ... merged into course/grading/mutation.json

Instructors only, not in CI (make mutation). The mutants come from Cosmic Ray (cosmic-ray on
PyPI, course/requirements.txt): its operators find the mutation points of a file and its
mutate_code makes one mutant per point; only the points on a line inside a `# BEGIN
SOLUTION` / `# END SOLUTION` region are kept. Each mutant is planted alone in a scratch copy
(course/tools/plant.py) and its part's tests run with pytest -x: killed when a test fails
(or the run errs or times out), surviving when every test passes. A mutant's id is stable
across runs: file, function, operator and the changed line before and after.

course/grading/mutation.json (written by --write) holds the last run's outcome of every
mutant and its CPU seconds; course/grading/equivalent_mutants.json names each survivor that
is equivalent (the same behaviour the contract allows), with a one-line reason. The kit test
course/grading/kit/test_mutation.py reads both, never running a mutant: a survivor not
recorded as equivalent fails it, and so does a results file older than the reference's
regions.
"""

import ast
import difflib
import json
import time

from course.grading.rubric import REGIONS
from provided.common import REPO_ROOT, ArgumentParser, fail, script
from provided.given import definitions
from provided.results import atomic_write_text

RESULTS_FILE = REPO_ROOT / "course" / "grading" / "mutation.json"
EQUIVALENT_FILE = REPO_ROOT / "course" / "grading" / "equivalent_mutants.json"

# Cosmic Ray's operators that make a mistake a student could make: off-by-one comparisons
# and their negations, swapped arithmetic, numbers one off, negated conditions, booleans
# flipped, a loop never run, an exception type widened, a decorator dropped. Left out: the
# binary operators' exotic pairs (+ to <<, ...), which make type errors, not mistakes, and
# VariableReplacer / VariableInserter, which draw at random.
OPERATORS = (
    [f"core/ReplaceBinaryOperator_{a}_{b}" for a, b in [
        ("Add", "Sub"), ("Sub", "Add"), ("Mul", "Div"), ("Div", "Mul"), ("Div", "FloorDiv"),
        ("FloorDiv", "Div"), ("Mod", "FloorDiv"), ("Pow", "Mul"), ("BitOr", "BitAnd"),
        ("BitAnd", "BitOr"), ("BitXor", "BitOr")]]
    + [f"core/ReplaceComparisonOperator_{a}_{b}" for a, b in [
        ("Eq", "NotEq"), ("NotEq", "Eq"), ("Lt", "LtE"), ("LtE", "Lt"), ("Gt", "GtE"),
        ("GtE", "Gt"), ("Lt", "GtE"), ("GtE", "Lt"), ("Gt", "LtE"), ("LtE", "Gt"),
        ("Is", "IsNot"), ("IsNot", "Is")]]
    + ["core/ReplaceUnaryOperator_USub_UAdd", "core/ReplaceUnaryOperator_Delete_USub",
       "core/ReplaceUnaryOperator_Delete_Not", "core/ReplaceUnaryOperator_Delete_Invert",
       "core/AddNot", "core/ReplaceTrueWithFalse", "core/ReplaceFalseWithTrue",
       "core/ReplaceAndWithOr", "core/ReplaceOrWithAnd", "core/ReplaceBreakWithContinue",
       "core/ExceptionReplacer", "core/NumberReplacer", "core/RemoveDecorator",
       "core/ZeroIterationForLoop"])


def regions(source: str) -> list[tuple[int, int]]:
    """(first, last) line numbers of the lines between each BEGIN and END SOLUTION."""
    spans, start = [], None
    for number, line in enumerate(source.splitlines(), start=1):
        if line.strip() == "# BEGIN SOLUTION":
            start = number + 1
        elif line.strip() == "# END SOLUTION" and start is not None:
            spans.append((start, number - 1))
            start = None
    return spans


def function_at(tree: ast.AST, line: int) -> str:
    """The qualified name of the innermost function of REGIONS' kind holding line."""
    found = [(node.lineno, name) for name, node in definitions(tree).items()
             if not isinstance(node, ast.ClassDef) and node.lineno <= line <= node.end_lineno]
    return max(found)[1] if found else "?"


def changed_line(old: str, new: str) -> tuple[str, str]:
    """The first changed line of a mutant, before and after (stripped)."""
    before, after = [], []
    for line in difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=0):
        if line.startswith("-") and not line.startswith("---"):
            before.append(line[1:].strip())
        elif line.startswith("+") and not line.startswith("+++"):
            after.append(line[1:].strip())
    return " / ".join(before), " / ".join(after)


def mutants(parts=None) -> list[dict]:
    """Every mutant of every solution region (of parts, or all): {'id', 'file', 'function',
    'part', 'line', 'operator', 'before', 'after', 'code'}."""
    import cosmic_ray.plugins
    from cosmic_ray.ast import ast_nodes, get_ast
    from cosmic_ray.mutating import mutate_code

    found, seen = [], set()
    for file, functions in REGIONS.items():
        if parts and not set(functions.values()) & set(parts):
            continue
        source = (REPO_ROOT / file).read_text()
        spans, tree = regions(source), ast.parse(source)
        for name in OPERATORS:
            operator = cosmic_ray.plugins.get_operator(name)()
            positions = [start for node in ast_nodes(get_ast(source))
                         for start, _ in operator.mutation_positions(node)]
            for occurrence, (line, _) in enumerate(positions):
                if not any(first <= line <= last for first, last in spans):
                    continue
                function = function_at(tree, line)
                part = functions.get(function)
                if part is None or (parts and part not in parts):
                    continue
                code = mutate_code(source, operator, occurrence)
                if code is None or code == source:
                    continue
                before, after = changed_line(source, code)
                key = f"{file}::{function}::{name.split('/')[-1]}::{before} -> {after}"
                number = 1
                while f"{key}#{number}" in seen if number > 1 else key in seen:
                    number += 1
                key = key if number == 1 else f"{key}#{number}"
                seen.add(key)
                found.append({"id": key, "file": file, "function": function, "part": part,
                              "line": line, "operator": name, "before": before,
                              "after": after, "code": code})
    return found


def run(found: list[dict]) -> dict:
    """{id: {'part', 'line', 'outcome': 'killed' | 'survived', 'by': the first failing test
    or the error, 'seconds': CPU seconds}} for each mutant, run in turn."""
    import torch

    from course.tools.plant import planted, run_part, scratch_copy

    torch.set_num_threads(1)  # before the forks: one thread per test run, as conftest.py sets
    results = {}
    with scratch_copy() as root:
        for number, mutant in enumerate(found, start=1):
            with planted(root, mutant["file"], mutant["code"]):
                result = run_part(root, mutant["part"], first_failure=True, timeout=300,
                                  fork=True)
            if result["failed"]:
                outcome, by = "killed", result["failed"][0]["name"]
            elif result["error"]:
                outcome, by = "killed", "error: " + result["error"].strip().splitlines()[-1][:200]
            else:
                outcome, by = "survived", None
            results[mutant["id"]] = {"part": mutant["part"], "line": mutant["line"],
                                     "outcome": outcome, "by": by,
                                     "seconds": round(result["seconds"], 2)}
            print(f"{number}/{len(found)} {outcome:<8} {result['seconds']:5.1f} s  "
                  f"{mutant['id']}", flush=True)
    return results


def equivalents() -> dict:
    """{mutant id: the reason it is equivalent}, from course/grading/equivalent_mutants.json."""
    if not EQUIVALENT_FILE.exists():
        return {}
    return json.loads(EQUIVALENT_FILE.read_text())["equivalent"]


@script
def main(argv=None) -> int:
    parser = ArgumentParser(__doc__)
    parser.add_argument("--parts", nargs="+", default=None, help="these parts' regions only")
    parser.add_argument("--only", nargs="+", default=None, help="these mutant ids only")
    parser.add_argument("--list", action="store_true", help="list the mutants, run none")
    parser.add_argument("--write", action="store_true",
                        help=f"merge the outcomes into {RESULTS_FILE.relative_to(REPO_ROOT)}")
    args = parser.parse_args(argv)
    found = mutants(args.parts)
    if args.only:
        unknown = set(args.only) - {m["id"] for m in found}
        if unknown:
            fail(f"--only: no such mutant: {sorted(unknown)[0]}")
        found = [m for m in found if m["id"] in args.only]
    if args.list:
        for mutant in found:
            print(f"{mutant['part']} {mutant['id']}")
        print(f"{len(found)} mutants")
        return 0
    start = time.perf_counter()
    results = run(found)
    equivalent = equivalents()
    survived = [i for i, r in results.items() if r["outcome"] == "survived"]
    unexplained = [i for i in survived if i not in equivalent]
    cpu = sum(r["seconds"] for r in results.values())
    print(f"{len(results)} mutants: {len(results) - len(survived)} killed, {len(survived)} "
          f"survived ({len(survived) - len(unexplained)} recorded as equivalent); "
          f"{cpu:.0f} CPU-s, {time.perf_counter() - start:.0f} s")
    for mutant_id in unexplained:
        print(f"  survived, not recorded as equivalent: {mutant_id}")
    if args.write:
        old = json.loads(RESULTS_FILE.read_text())["mutants"] if RESULTS_FILE.exists() else {}
        current = {m["id"] for m in mutants()}
        merged = {i: r for i, r in {**old, **results}.items() if i in current}
        atomic_write_text(RESULTS_FILE, json.dumps(
            {"engine": "cosmic-ray", "operators": OPERATORS, "mutants": merged},
            indent=1, sort_keys=True) + "\n")
        print(f"wrote {RESULTS_FILE.relative_to(REPO_ROOT)} ({len(merged)} mutants)")
    return 1 if unexplained else 0


if __name__ == "__main__":
    raise SystemExit(main())
