# The whole pipeline, as files: re-running skips what exists, an interrupted Problem 3 run
# resumes (a Problem 1 or 2 run, a few minutes long, starts again).
# Every training run's target is its weights (results/model_*.pth), which git ignores: where
# they are absent `make all` runs all 23 runs and writes every log, metrics file and figure
# (the same contents on the same kind of CPU, whoever runs it).
#
#   make data            generate / download the datasets
#   make test            the public tests (pytest)
#   make problem1 ...    one problem: its runs, evaluation and figures
#   make all -j2         everything (see the README for timings)
#   make submission      the zip to hand in (submission.zip)
#
# Each training job gets (cores / jobs) torch threads, so `make -jN` never oversubscribes
# the machine. Override with THREADS=n, or the device with DEVICE=cuda.

PY      ?= python
DEVICE  ?= auto
NPROC   := $(shell nproc 2>/dev/null || sysctl -n hw.ncpu 2>/dev/null || echo 1)
JOBS     = $(or $(patsubst -j%,%,$(filter -j%,$(MAKEFLAGS))),1)
THREADS ?= $(shell n=$$(( $(NPROC) / $(JOBS) )); [ $$n -ge 1 ] && echo $$n || echo 1)
RUN      = OMP_NUM_THREADS=$(THREADS) $(PY)
COMMON   = --device $(DEVICE) --threads $(THREADS)

.PHONY: all data test smoke lint problem1 problem2 problem3 p3-runs clean-results \
  submission
.DELETE_ON_ERROR:

# The prescribed runs and their train.py flags, from each problem's run registry (RUNS in
# problemN/config.py), as Makefile variables: P1_RUNS, P1_ANALYSED, P2_RUNS, P3_SWEEP,
# P3_MAIN and PN_FLAGS_<run>. Made again whenever a config.py changes.
RUN_REGISTRY := build/runs.mk
include $(RUN_REGISTRY)
$(RUN_REGISTRY): $(wildcard problem[123]/config.py)
	@mkdir -p $(@D)
	@for n in 1 2 3; do $(PY) -m problem$$n.config --make P$$n || { rm -f $@.tmp; echo \
	  "error: $(PY) cannot list the runs: set up the environment first (README)" >&2; \
	  exit 1; }; done > $@.tmp
	@mv $@.tmp $@

# The data first, then the longest work: Problem 3's runs fill the cores for most of the time
# and the short jobs of Problems 1 and 2 come last, where they fill the cores up to the last
# job, Problem 1's evaluate.py (measured: two jobs side by side 98.5% of the time).
# (In one make the Problem 1 runs would start while the SMILES data is still downloading.)
all:
	$(MAKE) data
	$(MAKE) problem3 problem1 problem2

# ------------------------------------------------------------------------------- data
DATA := data/addition/train.csv data/offset/train.npy data/smiles/train.txt
data: $(DATA) data/figures/carries.png
data/addition/train.csv:
	$(PY) generate_datasets.py --only addition
data/offset/train.npy:
	$(PY) generate_datasets.py --only offset
data/smiles/train.txt:
	$(PY) generate_datasets.py --only smiles
data/figures/carries.png: | $(DATA)
	$(PY) provided/visualize.py data

test:
	$(PY) -m pytest

# every script of every problem on tiny data in a scratch folder (about a minute); a problem
# that fails is named in one line and the next one runs (one problem: python -m
# provided.smoke --problem N)
smoke: data/addition/train.csv data/offset/train.npy
	$(PY) -m provided.smoke

lint:
	$(PY) -m ruff check .

# --------------------------------------------------------------------------- problem 1
P1 := problem1/results

$(P1)/model_%.pth: | data/addition/train.csv
	$(RUN) -m problem1.train $(P1_FLAGS_$*) $(COMMON)

$(P1)/metrics.json: $(P1_RUNS:%=$(P1)/model_%.pth)
	$(RUN) -m problem1.evaluate $(COMMON)

$(P1)/figures/pruning.png: $(P1)/metrics.json
	$(PY) provided/visualize.py problem1

problem1: $(P1)/figures/pruning.png

# --------------------------------------------------------------------------- problem 2
P2 := problem2/results

$(P2)/model_%.pth: | data/offset/train.npy
	$(RUN) -m problem2.train $(P2_FLAGS_$*) $(COMMON)

$(P2)/metrics.json: $(P2_RUNS:%=$(P2)/model_%.pth)
	$(RUN) -m problem2.evaluate $(COMMON)

$(P2)/figures/accuracy_by_bucket.png: $(P2)/metrics.json
	$(PY) provided/visualize.py problem2

problem2: $(P2)/figures/accuracy_by_bucket.png

# --------------------------------------------------------------------------- problem 3
P3 := problem3/results

# The long run first: sampling and evaluation wait on it; the sweep fills the other cores.
p3-runs: $(P3)/model_$(P3_MAIN).pth $(P3_SWEEP:%=$(P3)/model_%.pth)

# model_{run}.pth, with its training_log_{run}.json (and the long run's step checkpoints)
$(P3)/model_%.pth: | data/smiles/train.txt
	$(RUN) -m problem3.train $(P3_FLAGS_$*) $(COMMON)

$(P3)/samples_$(P3_MAIN).txt: $(P3)/model_$(P3_MAIN).pth
	$(RUN) -m problem3.sample --run $(P3_MAIN) $(COMMON)

$(P3)/metrics.json: $(P3)/samples_$(P3_MAIN).txt $(P3_SWEEP:%=$(P3)/model_%.pth)
	$(RUN) -m problem3.evaluate $(COMMON)

$(P3)/figures/sweep_grid.png: $(P3)/metrics.json
	$(PY) provided/visualize.py problem3

problem3: $(P3)/figures/sweep_grid.png

# the zip to hand in (submission.zip): what is graded and nothing else, checked as the grader
# reads it (one line per problem found; the README's Submission section). Its exit status 1
# means written with errors named: make says so in one line instead of failing after it
submission:
	@echo "$(PY) -m provided.submission"
	@$(PY) -m provided.submission || { [ $$? = 1 ] && echo "make submission: the zip is \
	written; the error lines above name what it will not be graded on" >&2; }

clean-results:
	rm -f problem*/results/*.pth problem*/results/training_log_*.json \
	  problem*/results/metrics.json

# The instructors' targets (handout, autograder, seeds, ...), in the instructors' copy only.
-include course/course.mk
