"""A class folder as it comes (course/grading/unpack.py): zips unpacked within the grader's
limits, repositories cloned at HEAD, folders copied, and every other entry named."""

import os
import stat
import subprocess
import zipfile
from pathlib import Path

import pytest

from course.grading import unpack

pytestmark = pytest.mark.kit
CODE = "def f():\n    return 1\n"


def git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd,
                   check=True, capture_output=True)


def repository(path: Path) -> Path:
    """A repository whose HEAD holds problem1/attention.py and whose working tree also has
    an uncommitted file (not a submission's)."""
    (path / "problem1").mkdir(parents=True)
    (path / "problem1" / "attention.py").write_text(CODE)
    git("init", "-q", cwd=path)
    git("add", "problem1", cwd=path)
    git("commit", "-q", "-m", "work", cwd=path)
    (path / "problem1" / "draft.py").write_text("uncommitted\n")
    return path


def class_folder(root: Path) -> Path:
    folder = root / "class"
    folder.mkdir()
    with zipfile.ZipFile(folder / "alice.zip", "w") as archive:
        archive.writestr("problem1/attention.py", CODE)
        archive.writestr("../escape.py", "outside\n")
        link = zipfile.ZipInfo("problem1/link.py")
        link.external_attr = (stat.S_IFLNK | 0o777) << 16
        archive.writestr(link, "/etc/passwd")
    repository(folder / "bob")
    subprocess.run(["git", "clone", "-q", "--bare", str(folder / "bob"),
                    str(folder / "carol.git")], check=True, capture_output=True)
    (folder / "dave" / "problem1").mkdir(parents=True)
    (folder / "dave" / "problem1" / "attention.py").write_text(CODE)
    os.symlink("/etc/passwd", folder / "dave" / "problem1" / "linked.py")
    (folder / "notes.txt").write_text("stray\n")
    (folder / "broken.zip").write_text("not a zip\n")
    return folder


def test_a_class_folder_becomes_submissions_and_every_other_entry_is_named(tmp_path, capsys):
    out = tmp_path / "submissions"
    code = unpack.main([str(class_folder(tmp_path)), str(out)])
    lines = capsys.readouterr().out.splitlines()
    assert code == 1, lines  # two entries are not submissions
    assert sorted(p.name for p in out.iterdir()) == ["alice", "bob", "carol", "dave"]
    for name in ("alice", "bob", "carol", "dave"):
        assert (out / name / "problem1" / "attention.py").read_text() == CODE, name
    assert not (tmp_path / "escape.py").exists() and not (out / "escape.py").exists()
    assert not (out / "alice" / "problem1" / "link.py").exists()
    assert not (out / "bob" / "problem1" / "draft.py").exists()  # cloned: HEAD only
    assert not (out / "dave" / "problem1" / "linked.py").exists()
    said = {line.split(":", 1)[0]: line for line in lines[:-1]}
    assert "../escape.py: left out, a path outside" in said["alice.zip"]
    assert "problem1/link.py: left out, a link" in said["alice.zip"]
    assert said["bob"].startswith("bob: cloned") and said["carol.git"].startswith(
        "carol.git: cloned")
    assert said["notes.txt"].startswith("notes.txt: skipped, neither a .zip")
    assert said["broken.zip"].startswith("broken.zip: skipped, not a zip that opens")
    assert lines[-1].startswith("4 of 6 entries are submissions")


def test_bad_input_is_one_line(tmp_path, capsys):
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "x").write_text("")
    for argv in ([str(tmp_path / "none"), str(tmp_path / "out")],
                 [str(tmp_path), str(tmp_path / "inside")],
                 [str(tmp_path / "taken"), str(tmp_path / "taken")]):
        with pytest.raises(SystemExit) as stop:
            unpack.main(argv)
        assert stop.value.code == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error:"), err
