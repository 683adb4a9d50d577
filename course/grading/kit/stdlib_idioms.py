"""The standard library's concurrency and files, each used as a student would; run() says how
each went: {idiom: "ok", or what went wrong}. The kit plants this file in a submission
(course/grading/kit/test_sandbox_policy.py): it needs nothing but the standard library, so
that a spawned worker imports it at once."""

import asyncio
import concurrent.futures
import logging
import multiprocessing
import os
import subprocess
import sys
import tempfile
import threading

START_METHODS = ("fork", "spawn", "forkserver")
THREADS = 256  # a thread pool sized by os.cpu_count() on a 256-core machine
PROCESSES = 72  # a fork pool sized by os.cpu_count() where the issue measured it


def square(x):
    return x * x


def send_square(connection, x):
    connection.send(x * x)
    connection.close()


def put_square(queue, x):
    queue.put(x * x)


async def squares_in_threads():
    return await asyncio.gather(*(asyncio.to_thread(square, x) for x in range(4)))


def with_manager():
    with multiprocessing.Manager() as manager:
        shared = manager.dict()
        shared["x"] = square(3)
        return dict(shared)


def with_pipe(context):
    ours, theirs = context.Pipe()
    process = context.Process(target=send_square, args=(theirs, 3))
    process.start()
    got = ours.recv()
    process.join()
    return got


def with_queue(context):
    queue = context.Queue()
    process = context.Process(target=put_square, args=(queue, 3))
    process.start()
    got = queue.get(timeout=60)
    process.join()
    return got


def with_pool(context, size):
    with context.Pool(size) as pool:
        return pool.map(square, range(size))


def with_executor(context):
    with concurrent.futures.ProcessPoolExecutor(2, mp_context=context) as executor:
        return list(executor.map(square, range(4)))


def with_threads(size):
    with concurrent.futures.ThreadPoolExecutor(size) as executor:
        return sum(executor.map(square, range(size)))


def with_locked_threads(size):
    done, lock = [], threading.Lock()

    def work(x):
        with lock:
            done.append(x)
    threads = [threading.Thread(target=work, args=(x,)) for x in range(size)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return len(done)


def logged_to_a_file():
    path = os.path.join(tempfile.mkdtemp(), "run.log")
    logger = logging.getLogger("idioms")
    handler = logging.FileHandler(path)
    logger.addHandler(handler)
    try:
        logger.warning("step %d", 3)
    finally:
        logger.removeHandler(handler)
        handler.close()
    with open(path) as log:
        return log.read()


def a_temporary_file():
    with tempfile.NamedTemporaryFile("w+", suffix=".txt") as scratch:
        scratch.write("9")
        scratch.flush()
        with open(scratch.name) as again:
            return again.read()


def python_subprocess():
    return subprocess.run([sys.executable, "-c", "print(6 * 7)"], capture_output=True,
                          text=True, check=True).stdout


SQUARES = [0, 1, 4, 9]
CASES = {
    "asyncio.run(asyncio.to_thread)": (lambda: asyncio.run(squares_in_threads()), SQUARES),
    "multiprocessing.Manager": (with_manager, {"x": 9}),
    f"threading, {THREADS} threads and a Lock": (lambda: with_locked_threads(THREADS),
                                                  THREADS),
    f"ThreadPoolExecutor({THREADS})": (lambda: with_threads(THREADS),
                                       sum(x * x for x in range(THREADS))),
    f"fork Pool({PROCESSES})": (lambda: with_pool(multiprocessing.get_context("fork"),
                                                  PROCESSES),
                                [x * x for x in range(PROCESSES)]),
    "tempfile": (a_temporary_file, "9"),
    "logging to a file": (logged_to_a_file, "step 3\n"),
    "subprocess.run([sys.executable, ...])": (python_subprocess, "42\n"),
}
for _method in START_METHODS:
    _context = multiprocessing.get_context(_method)
    CASES.update({
        f"Pool ({_method})": (lambda c=_context: with_pool(c, 2), [0, 1]),
        f"ProcessPoolExecutor ({_method})": (lambda c=_context: with_executor(c), SQUARES),
        f"Pipe to a Process ({_method})": (lambda c=_context: with_pipe(c), 9),
        f"Queue from a Process ({_method})": (lambda c=_context: with_queue(c), 9),
    })


def run() -> dict:
    """{idiom: "ok", or what it gave or raised instead}."""
    found = {}
    for name, (action, expected) in CASES.items():
        try:
            got = action()
            found[name] = "ok" if got == expected else f"gave {got!r}"
        except Exception as error:  # noqa: BLE001 (every failure is the finding)
            found[name] = f"{type(error).__name__}: {error}"
    return found
