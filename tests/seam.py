"""The seam between a test and the code it grades: only data crosses it.

A test reaches the code it grades through `submission(module)`, never by importing it:

    attention = submission("problem1.attention")
    out, weights = attention.scaled_dot_product_attention(q, k, v)
    mha = attention.MultiHeadAttention(16, 4)        # a handle (Remote)
    out, weights = mha(x, x, x)                       # tensors: fresh copies

What comes back is data: None, booleans, numbers, strings, bytes, tensors, numpy arrays,
dtypes, devices, paths, and lists, tuples, dicts and sets of those, always as fresh copies
(a tensor comes back detached, without its gradient). Anything else (a module, an
optimizer, a dataset, a generator, a function) stays where it was made and comes back as a
handle, a Remote: its attributes, items, length, iteration and calls cross the seam again.
Arguments cross the same way: data is copied over, a handle stands for its object, and
`submission("tests.tiny").some_helper` names a public helper to pass as a callable.

So a test changes the code's objects only through their own methods (`load_state_dict`,
`train()`), never in place through a copy: `mha.W_q.weight.zero_()` zeroes a copy. Values
that a test trusts (constants, provided code, torch) it imports as usual.

When you run pytest, your code runs in your own process, behind a loopback that copies
every value both ways, so that a test behaves exactly as it does in the grader. The grader
runs the same tests with the seam out of process: your code runs in a sandboxed process
that receives and returns only this data, and the process that checks the assertions never
imports your code.
"""

import builtins
import contextlib
import importlib
import io
import json
import math
import os
import re
import struct
import sys
import traceback
from pathlib import PurePosixPath

import numpy as np
import torch

MAX_MESSAGE_BYTES = 16 * 2**20  # one request or reply (the graded tests send 2.7 MB at most)
MAX_DEPTH = 64  # nesting of lists, tuples, dicts and sets
MAX_TEXT_CHARS = 1_000_000  # a string, or the output a call printed
MAX_INT_DIGITS = 1000
MAX_NODES = 1_000_000  # values in one message, each list, dict, string or number one
MAX_ITEMS = 2_000_000  # a message's tensor and array values, with the rows `tolist()` makes
# of them: what the side that takes a message may have to build from it (the graded tests'
# largest message holds about 670,000)
MAX_ROWS = 100_000  # of those, the rows (a list each in `tolist()`; the tests' most: 4,000)
JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"')
ERROR_ARG_CHARS = 100_000  # an exception's argument, as the test sees it
STDERR_LINES = 20  # of what a failing call wrote to stderr, its last lines join its error
STDERR_CHARS = 400  # ... at most this many of their last characters: the grader shows a
# failure's first 600 characters first, the exception's line and this among them
TORCH_DTYPES = {str(d).removeprefix("torch."): d for d in (
    torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
    torch.float16, torch.bfloat16, torch.float32, torch.float64,
    torch.complex64, torch.complex128)}
NUMPY_DTYPES = {np.dtype(d).str: np.dtype(d) for d in (
    np.bool_, np.uint8, np.uint16, np.uint32, np.uint64, np.int8, np.int16, np.int32,
    np.int64, np.float16, np.float32, np.float64, np.complex64, np.complex128)}


class SeamError(Exception):
    """The seam could not carry a value or a reply (a malformed or oversized message, a
    value that is not data, a handle from another test)."""


class RemoteError(Exception):
    """An exception raised by the code under test, of a type the tests do not know."""


