"""The grading kit (instructors only, like all of course/).

By process (each file's first lines say which runs it; course/README.md's process map says
who each process runs as, what it holds and how they talk):

  the grader
    grade.py      the grading run: setup, the stages of grade(), main, the CSV
                  (python -m course.grading.grade)
    trusted.py    what grading trusts, read once: the kit (code, handout, tests, bands)
    intake.py     a submission into code: the defensive copy, its files whole, the code kept
    scoring.py    points: test entries, the results recomputed and judged against the bands
    gradescope.py results.json, the autograder zip, the container's limits
    judges.py     the grader's side of the judges: start, read, meter, stop
    accounts.py   the users judges and sandboxes run as, reserved and given back
  the zygote
    zygote.py     the fork server of every judge and weights reader (imports neither side)
  a judge
    judge.py      the pytest run of the graded tests, each test's seam on a sandbox, as the
                  judge's own user
    pipe.py       what a judge and the grader agree on (its lines, the CPU stop)
  a judge's warden
    warden.py     the root process beside a judge: a test's sandbox forked, its tree, the
                  stop between calls, what it holds and the cleanup, on the judge's request
    users.py      root's walks over a sandbox's folders, its user's processes stopped and
                  killed (kill(-1) from a thread with that user's credentials), the cleanup
                  (and, after a judge that died, the grader's)
  a sandbox
    sandbox.py    limits and isolation, then the seam's server (tests/seam.py)
    landlock.py   its file-system scope (Landlock)
    syscalls.py   its default-deny syscall policy (libseccomp)
  a weights reader
    weights.py    one archive of a submission's weights parsed as a sandbox user, for the
                  recomputation (data back, nothing unpickled)

and beside them:
    recompute.py  the results recomputed from a submission's weights, logs, samples
    grader_data.py the grader's data files and their SHA-1 (checked before any submission)
    bands.py      the reference bands from the seed runs, and the rule that applies them
    handout.py    the student handout (python -m course.grading.handout)
    rubric.py     the points of every part
    mutants.py    the catalogue of planted mistakes (MISTAKES.md)
    failures.py   how a graded test failed (an exception's type, a message's family)
    class_report.py the class's scores and most common mistakes, after a --csv grading
    unpack.py     a class folder of zips, repositories and folders as it comes, made into
                  the folder of submissions a --csv grading takes
    similarity.py similar code between submissions, function by function (copydetect)
    stubs.py      the non-solutions (stubs that raise, return None, zeros or the input)
                  that no graded test may pass
    hidden/       the hidden graded tests
    kit/          the kit's own tests (pytest course -m kit)
    alternatives/ correct solutions written differently from the reference
"""
