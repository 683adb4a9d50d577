"""The grader against hostile submissions: none may raise its score, show hidden test text
or reference code in anything visible, change a file outside its scratch tree, reach the
network, leave anything behind, change another submission's grade, or stop results.json
from being written.

Every attack is the empty handout (which scores 0) with code added to problem1/dataset.py:
at module level (it runs in every sandbox that imports the file), in
AdditionDataset.__init__ (it runs in the sandbox of every test of part p1a), or as extra
files. The classes of attack: forging
the verdict (from the sandbox's memory, its file descriptors, the judge's memory, a
conftest, patched libraries), lying objects (tensor subclasses, objects whose == and bool
are always true), code at module level, secrets (hidden tests, reference solutions and
bands, read from memory, disk or /proc), the network, state that outlives a test (files,
System V IPC, processes), and the resources (memory, processes, time). One grader process
grades them all, part p1a only, with short time limits. Sealing needs root (the sandbox
drops to the sandbox user); CI runs as root.
"""

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from course.grading.attacks import (
    ATTACKS,
    HIDDEN_LINE,
    LEFT_BEHIND_FOLDERS,
    LISTENER_PORT,
    NESTED_WORLD_WRITABLE,
    REFERENCE_LINE,
    plant,
)
from course.grading.handout import make_handout
from course.grading.judges import GROUP_TESTS
from provided.common import REPO_ROOT

pytestmark = [pytest.mark.kit, pytest.mark.timeout(900),
              pytest.mark.skipif(os.geteuid() != 0, reason="sealing needs root")]


TEST_SECONDS = 3.0  # one test's time limit here


def _digest(root: Path) -> dict:
    """{path: sha256} of the grading repository's files that a submission must not change."""
    paths = [*root.glob("problem*/results/reference_bands.json"),
             *root.glob("course/grading/**/*.py"),
             *root.glob("tests/*.py")]
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in paths}


DRIVER = """
import json, socket, sys, threading, time
from pathlib import Path
from course.grading import grade
received = []
listener = socket.socket()
listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
listener.bind(("127.0.0.1", int(sys.argv[1])))
listener.listen(8)
def listen():
    while True:
        connection, _ = listener.accept()
        received.append(connection.recv(100).decode(errors="replace"))
threading.Thread(target=listen, daemon=True).start()
folders = [Path(p) for p in sys.argv[4:]]
grader = grade.setup(["p1a"], jobs=1)
results = {}
with grade.hidden_from_sandbox():
    for folder in folders:
        budget = grade.Budget(time.monotonic() + 120, float(sys.argv[2]))
        out = Path(sys.argv[3]) / folder.name / "results.json"
        out.parent.mkdir()
        started = time.monotonic()
        results[folder.name] = grade.grade(folder, grader, ["p1a"], out, budget)
        results[folder.name]["seconds"] = time.monotonic() - started
        results[folder.name]["written"] = json.loads(out.read_text())
grader.close()
results["_uids"] = [user.uid for pool in grader.sandboxes for user in pool]
results["_isolation"] = grader.zygote.isolation
results["_received"] = received
print(json.dumps(results))
"""


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """{submission name: results} of every attack, the empty handout and the reference,
    graded in that order by one grader (the reference last: an attack that reached past
    its own grading would show there)."""
    base = tmp_path_factory.mktemp("attacks")
    handout = base / "handout"
    make_handout(handout)
    folders = []
    for name, (kind, code) in ATTACKS.items():
        plant(handout, base / name, kind, code)
        folders.append(base / name)
    folders += [handout, REPO_ROOT]
    before = _digest(REPO_ROOT)
    shutil.rmtree(NESTED_WORLD_WRITABLE, ignore_errors=True)
    os.mkdir(NESTED_WORLD_WRITABLE)
    os.chmod(NESTED_WORLD_WRITABLE, 0o1777)
    outputs = base / "outputs"
    outputs.mkdir()
    done = subprocess.run([sys.executable, "-c", DRIVER, str(LISTENER_PORT), str(TEST_SECONDS),
                           str(outputs), *map(str, folders)],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=800)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(done.stdout.splitlines()[-1])
    results["_changed"] = [p for p, h in _digest(REPO_ROOT).items() if before.get(p) != h]
    results["_attacked"] = (REPO_ROOT / "ATTACKED").exists()
    yield results
    shutil.rmtree(NESTED_WORLD_WRITABLE, ignore_errors=True)


