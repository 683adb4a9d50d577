"""A class folder as it comes (course/grading/unpack.py): zips unpacked within the grader's
limits, repositories cloned at HEAD, folders copied, and every other entry named."""

import os
import stat
import subprocess
import time
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


def ended_within(pid: int, name: str, seconds: float) -> bool:
    """Whether process pid, running name, is gone (or a zombie, or its pid reused) within
    seconds: SIGKILL is delivered when the killed process next runs, later on a busy machine."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            comm, state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state.split()[0] in "ZX" or comm.split("(", 1)[1] != name:
            return True
        time.sleep(0.05)
    return False


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
    git("bundle", "create", str(folder / "erin.bundle"), "HEAD", "--all", cwd=folder / "bob")
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
    assert sorted(p.name for p in out.iterdir()) == ["alice", "bob", "carol", "dave", "erin"]
    for name in ("alice", "bob", "carol", "dave", "erin"):
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
    assert said["erin.bundle"].startswith("erin.bundle: cloned")
    assert lines[-1].startswith("5 of 7 entries are submissions")


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


def test_a_clone_over_the_size_bound_is_stopped_and_named(tmp_path, capsys, monkeypatch):
    """300 kB that do not compress against a bound of 100 kB: no submission, one line."""
    folder = tmp_path / "class"
    source = repository(folder / "erin")
    (source / "problem1" / "noise.bin").write_bytes(os.urandom(300_000))
    git("add", "problem1", cwd=source)
    git("commit", "-q", "-m", "noise", cwd=source)
    monkeypatch.setattr(unpack, "CLONE_BYTES", 100_000)
    out = tmp_path / "submissions"
    assert unpack.main([str(folder), str(out)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == (f"erin: skipped, git clone of {source} was stopped over 0.0953674 MiB "
                        "or 11000 files on disk (the grader takes 200 MiB and 5000 files)")
    assert list(out.iterdir()) == []


def test_a_clone_is_bounded_in_time_and_runs_git_hardened(tmp_path, capsys, monkeypatch):
    """A stand-in git that records how it was run, starts a child and hangs: after
    CLONE_SECONDS both are killed and the entry is one line naming the repository."""
    folder = tmp_path / "class"
    source = repository(folder / "finn")
    record, child = tmp_path / "argv_env", tmp_path / "child_pid"
    stand_in = tmp_path / "git"
    stand_in.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$@\" > {record}\nenv >> {record}\n"
                        f"sleep 300 &\necho $! > {child}\nsleep 300\n")
    stand_in.chmod(0o755)
    monkeypatch.setattr(unpack, "GIT", [str(stand_in)])
    monkeypatch.setattr(unpack, "CLONE_SECONDS", 1)
    out = tmp_path / "submissions"
    assert unpack.main([str(folder), str(out)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"finn: skipped, git clone of {source} was stopped after 1 s"
    assert not (out / "finn").exists()
    pid = int(child.read_text())
    assert ended_within(pid, "sleep", seconds=30), f"git's child {pid} still runs after the stop"
    said = record.read_text().splitlines()
    for flag in ("core.hooksPath=/dev/null", "protocol.allow=never", "protocol.file.allow=always",
                 "protocol.https.allow=always", "--depth", "--no-tags", "--single-branch",
                 source.resolve().as_uri(), "GIT_TERMINAL_PROMPT=0", "GIT_CONFIG_NOSYSTEM=1",
                 "GIT_ALLOW_PROTOCOL=file:https"):
        assert flag in said, flag


def test_a_clone_that_fails_is_one_line_naming_the_repository(tmp_path, capsys):
    folder = tmp_path / "class"
    (folder / "gus.git").mkdir(parents=True)
    (folder / "gus.git" / "HEAD").write_text("not a ref\n")
    out = tmp_path / "submissions"
    assert unpack.main([str(folder), str(out)]) == 1
    line = capsys.readouterr().out.splitlines()[0]
    assert line.startswith(f"gus.git: skipped, git clone of {folder / 'gus.git'} failed: ")
    assert "\n" not in line and list(out.iterdir()) == []


def test_the_guide_states_the_clones_bounds():
    from provided.common import REPO_ROOT

    guide = " ".join((REPO_ROOT / "course" / "INSTRUCTORS.md").read_text().split())
    assert (f"{unpack.CLONE_SECONDS} s of wall time and {unpack.CLONE_BYTES // 2**20} MiB or "
            f"{unpack.CLONE_FILES:,} files on disk") in guide
