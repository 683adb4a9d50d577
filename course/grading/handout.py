"""Make the student handout: this repository with every solution region removed.

    python -m course.grading.handout OUT_DIR             # the handout
    python -m course.grading.handout OUT_DIR --fill DIR  # ... with DIR's bodies filled in

(also `make handout`). The handout is this repository without course/
and without the reference results (problemN/results/): what is left is the students' own
tree, README.md and the report templates problemN/REPORT.md included, every file as this
repository has it but the solution files and `.gitignore`, which ends with the weights the
grader recomputes from (`provided.submission.graded_results`: what `make submission` packs)
taken back out of its `*.pth` rule, so that a hand-in by repository carries them too. Every body the
students write sits between a `# BEGIN SOLUTION` line and an `# END SOLUTION` line
(nbgrader's convention), inside the function or method it implements; the handout replaces
each region, markers included, with `raise NotImplementedError` and keeps every import (the
students' code uses them: IGNORE_INDEX, causal_mask, ...).

`--fill DIR` then puts the functions of DIR/problemN/*.py (alternative bodies, or a
student's files) in place of the stripped ones: the way to check that a solution written
differently from the reference passes. `splice` does that work, and course/tools/grade_check.py
uses it to fill one part at a time. The grader takes a submission's file through
provided/given.py's `graded_source` (course/grading/intake.py): the student's file whole,
with the given code put back as the handout has it.
"""

import ast
import re
import shutil
import subprocess
from pathlib import Path

from provided.common import REPO_ROOT, ArgumentParser, fail, script

# the handout's own reading of solution regions (provided/given.py, which students have too;
# the grader's modules import it from there, never through this module)
from provided.given import (
    BEGIN,
    _after_docstring,
    _before_main_guard,
    _reindent,
    _span,
    definitions,
    region_functions,
    source_lines,
    strip_solutions,
)

# the handout is the repository without these: the course's folder and the reference results
EXCLUDED = re.compile(r"^(course/|problem\d/results/)")
SOLUTION_FILE = re.compile(r"^problem\d/[^/]+\.py$")


# --------------------------------------------------------------------- solution regions


def splice(target: str, donor: str, names) -> str:
    """target's source with the functions `names` (qualified) replaced by donor's.

    The donor's imports come first (a repeated import is harmless), and the donor's other
    top-level functions, classes and literal constants (ast.literal_eval) that the target
    lacks follow at the end, so that the transplanted functions find their helpers; a
    constant computed by an expression stays behind. A name the donor does not define keeps
    the target's function.
    """
    donor, target = "".join(source_lines(donor)), "".join(source_lines(target))
    donor_tree, target_tree = ast.parse(donor), ast.parse(target)
    donor_defs, target_defs = definitions(donor_tree), definitions(target_tree)
    donor_lines, lines = source_lines(donor), source_lines(target)
    for name in sorted((n for n in names if n in donor_defs and n in target_defs),
                       key=lambda n: -target_defs[n].lineno):  # bottom up: spans stay valid
        start, end = _span(target_defs[name])
        d_start, d_end = _span(donor_defs[name])
        indent = re.match(r"\s*", lines[start - 1]).group(0)
        lines[start - 1:end] = _reindent(donor_lines[d_start - 1:d_end], indent)
    imports, helpers = [], []
    target_names = set(target_defs) | _assigned_names(target_tree)
    target_imports = {ast.dump(node) for node in target_tree.body
                      if isinstance(node, (ast.Import, ast.ImportFrom))}
    for node in donor_tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            if ast.dump(node) not in target_imports and getattr(node, "module", "") != "__future__":
                imports.append(ast.get_source_segment(donor, node) + "\n")
        elif (_top_level_names(node) and not _top_level_names(node) & target_names
              and _runs_nothing(node)):
            start, end = _span(node)
            helpers.append("".join(donor_lines[start - 1:end]) + "\n\n")
    body = _before_main_guard("".join(lines), "".join(helpers))
    return _after_docstring(body, "".join(imports))


def _runs_nothing(node: ast.AST) -> bool:
    """Whether a top-level statement the splice brings along runs no code at import: a
    function or class definition, or a constant whose value is a literal."""
    if isinstance(node, (ast.Assign, ast.AnnAssign)):
        if node.value is None:
            return True
        try:
            ast.literal_eval(node.value)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            return False
    return True


