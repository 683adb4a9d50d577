"""A submission's weights are parsed by a weights reader (course/grading/weights.py), never by
the process that recomputes the results: the reader holds no privilege and reaches nothing,
and what it sends back is rebuilt from data."""

import io
import json
import os
import socket

import pytest
import torch

from course.grading import recompute, weights
from provided.common import REPO_ROOT
from tests import seam

pytestmark = [pytest.mark.kit, pytest.mark.timeout(120)]


def _archive(checkpoint) -> bytes:
    buffer = io.BytesIO()
    torch.save(checkpoint, buffer)
    return buffer.getvalue()


def test_the_recomputation_itself_never_unpickles_weights(monkeypatch, tmp_path):
    """A checkpoint is read while torch.load in this process would fail: the reader, another
    process, loaded it, and the tensors came back whole."""
    def refused(*args, **kwargs):
        raise AssertionError("torch.load ran in the recomputation's own process")

    monkeypatch.setattr(torch, "load", refused)
    model = {"w": torch.arange(6.0).reshape(2, 3), "b": torch.tensor([1, 2], dtype=torch.int64)}
    path = tmp_path / "model_x.pth"
    path.write_bytes(_archive({"config": {"seed": 0}, "model": model, "step": 7}))
    checkpoint = recompute.read_checkpoint(path)
    assert checkpoint["config"] == {"seed": 0} and checkpoint["step"] == 7
    for name, tensor in model.items():
        assert torch.equal(checkpoint["model"][name], tensor)
        assert checkpoint["model"][name].dtype == tensor.dtype


def test_an_archive_the_reader_refuses_is_unverified(tmp_path):
    path = tmp_path / "model_x.pth"
    path.write_bytes(_archive({"config": {"seed": 0}, "model": {"w": torch.ones(2)},
                               "extra": torch.nn.Linear(2, 2)}))  # not weights_only
    with pytest.raises(recompute.Unverified, match="weights_only"):
        recompute.read_checkpoint(path)


def test_a_checkpoint_that_shares_a_list_with_itself_is_refused_at_once(tmp_path):
    """A list holding the same list three times, forty levels deep: a file of under 2 KB
    whose tree has 3**40 nodes. The reader answers "not read: too large" in seconds, never
    expanding it (a 1,845-byte archive of this kind once took a grading from 50 s to 188 s)."""
    import time

    nested = [1]
    for _ in range(40):
        nested = [nested, nested, nested]
    path = tmp_path / "model_x.pth"
    path.write_bytes(_archive({"config": {"seed": nested}, "model": {"w": torch.ones(2)}}))
    assert path.stat().st_size < 4096
    started = time.monotonic()
    with pytest.raises(recompute.Unverified, match="not read: too large"):
        recompute.read_checkpoint(path)
    assert time.monotonic() - started < 10, "the reader expanded the shared structure"


REPORT = """
import json, os
def report(*args, **kwargs):
    status = dict(line.split(":", 1) for line in open("/proc/self/status") if ":" in line)
    try:
        open(REPOSITORY_FILE).read()
        readable = True
    except OSError:
        readable = False
    raise RuntimeError(json.dumps({"uid": os.geteuid(), "caps": status["CapEff"].strip(),
                                   "seccomp": status["Seccomp"].strip(),
                                   "repository_readable": readable}))
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="a sandbox user needs root")
def test_the_reader_parses_as_a_sandbox_user_under_landlock_and_the_policy(monkeypatch):
    """weights.main with torch.load replaced by a report of who runs it: by then the reader
    is a sandbox user with no capability, the syscall policy installed, and this repository
    out of its reach."""
    from course.grading.accounts import release, sandbox_user

    namespace = {"REPOSITORY_FILE": str(REPO_ROOT / "course" / "grading" / "rubric.py")}
    exec(REPORT, namespace)
    monkeypatch.setattr(weights.torch, "load", namespace["report"])
    user = sandbox_user()
    release([user])  # only its uid is used here
    ours, theirs = socket.socketpair()
    pid = os.fork()
    if pid == 0:
        ours.close()
        weights.main({"uid": user.uid, "gid": user.gid}, theirs.fileno())
    theirs.close()
    with ours:
        seam.send(ours, _archive({"config": {}, "model": {}}))
        message = seam.receive(ours)
    os.waitpid(pid, 0)
    tree, blobs = seam.unpack(message)
    error = seam.Decoder(blobs, None).decode(tree)["error"]
    found = json.loads(error[error.index("{"):error.rindex("}") + 1]) if "{" in error else error
    assert isinstance(found, dict), f"the reader did not report: {error}"
    assert found == {"uid": user.uid, "caps": "0000000000000000", "seccomp": "2",
                     "repository_readable": False}, found