# ------------------------------------------------------------------------------ encoding
class Encoder:
    """Values as (JSON-able tree, blobs). `handle(obj)` turns a non-data leaf into a tree
    node (a reference), or raises SeamError; so does a value of more than limit parts, as
    soon as it is found to be one (a structure that shares a list with itself many times
    over is a small graph but a huge tree)."""

    def __init__(self, handle, limit: int = MAX_NODES):
        self.handle, self.limit = handle, limit
        self.blobs: list[bytes] = []
        self.nodes = 0  # values encoded so far: a value shared n times counts n times

    def blob(self, data: bytes) -> int:
        self.blobs.append(data)
        return len(self.blobs) - 1

    def encode(self, value, depth: int = 0):
        if depth > MAX_DEPTH:
            raise SeamError(f"a value nested deeper than {MAX_DEPTH} levels")
        self.nodes += 1
        if self.nodes > self.limit:
            raise SeamError(f"a value made of more than {self.limit:,} values (lists, dicts, "
                            "strings, numbers; one shared n times counts n times)")
        kind = type(value)
        if value is None or kind in (bool, str):
            return value
        if kind is int:
            return value if abs(value) < 2**53 else {"$int": str(value)}
        if kind is float:
            return value if math.isfinite(value) else {"$float": repr(value)}
        if isinstance(value, torch.Tensor):
            return self.tensor(value)
        if isinstance(value, np.ndarray):
            return self.ndarray(value, "$ndarray")
        if isinstance(value, np.generic) and np.dtype(value.dtype).str in NUMPY_DTYPES:
            return self.ndarray(np.asarray(value), "$npscalar")
        if isinstance(value, torch.Size):
            return {"$size": [int(n) for n in value]}
        if isinstance(value, torch.dtype):
            return {"$dtype": str(value).removeprefix("torch.")}
        if isinstance(value, torch.device):
            return {"$device": str(value)}
        if kind in (bytes, bytearray):
            return {"$bytes": self.blob(bytes(value))}
        if isinstance(value, PurePosixPath):
            return {"$path": str(value)}
        if kind is slice:
            return {"$slice": [self.encode(v, depth + 1)
                               for v in (value.start, value.stop, value.step)]}
        if value is Ellipsis:
            return {"$ellipsis": True}
        if kind in (list, tuple, set, frozenset):
            tag = {list: "$list", tuple: "$tuple", set: "$set", frozenset: "$frozenset"}[kind]
            return {tag: [self.encode(v, depth + 1) for v in value]}
        if isinstance(value, dict) and type(value).__module__ in ("builtins", "collections"):
            return {"$dict": [[self.encode(k, depth + 1), self.encode(v, depth + 1)]
                              for k, v in value.items()]}
        if isinstance(value, tuple) and hasattr(value, "_fields"):  # a named tuple
            return {"$tuple": [self.encode(v, depth + 1) for v in value]}
        return self.handle(value)

    def tensor(self, value: torch.Tensor) -> dict:
        plain = torch.Tensor.detach(value).cpu().contiguous()
        dtype = str(plain.dtype).removeprefix("torch.")
        if dtype not in TORCH_DTYPES:
            raise SeamError(f"a tensor of dtype {plain.dtype}, which the seam does not carry")
        raw = plain.reshape(-1).view(torch.uint8).numpy().tobytes() if plain.numel() else b""
        return {"$tensor": self.blob(raw), "dtype": dtype, "shape": list(plain.shape)}

    def ndarray(self, value: np.ndarray, tag: str) -> dict:
        dtype = np.dtype(value.dtype).str
        if dtype not in NUMPY_DTYPES:
            raise SeamError(f"an array of dtype {value.dtype}, which the seam does not carry")
        return {tag: self.blob(np.ascontiguousarray(value).tobytes()), "dtype": dtype,
                "shape": list(value.shape)}


