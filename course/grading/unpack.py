"""A class folder as it comes, made into the folder of submissions the grader takes.

    python -m course.grading.unpack CLASS_DIR SUBMISSIONS_DIR
    python -m course.grading.grade SUBMISSIONS_DIR --csv scores.csv

Instructors only. Each entry of CLASS_DIR becomes SUBMISSIONS_DIR/<name>/, one submission:

- NAME.zip (what `make submission` writes, or a download of one) is unpacked. A member is
  left out, and named, where the grader would not read it either: a path outside the folder
  (absolute, or through ..), a link, a file over the grader's size limits
  (provided/submission.py: SUBMISSION_FILE_BYTES a file, SUBMISSION_LIMIT_BYTES and
  SUBMISSION_FILES in all).
- A git repository (a folder holding .git, a bare NAME.git folder, or a NAME.bundle file) is
  cloned: the grader then sees its committed files at HEAD, as a clone of the student's
  repository would.
- Any other folder is copied as the grader copies a submission (course/grading/intake.py's
  copy_submission: regular files only, within the same limits).
- Anything else (a stray file, a zip that does not open, a name already taken) is named in
  one line and not made; nothing is skipped without a word.

One line per entry. Exit status 0 when every entry became a submission, 1 when one was
skipped or refused (the others are made all the same); bad input is one line (error:,
exit 2): CLASS_DIR missing, SUBMISSIONS_DIR not empty or inside CLASS_DIR.
"""

import shutil
import stat
import subprocess
import zipfile
from pathlib import Path, PurePosixPath

from course.grading.intake import copy_submission
from provided.common import ArgumentParser, fail, script
from provided.submission import SUBMISSION_FILE_BYTES, SUBMISSION_FILES, SUBMISSION_LIMIT_BYTES


def unzip(archive_path: Path, out: Path) -> list[str]:
    """Unpack archive_path into out, within the grader's limits; a note per member left out.
    Raises zipfile.BadZipFile (or OSError) when the archive cannot be read at all."""
    notes, total, count = [], 0, 0
    with zipfile.ZipFile(archive_path) as archive:
        for info in archive.infolist():
            if info.is_dir():
                continue
            path = PurePosixPath(info.filename.replace("\\", "/"))
            if path.is_absolute() or ".." in path.parts or not path.parts:
                notes.append(f"{info.filename}: left out, a path outside the submission")
                continue
            if stat.S_ISLNK(info.external_attr >> 16):
                notes.append(f"{info.filename}: left out, a link")
                continue
            limit = min(SUBMISSION_FILE_BYTES, SUBMISSION_LIMIT_BYTES - total)
            if count >= SUBMISSION_FILES or info.file_size > limit:
                notes.append(f"{info.filename}: left out, over the grader's limits")
                continue
            with archive.open(info) as member:
                data = member.read(limit + 1)
            if len(data) > limit:
                notes.append(f"{info.filename}: left out, over the grader's limits")
                continue
            target = out.joinpath(*path.parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            total, count = total + len(data), count + 1
    return notes


def is_repository(entry: Path) -> bool:
    """A git repository: a working tree (.git inside), a bare one (NAME.git) or a bundle."""
    if entry.is_file():
        return entry.suffix == ".bundle"
    return (entry / ".git").exists() or (entry.suffix == ".git" and (entry / "HEAD").is_file())


def clone(source: Path, out: Path) -> None:
    """git clone of source at its HEAD into out; CalledProcessError with git's message."""
    subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", str(source), str(out)],
                   check=True, capture_output=True, text=True, timeout=600)


def make_submission(entry: Path, out_dir: Path) -> tuple[str, bool]:
    """(the line saying what became of entry, whether it became a submission)."""
    name = entry.name.removesuffix(".zip").removesuffix(".git").removesuffix(".bundle")
    target = out_dir / name
    if entry.is_symlink():
        return f"{entry.name}: skipped, a link", False
    if target.exists():
        return f"{entry.name}: skipped, {name} is already made from another entry", False
    if is_repository(entry):
        try:
            clone(entry, target)
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as err:
            why = (getattr(err, "stderr", "") or "").strip().splitlines()
            return f"{entry.name}: skipped, git clone failed ({why[-1] if why else err})", False
        return f"{entry.name}: cloned into {name}/", True
    if entry.is_dir():
        notes = copy_submission(entry, target)
        return f"{entry.name}: copied into {name}/" + "".join(f"; {n}" for n in notes), True
    if entry.is_file() and entry.suffix == ".zip":
        target.mkdir()
        try:
            notes = unzip(entry, target)
        except (zipfile.BadZipFile, OSError) as err:
            shutil.rmtree(target)
            return f"{entry.name}: skipped, not a zip that opens ({err})", False
        return f"{entry.name}: unpacked into {name}/" + "".join(f"; {n}" for n in notes), True
    return (f"{entry.name}: skipped, neither a .zip, a git repository (a folder with .git, "
            "NAME.git or NAME.bundle) nor a folder"), False


@script
def main(argv=None) -> int:
    parser = ArgumentParser(__doc__)
    parser.add_argument("class_dir", type=Path)
    parser.add_argument("out_dir", type=Path)
    args = parser.parse_args(argv)
    if not args.class_dir.is_dir():
        fail(f"{args.class_dir} is not a folder: give the folder of the class's zips, "
             "repositories and folders")
    if args.out_dir.resolve().is_relative_to(args.class_dir.resolve()):
        fail(f"{args.out_dir} is inside {args.class_dir}: give a folder outside it")
    if args.out_dir.exists() and (not args.out_dir.is_dir() or any(args.out_dir.iterdir())):
        fail(f"{args.out_dir} exists and is not an empty folder: give a new folder")
    args.out_dir.mkdir(parents=True, exist_ok=True)
    made = 0
    entries = sorted(args.class_dir.iterdir())
    for entry in entries:
        line, ok = make_submission(entry, args.out_dir)
        made += ok
        print(line, flush=True)
    print(f"{made} of {len(entries)} entries are submissions in {args.out_dir}: grade them with "
          f"`python -m course.grading.grade {args.out_dir} --csv scores.csv`")
    return 0 if made == len(entries) else 1


if __name__ == "__main__":
    raise SystemExit(main())
