"""What a judge and the grader agree on. Runs in the grader (course/grading/judges.py) and in
every judge (course/grading/judge.py), and is imported by the zygote through the judge, so it
holds nothing secret. The judge's tree names the tests it runs (NODES); the judge writes one
JSON line per test start and end on its pipe (a start in clock ticks since boot,
boot_ticks); the grader signals CPU_STOP when the running test is over its CPU time."""

import os
import signal
import time

NODES = "nodes.json"  # in a judge's tree: the node ids it runs, in order
OUTPUT_CHARS = 2500  # of a failed test's report, its last characters
TICKS = os.sysconf("SC_CLK_TCK")
CPU_STOP = signal.SIGUSR1  # the grader's word that the running test is over its CPU limit
OVER_CPU = "stopped by the grader: over the CPU time limit"  # the test's failure then


def boot_ticks() -> float:
    """Now, in the clock ticks since boot in which /proc/<pid>/stat gives a start time."""
    return time.clock_gettime(time.CLOCK_BOOTTIME) * TICKS