class Decoder:
    """The inverse of Encoder, strict: anything malformed raises SeamError. `ref(node)`
    turns a reference node back into an object (a handle, or the object it stands for)."""

    def __init__(self, blobs: list[bytes], ref):
        self.blobs, self.ref = blobs, ref
        self.items = self.rows = 0  # tensor and array values so far, with their rows (take)

    def blob(self, index) -> bytes:
        if type(index) is not int or not 0 <= index < len(self.blobs):
            raise SeamError("a value refers to data that is not in the message")
        return self.blobs[index]

    def decode(self, node, depth: int = 0):
        if depth > MAX_DEPTH:
            raise SeamError(f"a value nested deeper than {MAX_DEPTH} levels")
        if node is None or type(node) in (bool, int, float):
            return node
        if type(node) is str:
            if len(node) > MAX_TEXT_CHARS:
                raise SeamError(f"a string longer than {MAX_TEXT_CHARS} characters")
            return node
        if type(node) is not dict or len(node) < 1:
            raise SeamError("a malformed value")
        tag = next(iter(node))
        body = node[tag]
        items = lambda: [self.decode(v, depth + 1) for v in self.sequence(body)]  # noqa: E731
        if tag == "$list":
            return items()
        if tag == "$tuple":
            return tuple(items())
        if tag in ("$set", "$frozenset"):
            try:
                return (set if tag == "$set" else frozenset)(items())
            except TypeError as err:
                raise SeamError("a set of values that cannot be hashed") from err
        if tag == "$dict":
            out = {}
            for pair in self.sequence(body):
                if type(pair) is not list or len(pair) != 2:
                    raise SeamError("a malformed dict")
                key = self.decode(pair[0], depth + 1)
                try:
                    out[key] = self.decode(pair[1], depth + 1)
                except TypeError as err:
                    raise SeamError("a dict key that cannot be hashed") from err
            return out
        if tag == "$int":
            if type(body) is not str or len(body) > MAX_INT_DIGITS + 1:
                raise SeamError(f"an integer of more than {MAX_INT_DIGITS} digits")
            try:
                return int(body)
            except ValueError as err:
                raise SeamError("a malformed integer") from err
        if tag == "$float":
            if body not in ("nan", "inf", "-inf"):
                raise SeamError("a malformed float")
            return float(body)
        if tag == "$tensor":
            return self.tensor(node)
        if tag in ("$ndarray", "$npscalar"):
            array = self.ndarray(node, tag)
            return array[()] if tag == "$npscalar" else array
        if tag == "$size":
            return torch.Size(self.ints(body))
        if tag == "$dtype":
            if body not in TORCH_DTYPES:
                raise SeamError("an unknown dtype")
            return TORCH_DTYPES[body]
        if tag == "$device":
            try:
                return torch.device(str(body))
            except (RuntimeError, ValueError) as err:
                raise SeamError("a malformed device") from err
        if tag == "$bytes":
            return self.blob(body)
        if tag == "$path":
            if type(body) is not str or "\0" in body:
                raise SeamError("a malformed path")
            from pathlib import Path
            return Path(body)
        if tag == "$slice":
            parts = items()
            if len(parts) != 3:
                raise SeamError("a malformed slice")
            return slice(*parts)
        if tag == "$ellipsis":
            return Ellipsis
        if tag in ("$ref", "$name"):
            return self.ref(node)
        raise SeamError("a value of an unknown kind")

    @staticmethod
    def sequence(body) -> list:
        if type(body) is not list:
            raise SeamError("a malformed value")
        return body

    @staticmethod
    def ints(body) -> list[int]:
        if type(body) is not list or not all(type(n) is int and 0 <= n < 2**40 for n in body):
            raise SeamError("a malformed shape")
        return body

    def take(self, shape: list[int], what: str) -> None:
        """Count a tensor's or array's values and the rows `tolist()` would make of them;
        SeamError once the message holds more than MAX_ITEMS of both or MAX_ROWS rows."""
        rows, prefix = 0, 1
        for size in shape[:-1]:
            prefix *= size
            rows += prefix
        self.items += math.prod(shape) + rows
        self.rows += rows
        if self.items > MAX_ITEMS or self.rows > MAX_ROWS:
            raise SeamError(
                f"{what} of shape {' x '.join(f'{n:,}' for n in shape) or '()'} "
                f"({math.prod(shape):,} values in {rows:,} rows): one message may hold "
                f"{MAX_ITEMS:,} values and rows in all, {MAX_ROWS:,} of them rows, far more "
                "than a test needs")

    def tensor(self, node: dict) -> torch.Tensor:
        dtype, shape = node.get("dtype"), self.ints(node.get("shape"))
        if dtype not in TORCH_DTYPES:
            raise SeamError("a tensor of an unknown dtype")
        self.take(shape, "a tensor")
        dtype = TORCH_DTYPES[dtype]
        raw = self.blob(node["$tensor"])
        count = math.prod(shape)
        if len(raw) != count * torch.empty((), dtype=dtype).element_size():
            raise SeamError("a tensor whose data does not fit its shape")
        if count == 0:
            return torch.empty(shape, dtype=dtype)
        return torch.frombuffer(bytearray(raw), dtype=torch.uint8).view(dtype).reshape(shape)

    def ndarray(self, node: dict, tag: str) -> np.ndarray:
        dtype, shape = node.get("dtype"), self.ints(node.get("shape"))
        if dtype not in NUMPY_DTYPES:
            raise SeamError("an array of an unknown dtype")
        self.take(shape, "an array")
        dtype = NUMPY_DTYPES[dtype]
        raw = self.blob(node[tag])
        if len(raw) != math.prod(shape) * dtype.itemsize:
            raise SeamError("an array whose data does not fit its shape")
        return np.frombuffer(raw, dtype=dtype).reshape(shape).copy()


def pack(tree, blobs: list[bytes]) -> bytes:
    """One message: the tree as JSON, then the blobs, each behind its length."""
    header = json.dumps({"tree": tree, "blobs": [len(b) for b in blobs]},
                        allow_nan=False, separators=(",", ":")).encode()
    message = b"".join([struct.pack("<Q", len(header)), header, *blobs])
    if len(message) > MAX_MESSAGE_BYTES:
        raise SeamError(f"a message of more than {MAX_MESSAGE_BYTES >> 20} MiB")
    return message