def _score(results: dict) -> float:
    return sum(t["score"] for t in results["tests"] if t["tags"] == ["p1a"])


@pytest.mark.parametrize("attack", [name for name, (kind, _) in ATTACKS.items()
                                    if kind != "reference"])  # partly solved on purpose
def test_an_attack_earns_nothing(graded, attack):
    results = graded[attack]
    assert _score(results) == 0, (
        f"{attack} earned points: "
        + str([t["name"] for t in results["tests"] if t["score"] and t["tags"] == ["p1a"]]))
    assert results["written"]["tests"] == results["tests"], "results.json differs"


def test_the_reference_and_the_empty_handout_after_the_attacks(graded):
    """The reference, graded after every attack, earns all of p1a; the empty handout none."""
    lost = [f"{t['name']}: {t['output'][:400]}" for t in graded[REPO_ROOT.name]["tests"]
            if t["tags"] == ["p1a"] and t["score"] < t["max_score"]]
    assert _score(graded[REPO_ROOT.name]) == pytest.approx(4.0), (
        "the reference, graded after the attacks, lost points (an attack reached past its "
        "own grading?):\n" + "\n".join(lost))
    assert _score(graded["handout"]) == 0


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_no_hidden_text_in_anything_visible(graded, attack):
    visible = [t for t in graded[attack]["tests"] if t["visibility"] == "visible"]
    text = graded[attack]["output"] + "".join(t["output"] for t in visible)
    assert HIDDEN_LINE not in text, f"{attack}: hidden test text in a visible output"
    assert REFERENCE_LINE not in text, f"{attack}: reference code in a visible output"
    assert "reference_bands" not in text and '"n_seeds"' not in text, (
        f"{attack}: a band in a visible output")


def test_the_leak_attack_ran_and_found_nothing_secret(graded):
    """The secrets attack raised its RuntimeError (so the test's output shows what it found),
    and what it found holds no hidden test, reference region or band."""
    outputs = " ".join(t["output"] for t in graded["reads_secrets_from_memory_and_disk"]["tests"])
    assert "LEAK" in outputs
    assert HIDDEN_LINE not in outputs and REFERENCE_LINE not in outputs


def test_no_network(graded):
    assert graded["_received"] == [], f"the sandbox reached a listener: {graded['_received']}"
    # the syscall policy refuses every new socket but a Unix one
    assert "default-deny syscall policy" in graded["_isolation"], graded["_isolation"]


def test_nothing_outlives_a_test(graded):
    assert not Path("/tmp/hw_module_level_ran").exists(), "a module-level file was left"
    for folder in LEFT_BEHIND_FOLDERS:
        assert not Path(folder, "hw_left_behind").exists(), f"a file left in {folder}"
    shm = Path("/proc/sysvipc/shm").read_text().splitlines()
    assert not any(line.split()[0] == str(0x5EED) for line in shm[1:]), "shared memory left"
    assert not any(line.split()[0] == str(0x5EEC) for line in shm[1:]), (
        "shared memory given to root was left")
    # a process that keeps forking is stopped and killed at once: measured 0.7 s over the
    # empty handout's 9 s (it once stretched a part's grading from 10 s to 59 s)
    extra = graded["keeps_forking"]["seconds"] - graded["handout"]["seconds"]
    assert extra < 10, f"endless forking cost {extra:.1f} s more than the empty handout"


def test_an_endless_loop_costs_its_parts_time_only(graded):
    """Every test of p1a runs into the endless loop; a part's public tests, and its hidden
    ones, may take GROUP_TESTS test limits (3 s here) together, and the rest of the group
    then fails saying so: measured 120 s, the whole deadline, before that limit existed; with
    the limits in CPU time, 17 s natively and 40 s in the container with other gradings
    running beside it."""
    extra = graded["endless_loop"]["seconds"] - graded["handout"]["seconds"]
    cap = 2 * GROUP_TESTS * TEST_SECONDS  # CPU-seconds: on a busy machine, more wall time
    assert extra < 2 * (cap + 10), (
        f"an endless loop cost {extra:.0f} s more than the empty handout")
    outputs = [t["output"] for t in graded["endless_loop"]["tests"] if t["tags"] == ["p1a"]]
    assert any("ran over their time limit" in output for output in outputs), outputs[:3]


