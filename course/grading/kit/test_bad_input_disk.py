"""A results folder that cannot be written is refused before any training; a disk that fills
up while a result is written ends in one line naming the file, and the previous version of
that file is intact (every result is written to a temporary file, then renamed)."""

import errno
import os

import pytest
import torch

import problem1.train as p1_train
import problem3.train as p3_train
from provided import common
from provided import results as results_io

pytestmark = pytest.mark.kit

FINISHED = '{"run": "forward_n8", "finished": "earlier"}\n'


def p1_args(data, results, steps=3):
    return ["--digit_order", "forward", "--train_size", "8", "--steps", str(steps),
            "--data_dir", data, "--results_dir", results, "--device", "cpu", "--threads", "1"]


# ------------------------------------------------------------------ read-only folder
@pytest.fixture
def read_only(tmp_path):
    folder = tmp_path / "results"
    folder.mkdir()
    folder.chmod(0o555)
    yield folder
    folder.chmod(0o755)


def test_read_only_results_folder_is_refused_before_training(data, read_only, stops):
    if os.access(read_only, os.W_OK):
        pytest.skip("running as root: a 0o555 folder is still writable")
    stops(p1_train.main, p1_args(data, read_only), "--results_dir", str(read_only),
          "cannot be written")
    assert not list(read_only.iterdir())


@pytest.mark.parametrize("code", [errno.EACCES, errno.EROFS, errno.ENOSPC])
def test_unwritable_results_folder_is_refused_before_training(data, tmp_path, monkeypatch,
                                                              stops, code):
    """The same refusal, simulated (the check works as root too): creating the probe file in
    the folder fails as on a read-only or full file system."""
    results = tmp_path / "results"
    results.mkdir()
    (results / "training_log_forward_n8.json").write_text(FINISHED)

    def refuse(*args, **kwargs):
        raise OSError(code, os.strerror(code), str(results))

    monkeypatch.setattr(common.tempfile, "TemporaryFile", refuse)
    monkeypatch.setattr(p1_train, "train_step", lambda *a: pytest.fail("training started"))
    stops(p1_train.main, p1_args(data, results), "--results_dir", str(results),
          os.strerror(code))
    assert [p.name for p in results.iterdir()] == ["training_log_forward_n8.json"]
    assert (results / "training_log_forward_n8.json").read_text() == FINISHED


def test_problem3_refuses_an_unwritable_folder_before_reading_data(tmp_path, monkeypatch, stops):
    results = tmp_path / "results"

    def refuse(*args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied", str(results))

    monkeypatch.setattr(common.tempfile, "TemporaryFile", refuse)
    stops(p3_train.main, ["--norm", "pre", "--lr", "1e-3", "--data_dir", tmp_path / "nowhere",
                          "--results_dir", results], "--results_dir", "cannot be written")


# ------------------------------------------------------------------------- full disk
@pytest.fixture
def full_disk(monkeypatch):
    """Every write through provided.results's atomic writers fails with ENOSPC, as write()
    does on a full disk (no file name in the error)."""
    real_fdopen = os.fdopen

    class Full:
        def __init__(self, f):
            self.f = f

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()
            return False

        def write(self, data):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(results_io.os, "fdopen", lambda fd, *a, **k: Full(real_fdopen(fd, *a, **k)))


def test_full_disk_keeps_the_old_file_and_names_it(tmp_path, full_disk):
    path = tmp_path / "metrics.json"
    path.write_text(FINISHED)
    with pytest.raises(OSError) as raised:
        results_io.write_json(path, {"new": 1})
    assert raised.value.errno == errno.ENOSPC and raised.value.filename == str(path)
    message = common.os_error_message(raised.value)
    assert str(path) in message and "disk is full" in message and "\n" not in message
    assert path.read_text() == FINISHED
    assert [p.name for p in tmp_path.iterdir()] == ["metrics.json"]  # no temporary left


def test_full_disk_checkpoint_keeps_the_old_weights(tmp_path, full_disk):
    path = tmp_path / "model.pth"
    path.write_bytes(b"old weights")
    with pytest.raises(OSError):
        results_io.save_checkpoint(path, {"lr": 1.0}, torch.nn.Linear(2, 2))
    assert path.read_bytes() == b"old weights"
    assert [p.name for p in tmp_path.iterdir()] == ["model.pth"]


def test_full_disk_during_training_ends_in_one_line(data, tmp_path, full_disk, stops):
    results = tmp_path / "results"
    results.mkdir()
    (results / "training_log_forward_n8.json").write_text(FINISHED)
    code, _ = stops(p1_train.main, p1_args(data, results), "disk is full",
                    str(results / "training_log_forward_n8.partial.json"))
    assert code == 1
    assert (results / "training_log_forward_n8.json").read_text() == FINISHED
    assert [p.name for p in results.iterdir()] == ["training_log_forward_n8.json"]


def test_full_disk_at_the_weights_keeps_log_and_weights_together(data, tmp_path, monkeypatch,
                                                                 stops):
    """The log and the weights of a run are written together: when the disk fills up while
    the weights are written, the previous log stays too, never a new log beside old weights."""
    results = tmp_path / "results"
    results.mkdir()
    log, model = results / "training_log_forward_n8.json", results / "model_forward_n8.pth"
    log.write_text(FINISHED)
    model.write_bytes(b"the weights that go with that log")
    real_fdopen = os.fdopen

    class FullAtTheWeights:
        """A file whose write fails like a full disk when it is given the weights (torch
        saves a zip archive: its bytes start with b"PK"); logs go through."""

        def __init__(self, f):
            self.f = f

        def write(self, data):
            if bytes(data[:2]) == b"PK":
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            return self.f.write(data)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

    def full_at_the_second_binary_file(fd, mode="r", *args, **kwargs):
        return FullAtTheWeights(real_fdopen(fd, mode, *args, **kwargs))

    monkeypatch.setattr(results_io.os, "fdopen", full_at_the_second_binary_file)
    stops(p1_train.main, p1_args(data, results), "disk is full", str(model))
    assert log.read_text() == FINISHED
    assert model.read_bytes() == b"the weights that go with that log"
    assert sorted(p.name for p in results.iterdir()) == sorted(
        [log.name, model.name, "training_log_forward_n8.partial.json"])  # no temporary left