def unpack(message: bytes) -> tuple:
    """(tree, blobs) of a message, or SeamError."""
    try:
        (size,) = struct.unpack_from("<Q", message)
        text = message[8:8 + size]
        structure = JSON_STRING.sub(b"", text)
        if sum(structure.count(mark) for mark in b",[{") >= MAX_NODES:
            raise SeamError(f"a message of more than {MAX_NODES:,} values")
        header = json.loads(text)
        sizes = header["blobs"]
        if type(sizes) is not list or not all(type(n) is int and n >= 0 for n in sizes):
            raise ValueError
        blobs, at = [], 8 + size
        for n in sizes:
            blobs.append(message[at:at + n])
            at += n
        if at != len(message):
            raise ValueError
        return header["tree"], blobs
    except (struct.error, ValueError, KeyError, TypeError, RecursionError) as err:
        raise SeamError("a malformed message") from err


# -------------------------------------------------------------------------- the server
class Server:
    """Where the code under test runs: answers requests, keeps the objects that are not
    data in a table and hands out their numbers."""

    def __init__(self):
        self.objects: dict[int, object] = {}
        self.numbers: dict[int, int] = {}  # id(obj) -> number, so one object has one handle

    def handle(self, obj) -> dict:
        number = self.numbers.get(id(obj))
        if number is None or self.objects.get(number) is not obj:
            number = len(self.objects) + 1
            self.objects[number], self.numbers[id(obj)] = obj, number
        kind = type(obj)
        return {"$ref": number, "type": f"{kind.__module__}.{kind.__qualname__}"[:200]}

    def resolve(self, node: dict):
        if "$ref" in node:
            if node["$ref"] not in self.objects:
                raise SeamError("a handle this process never gave out (from another test?)")
            return self.objects[node["$ref"]]
        name, attrs = node.get("$name"), node.get("attrs", [])
        if type(name) is not str or type(attrs) is not list:
            raise SeamError("a malformed name")
        value = importlib.import_module(name)
        for attr in attrs:
            value = getattr(value, attr)
        return value

    def answer(self, message: bytes) -> bytes:
        """The reply to one request message (every failure becomes an error reply)."""
        out, err = io.StringIO(), io.StringIO()
        try:
            tree, blobs = unpack(message)
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                # a module imported to resolve a name prints here too
                value = self.perform(Decoder(blobs, self.resolve).decode(tree))
            reply = {"value": value}
        except BaseException as error:  # noqa: BLE001 (every failure is the caller's to see)
            if isinstance(error, KeyboardInterrupt):
                raise
            reply = {"error": describe(error)}
        reply["stdout"], reply["stderr"] = (s.getvalue()[-MAX_TEXT_CHARS:] for s in (out, err))
        try:
            encoder = Encoder(self.handle)
            return pack(encoder.encode(reply), encoder.blobs)
        except BaseException as error:  # noqa: BLE001
            encoder = Encoder(self.handle)
            return pack(encoder.encode({"error": describe(error), "stdout": "", "stderr": ""}),
                        encoder.blobs)

    def perform(self, request: dict):
        op, target = request["op"], request["target"]
        if op == "getattr":
            return getattr(target, request["name"])
        if op == "setattr":
            return setattr(target, request["name"], request["value"])
        if op == "delattr":
            return delattr(target, request["name"])
        if op == "call":
            return target(*request["args"], **request["kwargs"])
        if op == "getitem":
            return target[request["key"]]
        if op == "setitem":
            target[request["key"]] = request["value"]
            return None
        if op == "len":
            return len(target)
        if op == "bool":
            return bool(target)
        if op == "list":
            return list(target)
        raise SeamError(f"unknown request {op!r}")


def describe(error: BaseException) -> dict:
    """An exception as data: its type, its arguments where they are data, its traceback."""
    kind = type(error)
    args = [a[:ERROR_ARG_CHARS] if type(a) is str else a if type(a) in (int, float, bool)
            or a is None else str(a)[:ERROR_ARG_CHARS] for a in error.args[:4]]
    try:
        text = _student_traceback(error)[-20_000:]
    except BaseException:  # noqa: BLE001 (a hostile exception's repr)
        text = ""
    return {"module": kind.__module__, "type": kind.__qualname__, "args": args,
            "traceback": text}


