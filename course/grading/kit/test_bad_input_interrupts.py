"""Interrupted runs: a real `kill -9` of a training run leaves the finished results of an
earlier run byte-identical (the run in progress only ever wrote its .partial.json log), and
Ctrl-C (SIGINT) ends it with one line, exit 130."""

import json
import signal
import threading
import time

import pytest

pytestmark = pytest.mark.kit

RUN = "forward_n40"
FINISHED_LOG = '{"run": "forward_n40", "finished": "earlier"}\n'
FINISHED_MODEL = b"the weights of an earlier, finished run"


@pytest.fixture
def results(tmp_path):
    """A results folder that holds a finished log and weights of the same run."""
    folder = tmp_path / "results"
    folder.mkdir()
    (folder / f"training_log_{RUN}.json").write_text(FINISHED_LOG)
    (folder / f"model_{RUN}.pth").write_bytes(FINISHED_MODEL)
    return folder


def start_training(start_script, data, results):
    """A long problem1 run on the 40 tiny pairs (it would take minutes to finish)."""
    return start_script("problem1.train", "--digit_order", "forward", "--train_size", "40",
                        "--steps", "100000", "--data_dir", data, "--results_dir", results,
                        "--device", "cpu", "--threads", "1")


def wait_for(path, process, timeout=120.0):
    """Wait until path exists (the run is training) while the process is alive."""
    deadline = time.monotonic() + timeout
    while not path.exists():
        if process.poll() is not None:
            pytest.fail(f"the run ended before {path.name} appeared: "
                        f"{process.communicate()[1][-2000:]}")
        if time.monotonic() > deadline:
            pytest.fail(f"{path.name} did not appear within {timeout} s")
        time.sleep(0.05)


def finished_results_untouched(results):
    return ((results / f"training_log_{RUN}.json").read_text() == FINISHED_LOG
            and (results / f"model_{RUN}.pth").read_bytes() == FINISHED_MODEL)


def test_kill_9_leaves_finished_results_byte_identical(data, results, start_script):
    process = start_training(start_script, data, results)
    partial = results / f"training_log_{RUN}.partial.json"
    wait_for(partial, process)
    process.kill()  # SIGKILL: no handler runs, nothing is cleaned up
    process.wait(timeout=30)
    assert process.returncode == -signal.SIGKILL
    assert finished_results_untouched(results)
    assert json.loads(partial.read_text())["log"][0]["step"] == 50  # complete JSON
    names = {p.name for p in results.iterdir() if not p.name.startswith(".")}
    assert names == {f"training_log_{RUN}.json", f"model_{RUN}.pth", partial.name}


def test_ctrl_c_ends_in_one_line(data, results, start_script, one_line):
    process = start_training(start_script, data, results)
    chunks = []  # stderr, read as it comes
    reader = threading.Thread(target=lambda: chunks.extend(iter(lambda: process.stderr.read(1),
                                                                "")), daemon=True)
    reader.start()
    deadline = time.monotonic() + 120
    while f"{RUN}:" not in "".join(chunks):  # the progress bar: main() is training
        assert process.poll() is None, "".join(chunks)
        assert time.monotonic() < deadline, "no progress bar within 120 s"
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    process.wait(timeout=60)
    reader.join(timeout=10)
    err = "".join(chunks)
    assert process.returncode == 130, err
    one_line(err, "error: interrupted", "run the same command again")
    assert finished_results_untouched(results)
    assert not list(results.glob(".*.tmp"))