def _assigned_names(tree: ast.Module) -> set[str]:
    return {name for node in tree.body for name in _top_level_names(node)}


def _top_level_names(node: ast.AST) -> set[str]:
    """The names a top-level statement defines (functions, classes, assignments)."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    if isinstance(node, ast.Assign):
        return {t.id for t in node.targets if isinstance(t, ast.Name)}
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return {node.target.id}
    return set()


# ------------------------------------------------------------ a submission's file, graded


def solution_files(repo: Path = REPO_ROOT) -> list[str]:
    """The problem modules that hold solution regions, relative to repo."""
    return sorted(str(path.relative_to(repo)) for path in repo.glob("problem*/*.py")
                  if "# BEGIN SOLUTION" in path.read_text())


# ------------------------------------------------------------------------------ handout
def tracked_files(repo: Path) -> list[str]:
    """The repository's files as the working tree has them: tracked or new, not ignored by
    git, and present (a file moved or deleted but not yet committed is left out)."""
    result = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"],
                            cwd=repo, capture_output=True, text=True, check=True)
    return sorted(name for name in set(result.stdout.split()) if (repo / name).is_file())


def make_handout(out_dir: Path, repo: Path = REPO_ROOT, fill: Path | None = None) -> int:
    """Write the handout under out_dir; returns the number of regions removed. With fill,
    the functions of fill/problemN/*.py replace the stripped ones."""
    removed = 0
    for name in tracked_files(repo):
        if EXCLUDED.match(name):
            continue
        target = out_dir / name
        target.parent.mkdir(parents=True, exist_ok=True)
        source_path = repo / name
        if SOLUTION_FILE.match(name):
            source = source_path.read_text()
            removed += sum(1 for line in source.splitlines() if BEGIN.match(line))
            target.write_text(strip_solutions(source, name))
        elif name == ".gitignore":
            target.write_text(handout_gitignore(source_path.read_text()))
        else:
            shutil.copy2(source_path, target)
    if fill is not None:
        fill_regions(out_dir, fill)
    return removed


GITIGNORE_HEADER = ("# the weights the grader recomputes from, which make submission packs: "
                    "tracked, so that a\n# hand-in by repository carries them too\n")


def graded_weights() -> list[str]:
    """The weight files a submission must carry (problemN/results/model_{run}.pth), as
    provided.submission.graded_results names them: what `make submission` packs."""
    from provided.submission import PROBLEMS, graded_results

    return [f"{problem}/results/{name}" for problem in PROBLEMS
            for name in graded_results(problem) if name.endswith(".pth")]


def handout_gitignore(text: str) -> str:
    """The handout's .gitignore: this repository's, then each graded weight file taken back
    out of its `*.pth` rule (anchored, so a sweep's or a seed folder's weights stay ignored)."""
    lines = "".join(f"!/{name}\n" for name in graded_weights())
    return text.rstrip("\n") + "\n" + GITIGNORE_HEADER + lines


def fill_regions(out_dir: Path, fill: Path) -> None:
    """Put the region functions that fill/problemN/*.py define into the handout's files."""
    for name in solution_files(REPO_ROOT):
        donor = fill / name
        if donor.exists():
            target = out_dir / name
            names = region_functions((REPO_ROOT / name).read_text())
            target.write_text(splice(target.read_text(), donor.read_text(), names))


@script
def main(argv=None) -> int:
    parser = ArgumentParser(__doc__)
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--fill", type=Path, default=None,
                        help="a folder with problemN/*.py whose functions fill the regions")
    args = parser.parse_args(argv)
    if args.out_dir.exists() and any(args.out_dir.iterdir()):
        fail(f"{args.out_dir} exists and is not empty: give a new folder")
    if args.fill is not None and not args.fill.is_dir():
        fail(f"--fill {args.fill} is not a folder")
    removed = make_handout(args.out_dir, fill=args.fill)
    print(f"wrote the handout to {args.out_dir}: {removed} solution regions removed"
          + (f", filled from {args.fill}" if args.fill else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
