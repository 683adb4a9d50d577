"""A pytest plugin for the handout stubbed with kind 'any' (course/grading/stubs.py), copied
to that tree's root: every test runs once per stub kind named in the environment variable
STUB_KINDS (comma-separated), with STUB_KIND set to that kind while it runs (the stubs read
it at every call), and the outcomes go to the JSON file named by STUB_REPORT as
{kind: {test id: 'passed' | 'failed' | 'skipped'}}.

    STUB_KINDS=raises,returns_none STUB_REPORT=out.json python -m pytest -p stub_plugin ...

Imports nothing of the course: it runs in the handout, which has no course/.
"""

import json
import os

import pytest

KINDS = [kind for kind in os.environ.get("STUB_KINDS", "").split(",") if kind]
ARGUMENT = "stub_kind"
_kinds, _outcomes = {}, {}  # test id: its kind; test id: its outcome


def pytest_generate_tests(metafunc):
    if not KINDS:
        raise pytest.UsageError("stub_plugin: set STUB_KINDS, e.g. STUB_KINDS=raises")
    metafunc.fixturenames.append(ARGUMENT)
    metafunc.parametrize(ARGUMENT, KINDS, ids=[f"stub-{kind}" for kind in KINDS],
                         indirect=True)


@pytest.fixture
def stub_kind(request):
    return request.param


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """STUB_KIND set before any fixture of the test runs."""
    kind = item.callspec.params[ARGUMENT]
    os.environ["STUB_KIND"] = _kinds[item.nodeid] = kind


def pytest_runtest_logreport(report):
    before = _outcomes.get(report.nodeid, "passed")
    if report.failed:
        _outcomes[report.nodeid] = "failed"
    elif report.skipped and before != "failed":
        _outcomes[report.nodeid] = "skipped"
    elif report.when == "call" and before == "passed":
        _outcomes[report.nodeid] = "passed"


def pytest_sessionfinish(session):
    report = {kind: {} for kind in KINDS}
    for test, outcome in _outcomes.items():
        if test in _kinds:
            report[_kinds[test]][test] = outcome
    if os.environ.get("STUB_REPORT"):
        with open(os.environ["STUB_REPORT"], "w") as out:
            json.dump(report, out, indent=1)
