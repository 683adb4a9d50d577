"""How a graded test failed, read from its output in results.json: the exception's type and
its message's family (course/grading/class_report.py attributes mistakes by it; the mistake
catalogue, course/grading/mutants.py, records it for every catching test).

Runs in the instructors' tools after grading (the class report, the catalogue's build),
never in the grader.
"""

import re

# the kinds of a test's own verdict (and of what is not an exception): the rest are errors
VERDICTS = ("AssertionError", "Failed", "Timeout", "Skipped", "Unknown")
EXCEPTION_NAME = re.compile(r"([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)(?::\s?(.*))?")
EXCEPTION_ENDS = ("Error", "Exception", "Warning", "Exit", "Interrupt", "Iteration", "Failed")
# the first lines of a test stopped for its time (course/grading/judges.py's: over its CPU
# limit or its group's, or idle too long)
TIME_LIMITS = ("not graded: this test ran over its", "not graded: this test waited or slept",
               "not graded: the tests of")
# a number, not the digits of a name (float32, problem1.attention)
NUMBER = re.compile(r"(?<!\w)(?:0x[0-9a-fA-F]+|[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)")


def failure_kind(output: str) -> str:
    """How a failed test failed, from its output in results.json: "Type: message family".

    The judge (course/grading/judge.py, failure_text) puts the failing exception's own line
    first: pytest's crash message, "NameError: name 'NEG_INF' is not defined" (an exception
    the code under test raised comes back through tests/seam.py as its own type, the remote
    traceback as a note below), "AssertionError: <the test's message, with its hint>", or
    "assert <expression>" for an assertion without a message. So the type is that line's
    exception name (AssertionError for "assert ..."); a line that names none is looked for
    among pytest's "E   ..." lines below; a test over its time limit is "Timeout", a skipped
    one "Skipped", anything else "Unknown". The message family is the rest of that line
    with every number (and hexadecimal address, not a name's digits) replaced by "#" and
    the spaces squeezed (at most 200 characters), so that the same mistake on other sizes
    or values gives the same kind."""
    lines = output.splitlines()
    first = lines[0].strip() if lines else ""
    if first.startswith(TIME_LIMITS):
        kind, message = "Timeout", ""
    elif first.startswith("skipped"):
        kind, message = "Skipped", ""
    else:
        below = [line[1:].strip() for line in lines if line.startswith("E ")]
        for line in [first, *below[:1]]:
            found = EXCEPTION_NAME.fullmatch(line)
            if found and found.group(1).rsplit(".", 1)[-1].endswith(EXCEPTION_ENDS):
                kind, message = found.group(1), found.group(2) or ""
                break
            if line.startswith("assert "):
                kind, message = "AssertionError", line
                break
        else:
            kind, message = "Unknown", first
    family = " ".join(NUMBER.sub("#", message).split())[:200]
    return f"{kind}: {family}" if family else kind


def is_error(kind: str) -> bool:
    """Whether a failure kind is an exception (raised by the code, or by the test on what
    the code gave), not the test's own verdict."""
    return kind.split(":", 1)[0] not in VERDICTS
