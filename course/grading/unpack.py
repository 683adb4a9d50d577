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
  cloned at HEAD, bounded: only HEAD's commit (`--depth 1 --no-tags --single-branch`; a
  bundle holds what it holds), no hooks (`core.hooksPath=/dev/null`), no system or global
  git configuration, no prompt (GIT_TERMINAL_PROMPT=0), the file and https protocols only,
  within CLONE_SECONDS of wall time and CLONE_BYTES and CLONE_FILES on disk (git and every
  process it started are killed at either bound, and the entry is skipped with one line
  naming it). The clone's files are then copied as a folder is (below), so the grader
  sees its committed files at HEAD within its limits, as a clone of the student's
  repository would give it.
- Any other folder is copied as the grader copies a submission (course/grading/intake.py's
  copy_submission: regular files only, within the same limits).
- Anything else (a stray file, a zip that does not open, a name already taken) is named in
  one line and not made; nothing is skipped without a word.

One line per entry. Exit status 0 when every entry became a submission, 1 when one was
skipped or refused (the others are made all the same); bad input is one line (error:,
exit 2): CLASS_DIR missing, SUBMISSIONS_DIR not empty or inside CLASS_DIR.
"""

import os
import shutil
import signal
import stat
import subprocess
import tempfile
import time
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


CLONE_SECONDS = 120  # a clone of a local repository takes well under a second
CLONE_BYTES = 2 * SUBMISSION_LIMIT_BYTES  # the checkout and its one commit's objects
CLONE_FILES = 2 * SUBMISSION_FILES + 1000
GIT = ["git"]  # the program (a kit test puts a stand-in here)
GIT_ENV = {"GIT_TERMINAL_PROMPT": "0", "GIT_CONFIG_NOSYSTEM": "1",
           "GIT_CONFIG_GLOBAL": os.devnull, "GIT_ALLOW_PROTOCOL": "file:https",
           "GIT_ASKPASS": "true", "SSH_ASKPASS": "true", "GIT_LFS_SKIP_SMUDGE": "1"}
GIT_CONFIG = ["core.hooksPath=/dev/null", "protocol.allow=never", "protocol.file.allow=always",
              "protocol.https.allow=always", "core.fsmonitor=false", "submodule.recurse=false",
              "advice.detachedHead=false"]


class CloneRefused(Exception):
    """A clone stopped at a bound, or failed; its message says why in a few words."""


def disk_use(folder: Path) -> tuple[int, int]:
    """(bytes, entries) under folder, links not followed; files vanishing meanwhile skipped."""
    size = entries = 0
    for root, dirs, names in os.walk(folder):
        for name in dirs + names:
            entries += 1
            try:
                size += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                pass
    return size, entries


def clone(source: Path, out: Path) -> None:
    """git clone of source at its HEAD into out, bounded in time and size (the module's
    docstring); CloneRefused with the reason, out then removed."""
    url = str(source.resolve()) if source.is_file() else source.resolve().as_uri()
    command = [*GIT, *(arg for item in [*GIT_CONFIG, f"safe.directory={source.resolve()}"]
                       for arg in ("-c", item)),
               "clone", "--quiet", "--no-tags", "--single-branch", "--depth", "1", url, str(out)]
    with tempfile.TemporaryFile() as errors:
        process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                   stderr=errors, env={**os.environ, **GIT_ENV},
                                   start_new_session=True)
        start, why = time.monotonic(), None
        try:
            while why is None and process.poll() is None:
                time.sleep(0.2)
                why = over_bounds(out, time.monotonic() - start)
        finally:  # git and whatever it started (its session), even after git has exited
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            process.wait()
        errors.seek(0)
        said = errors.read().decode(errors="replace").strip().splitlines()
    if why is None and process.returncode:
        why = f"failed: {said[-1] if said else f'git exited {process.returncode}'}"
    why = why or over_bounds(out, 0)
    if why:
        shutil.rmtree(out, ignore_errors=True)
        raise CloneRefused(why)


def over_bounds(out: Path, seconds: float) -> str | None:
    """Why a clone running for seconds into out must stop, or None."""
    if seconds > CLONE_SECONDS:
        return f"was stopped after {CLONE_SECONDS:g} s"
    size, entries = disk_use(out)
    if size > CLONE_BYTES or entries > CLONE_FILES:
        return (f"was stopped over {CLONE_BYTES / 2**20:g} MiB or {CLONE_FILES} files on disk "
                f"(the grader takes {SUBMISSION_LIMIT_BYTES / 2**20:g} MiB and "
                f"{SUBMISSION_FILES} files)")
    return None


def make_submission(entry: Path, out_dir: Path) -> tuple[str, bool]:
    """(the line saying what became of entry, whether it became a submission)."""
    name = entry.name.removesuffix(".zip").removesuffix(".git").removesuffix(".bundle")
    target = out_dir / name
    if entry.is_symlink():
        return f"{entry.name}: skipped, a link", False
    if target.exists():
        return f"{entry.name}: skipped, {name} is already made from another entry", False
    if is_repository(entry):
        with tempfile.TemporaryDirectory(prefix="unpack_clone_") as scratch:
            try:
                clone(entry, Path(scratch) / "clone")
            except CloneRefused as err:
                return f"{entry.name}: skipped, git clone of {entry} {err}", False
            notes = copy_submission(Path(scratch) / "clone", target)
        return f"{entry.name}: cloned into {name}/" + "".join(f"; {n}" for n in notes), True
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