def _student_traceback(error: BaseException) -> str:
    """error's traceback from the first frame below this module (the server's own frames
    left out), so that it starts at the code under test."""
    frames = traceback.extract_tb(error.__traceback__)
    while frames and frames[0].filename == __file__:
        frames.pop(0)
    return ("Traceback (most recent call last):\n" + "".join(traceback.format_list(frames))
            + "".join(traceback.format_exception_only(error)))


def serve(channel) -> None:
    """Answer requests on channel (a connected socket) until it closes. A process the code
    under test forked that returns from its call into this loop (a child without os._exit)
    ends there: only the server itself answers and reads the next request."""
    server, pid = Server(), os.getpid()
    while True:
        message = receive(channel)
        if message is None:
            return
        reply = server.answer(message)
        if os.getpid() != pid:
            os._exit(0)
        send(channel, reply)


FRAME = struct.Struct("<Q")  # a message's length, before its bytes


def send(channel, message: bytes) -> None:
    channel.sendall(FRAME.pack(len(message)) + message)


def receive(channel) -> bytes | None:
    """One framed message from channel, None at its end; SeamError if oversized."""
    head = _read(channel, FRAME.size)
    if head is None:
        return None
    (size,) = FRAME.unpack(head)
    if size > MAX_MESSAGE_BYTES:
        raise SeamError(f"a message of more than {MAX_MESSAGE_BYTES >> 20} MiB")
    body = _read(channel, size)
    if body is None:
        raise SeamError("the other side stopped in the middle of a message")
    return body


