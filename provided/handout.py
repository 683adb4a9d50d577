"""Make the student handout: this repository with every solution region removed.

    python -m provided.handout OUT_DIR

Every body the students write sits between a `# BEGIN SOLUTION` line and an
`# END SOLUTION` line (nbgrader's convention). The handout replaces each such region, markers
included, with `raise NotImplementedError` at the region's indentation, and leaves out the
committed results and reports. The grading tests then import every module of the handout and
fail (rather than crash at import) until the students fill the regions in.
"""

import re
import shutil
import subprocess
from pathlib import Path

from provided.common import REPO_ROOT, ArgumentParser

BEGIN = re.compile(r"^(\s*)# BEGIN SOLUTION\s*$")
END = re.compile(r"^\s*# END SOLUTION\s*$")
EXCLUDED = re.compile(r"^problem\d/(results/|REPORT\.md$)")


def strip_solutions(source: str, name: str = "<source>") -> str:
    """source with each solution region replaced by one `raise NotImplementedError` line."""
    out, indent = [], None
    for number, line in enumerate(source.splitlines(keepends=True), start=1):
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


def tracked_files(repo: Path) -> list[str]:
    result = subprocess.run(["git", "ls-files"], cwd=repo, capture_output=True, text=True,
                            check=True)
    return result.stdout.split()


def make_handout(out_dir: Path, repo: Path = REPO_ROOT) -> int:
    """Write the handout under out_dir; returns the number of regions removed."""
    removed = 0
    for name in tracked_files(repo):
        if EXCLUDED.match(name):
            continue
        target = out_dir / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if name.endswith(".py") and not name.startswith("tests/"):
            source = (repo / name).read_text()
            removed += source.count("# BEGIN SOLUTION")
            target.write_text(strip_solutions(source, name))
        else:
            shutil.copy2(repo / name, target)
    return removed


def main(argv=None) -> int:
    parser = ArgumentParser(__doc__)
    parser.add_argument("out_dir", type=Path)
    args = parser.parse_args(argv)
    if args.out_dir.exists() and any(args.out_dir.iterdir()):
        parser.error(f"{args.out_dir} exists and is not empty")
    removed = make_handout(args.out_dir)
    print(f"wrote the handout to {args.out_dir}: {removed} solution regions removed")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
