"""A submission's weights parsed where a hostile archive can do no harm: the weights reader.

Runs only in a weights reader, a process the zygote (course/grading/zygote.py) forks for the
recomputation of the results (course/grading/recompute.py), one per archive. The zygote
holds no secret (no hidden test, reference solution or band), and before it reads a byte the
reader becomes a sandbox user of its own, restricts its file system with Landlock
to reading the Python environment and the system's files and writing nothing, and installs
the sandbox's default-deny syscall policy (course/grading/syscalls.py). It then reads one
torch.save archive from its socket, loads it with torch.load(weights_only=True), and sends
back only data in the seam's encoding (tests/seam.py): the checkpoint's config, step and
vocabulary as plain values and its model as tensors, which the recomputation decodes without
unpickling anything. A bug in torch's unpickler can then reach nothing worth reaching.
"""

import io
import os
import resource
import socket

import torch

from course.grading import landlock, syscalls

KEYS = ("config", "model", "step", "vocab")  # what the recomputation reads of a checkpoint
MAX_NODES = 100_000  # values in those (the reference's largest checkpoint: about 200)
MAX_ADDRESS_BYTES = 2 * 2**30
CPU_SECONDS = 60


def read(data: bytes):
    """The reply to an archive's bytes: the checkpoint's KEYS in the seam's encoding, or
    {"error": why}."""
    from tests import seam

    try:
        checkpoint = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except Exception as err:  # torch raises many kinds for a damaged or hostile archive
        return seam.pack(seam.Encoder(_no_objects).encode(
            {"error": f"it cannot be loaded with weights_only=True ({type(err).__name__}: "
                      f"{str(err)[:200]})"}), [])
    if not isinstance(checkpoint, dict):
        checkpoint = {}
    kept = {key: checkpoint[key] for key in KEYS if key in checkpoint}
    encoder = seam.Encoder(_no_objects, MAX_NODES)
    try:
        return seam.pack(encoder.encode({"checkpoint": kept}), encoder.blobs)
    except seam.SeamError as err:
        if encoder.nodes > MAX_NODES:
            return seam.pack(seam.Encoder(_no_objects).encode(
                {"error": f"not read: too large ({err})"}), [])
        return seam.pack(seam.Encoder(_no_objects).encode(
            {"error": f"it holds what a checkpoint of this repository does not ({err})"}), [])


def _no_objects(value):
    from tests import seam

    raise seam.SeamError(f"a {type(value).__name__}")


def main(request: dict, fd: int) -> None:
    """The forked reader: drop to its user, restrict itself, read one archive from fd,
    answer, end. Never returns."""
    try:
        os.setsid()
        os.dup2(fd, 3)
        null = os.open(os.devnull, os.O_RDWR)
        for target in (0, 1, 2):
            os.dup2(null, target)
        os.closerange(4, 65536)
        for kind, value in ((resource.RLIMIT_AS, MAX_ADDRESS_BYTES),
                            (resource.RLIMIT_CPU, CPU_SECONDS), (resource.RLIMIT_FSIZE, 0),
                            (resource.RLIMIT_CORE, 0), (resource.RLIMIT_NOFILE, 64)):
            hard = resource.getrlimit(kind)[1]
            value = value if hard == resource.RLIM_INFINITY else min(value, hard)
            resource.setrlimit(kind, (value, value))
        from tests import seam  # while root: a grader closes the repository to others

        os.setgroups([])
        os.setgid(request["gid"])
        os.setuid(request["uid"])

        landlock.restrict([])
        syscalls.install()
        channel = socket.socket(fileno=3)
        data = seam.receive(channel)
        if data is not None:
            seam.send(channel, read(data))
    finally:
        os._exit(0)