def test_no_file_of_the_grading_repository_changed(graded):
    assert graded["_changed"] == [] and not graded["_attacked"], graded["_changed"]


def test_the_grader_names_what_went_wrong(graded):
    outputs = {name: " ".join(t["output"] for t in graded[name]["tests"]
                              if t["visibility"] == "visible")
               for name in ("os_exit_in_a_test", "endless_loop", "patches_torch_in_a_test",
                            "fills_the_disk")}
    assert "ended during this call" in outputs["os_exit_in_a_test"]
    assert "held more than" in outputs["fills_the_disk"]
    assert "time limit" in outputs["endless_loop"]
    assert "NotImplementedError" in outputs["patches_torch_in_a_test"]


def test_no_process_of_the_sandbox_user_survives(graded):
    uids = set(graded["_uids"])
    assert len(uids) > 1, "a pool of sandbox users, one per test in turn"
    alive = [p.name for p in Path("/proc").iterdir()
             if p.name.isdigit() and _owner(p) in uids]
    assert not alive, f"processes of the sandbox user still running: {alive}"


def _owner(path: Path):
    try:
        return path.stat().st_uid
    except OSError:
        return None


@pytest.mark.parametrize("attack", ["holds_files_without_names", "holds_system_v_segments",
                                    "fills_dev_shm_deep"])
def test_what_no_folder_shows_counts_to_the_budget(graded, attack):
    """Files unlinked but kept open and memfds, System V segments touched and detached,
    files two folders deep in /dev/shm: the sandbox is stopped, saying why; it earns nothing
    and nothing of it is left (test_no_process_of_the_sandbox_user_survives)."""
    outputs = " ".join(t["output"] for t in graded[attack]["tests"] if t["tags"] == ["p1a"])
    assert _score(graded[attack]) == 0
    assert "held more than" in outputs or "made more than" in outputs, outputs[:400]


def test_a_reply_far_larger_than_the_contract_is_refused_by_its_shape(graded):
    """__getitem__ returning a 4,000,000 x 1 x 1 tgt_out: the judge refuses it by its shape
    (it once built lists of lists of 2.9 GB from it), naming the call, and the tests that
    take no item still pass."""
    attack = graded["replies_too_large"]
    outputs = [t["output"] for t in attack["tests"] if t["tags"] == ["p1a"]]
    refused = [o for o in outputs if "4,000,000 x 1 x 1" in o]
    assert refused and "getitem" in refused[0], outputs[:3]
    assert 0 < _score(attack) < 4.0


def test_module_level_code_runs_in_the_sandbox_only_and_fails_its_own_tests(graded):
    """A submission's file is taken whole, so its module-level code runs, in the sandbox:
    raising there fails the tests that import the module, naming the error; a region
    function the file deleted is the handout's stub (it does not fall back to the
    reference's)."""
    attack = graded["code_at_module_level"]
    module = " ".join(t["output"] for t in attack["tests"] if t["tags"] == ["p1a"])
    assert _score(attack) == 0 and "module-level code ran" in module, module[:300]
    deleted = graded["deletes_a_function_to_get_the_reference"]
    failed = [t["output"] for t in deleted["tests"] if t["tags"] == ["p1a"] and not t["score"]]
    assert failed and any("NotImplementedError" in output for output in failed)


def test_a_failure_shows_its_message_first(graded):
    """The error's own message leads a failed test's output, before pytest's report: the
    handout's NotImplementedError, or a test's own message that names it (a test that
    expects another exception says which it got)."""
    outputs = [t["output"] for t in graded["handout"]["tests"] if t["tags"] == ["p1a"]]
    late = [o[:300] for o in outputs if "NotImplementedError" not in o.split("\n")[0]]
    assert outputs and not late, late[:2]


def test_a_hidden_failure_shows_its_message_only(graded):
    """After publication a student reads a hidden test's failure: its message, with no path
    of the grader's (a judge's or sandbox's tree) and none of the hidden test's code."""
    outputs = [t["output"] for t in graded["handout"]["tests"]
               if t["tags"] == ["p1a"] and t["visibility"] == "after_published"]
    shown = [o[:300] for o in outputs if any(
        mark in o for mark in ("/sandbox-", "/judge-", "test_hidden_", "def test_", "grade_"))]
    assert outputs and not shown, shown[:2]