def _read(channel, size: int) -> bytes | None:
    chunks, left = [], size
    while left:
        chunk = channel.recv(min(left, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


# -------------------------------------------------------------------------- the client
class Remote:
    """A handle on an object of the code under test (or a name in one of its modules).

    Its methods, like Session.request, hide themselves from pytest's tracebacks
    (`__tracebackhide__`): a failing call shows the test's own line, then the code under
    test's traceback from its first frame."""

    __slots__ = ("_node", "_kind")

    def __init__(self, node: dict, kind: str):
        object.__setattr__(self, "_node", node)
        object.__setattr__(self, "_kind", kind)

    def __getattr__(self, name: str):
        __tracebackhide__ = True
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        if "$name" in self._node and _SESSION is None:  # outside a test: stay a name
            node = {"$name": self._node["$name"], "attrs": [*self._node["attrs"], name]}
            return Remote(node, f"{self._kind}.{name}")
        return _request("getattr", self, name=name)

    def __setattr__(self, name: str, value) -> None:
        __tracebackhide__ = True
        _request("setattr", self, name=name, value=value)

    def __delattr__(self, name: str) -> None:
        __tracebackhide__ = True
        _request("delattr", self, name=name)

    def __call__(self, *args, **kwargs):
        __tracebackhide__ = True
        return _request("call", self, args=list(args), kwargs=kwargs)

    def __getitem__(self, key):
        __tracebackhide__ = True
        return _request("getitem", self, key=key)

    def __setitem__(self, key, value) -> None:
        __tracebackhide__ = True
        _request("setitem", self, key=key, value=value)

    def __len__(self) -> int:
        __tracebackhide__ = True
        return _request("len", self)

    def __bool__(self) -> bool:
        __tracebackhide__ = True
        return _request("bool", self)

    def __iter__(self):
        __tracebackhide__ = True
        return iter(_request("list", self))

    def __eq__(self, other) -> bool:
        return isinstance(other, Remote) and other._node == self._node

    def __hash__(self) -> int:
        return hash(json.dumps(self._node, sort_keys=True))

    def __repr__(self) -> str:
        return f"<remote {self._kind}>"


def submission(module: str) -> Remote:
    """The code under test's module of that name (e.g. "problem1.attention"), as a handle:
    its functions and classes are called through the seam."""
    return Remote({"$name": module, "attrs": []}, module)


class Loopback:
    """The transport of a local pytest run: the server in this process."""

    def __init__(self):
        self.server = Server()

    def exchange(self, message: bytes) -> bytes:
        return self.server.answer(message)

    def close(self) -> None:
        self.server = None


_SESSION = None


class Session:
    """One test's seam: a transport, started at the first request, closed at the end."""

    def __init__(self, factory):
        self.factory, self.transport = factory, None

    def request(self, op: str, target: Remote, **fields):
        __tracebackhide__ = True
        if self.transport is None:
            self.transport = self.factory()
        encoder = Encoder(_client_handle)
        tree = encoder.encode({"op": op, "target": target, **fields})
        message = self.transport.exchange(pack(tree, encoder.blobs))
        try:
            reply_tree, blobs = unpack(message)
            reply = Decoder(blobs, _client_ref).decode(reply_tree)
        except SeamError as err:
            raise SeamError(f"what the code under test returned for {_asked(op, target, fields)} "
                            f"was refused: {err}") from None
        if type(reply) is not dict:
            raise SeamError("a malformed reply")
        for stream, text in ((sys.stdout, reply.get("stdout")), (sys.stderr, reply.get("stderr"))):
            if type(text) is str and text:
                stream.write(text)
        if "error" in reply:
            raise rebuild(reply["error"], reply.get("stderr"))
        return reply.get("value")

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


def _asked(op: str, target: Remote, fields: dict) -> str:
    """A request in words: "getitem [0] on <remote problem1.dataset.AdditionDataset>"."""
    detail = {"getattr": f" .{fields.get('name')}",
              "getitem": f" [{fields.get('key')!r}]"[:40]}.get(op, "")
    return f"{op}{detail} on {target!r}"


def _client_handle(value) -> dict:
    if isinstance(value, Remote):
        return value._node
    raise SeamError(f"a test cannot send a {type(value).__qualname__} to the code under test: "
                    "send data, a handle, or a name from submission(...)")


def _client_ref(node: dict) -> Remote:
    if "$ref" not in node or type(node["$ref"]) is not int:
        raise SeamError("a malformed handle")
    kind = node.get("type")
    return Remote({"$ref": node["$ref"]}, kind if type(kind) is str else "object")


def _request(op: str, target: Remote, **fields):
    __tracebackhide__ = True
    if _SESSION is None:
        raise SeamError("the code under test can be reached only inside a test")
    return _SESSION.request(op, target, **fields)


def rebuild(error, stderr=None) -> BaseException:
    """The exception a remote error stands for: a built-in one or one of provided/ by its
    type, else RemoteError; as notes, the last lines the failing call wrote to stderr (a
    script's one-line error before its SystemExit: the grader's sandbox sends its own stderr
    nowhere), then the remote traceback."""
    if type(error) is not dict:
        return SeamError("a malformed error")
    module, name = error.get("module"), error.get("type")
    args = error.get("args") if type(error.get("args")) is list else []
    kind = RemoteError
    if module == "builtins" and isinstance(getattr(builtins, str(name), None), type):
        kind = getattr(builtins, name)
    elif type(module) is str and module.startswith("provided.") and type(name) is str:
        try:
            found = getattr(importlib.import_module(module), name)
            kind = found if isinstance(found, type) else kind
        except (ImportError, AttributeError):
            pass
    if not (isinstance(kind, type) and issubclass(kind, BaseException)) or kind in (
            KeyboardInterrupt, GeneratorExit):
        kind = RemoteError
    try:
        rebuilt = kind(*args) if kind is not RemoteError else RemoteError(
            f"{module}.{name}: " + " ".join(map(str, args)))
    except Exception:  # noqa: BLE001 (an exception type that wants other arguments)
        rebuilt = RemoteError(f"{module}.{name}: " + " ".join(map(str, args)))
    notes = []  # shown by pytest under the test's own traceback, and in its one-line reason
    if type(stderr) is str and stderr.strip():
        notes.append("the code under test wrote to stderr (its last lines):\n"
                      + "\n".join(stderr.strip().splitlines()[-STDERR_LINES:])[-STDERR_CHARS:])
    text = error.get("traceback")
    if type(text) is str and text:
        notes.append("in the code under test:\n" + text[-MAX_TEXT_CHARS:])
    if notes:
        rebuilt.__notes__ = notes
    return rebuilt


@contextlib.contextmanager
def session(transport=Loopback):
    """A test's seam, open while the test runs, on a transport made by transport() at its
    first request (conftest.py opens one for every test: Loopback in a local run, a sandbox
    of the test's own in the grader)."""
    global _SESSION
    _SESSION = Session(transport)
    try:
        yield _SESSION
    finally:
        current, _SESSION = _SESSION, None
        current.close()


def remote_isinstance(value: Remote, class_name: str) -> bool:
    """Whether value, an object of the code under test, is an instance of the class named
    (e.g. "torch.nn.Linear")."""
    module, _, name = class_name.rpartition(".")
    return submission("builtins").isinstance(value, getattr(submission(module), name))
