# The whole pipeline, as files: re-running skips what exists, an interrupted Problem 3 run
# resumes (a Problem 1 or 2 run, a few minutes long, starts again).
# Every training run's target is its weights (results/model_*.pth), which are not committed:
# in a fresh clone `make all` therefore re-runs all 23 runs and rewrites the committed logs,
# metrics and figures (with the same contents, on the same kind of CPU).
#
#   make data            generate / download the datasets
#   make test            the grading tests
#   make problem1 ...    one problem: its runs, evaluation and figures
#   make all -j2         everything (see the README for timings)
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
HANDOUT    ?= build/handout
AUTOGRADER ?= build/autograder.zip

.PHONY: all data test smoke lint problem1 problem2 problem3 p3-runs clean-results
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

# every script of every problem on tiny data in a scratch folder (about a minute)
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

clean-results:
	rm -f problem*/results/*.pth problem*/results/training_log_*.json \
	  problem*/results/metrics.json

# BEGIN INSTRUCTORS
.PHONY: handout autograder grade-check seeds seeds-problem1 seeds-problem2 seeds-problem3 \
        samples10k difficulty pruning-bias bands mutants rotary-window carry-probe grade-limits
# ----------------------------------------------------------------------- extra seeds
# Seeds 1-4 of every Problem 1, 2 and 3 run, each seed in its own folder
# problemN/results/seeds/seed{S}/ (seed 0 is the committed run itself). Problems 1 and 2
# first (short jobs), then the 52 Problem 3 runs, which resume, and the long run's 10,000
# samples (seed 0 only).
# A seed run's target is its training log (committed, written together with its weights),
# so a fresh clone skips every finished run; a folder's metrics.json is made once all its
# logs exist (order-only: Problems 1 and 2 evaluate from the weights, which are not
# committed).
SEEDS := 1 2 3 4
seed_of = $(patsubst seed%,%,$(word 1,$(subst /, ,$(1))))
run_of = $(patsubst training_log_%,%,$(word 2,$(subst /, ,$(1))))

seeds:
	$(MAKE) seeds-problem1 seeds-problem2
	$(MAKE) seeds-problem3 samples10k
	$(MAKE) bands

seed_logs = $(foreach s,$(SEEDS),$(foreach r,$(2),$(1)/seeds/seed$(s)/training_log_$(r).json))
P1_SEED_LOGS := $(call seed_logs,$(P1),$(P1_RUNS))
P2_SEED_LOGS := $(call seed_logs,$(P2),$(P2_RUNS))
P3_SEED_LOGS := $(call seed_logs,$(P3),$(P3_SWEEP))
# cell by cell (seeds 1-4 of one cell, then the next), so that an unfinished pass leaves whole
# cells of five seeds rather than whole seeds of some cells
P3_SEED_LOGS_BY_CELL := $(foreach r,$(P3_SWEEP),$(foreach s,$(SEEDS),\
                        $(P3)/seeds/seed$(s)/training_log_$(r).json))
# then the 4,000-step run at seeds 1-4 (35-50 min each)
P3_MAIN_SEED_LOGS := $(SEEDS:%=$(P3)/seeds/seed%/training_log_$(P3_MAIN).json)

seeds-problem1: $(SEEDS:%=$(P1)/seeds/seed%/metrics.json)
$(P1_SEED_LOGS): $(P1)/seeds/%.json: | data/addition/train.csv
	$(RUN) -m problem1.train $(P1_FLAGS_$(call run_of,$*)) --seed $(call seed_of,$*) \
	  --results_dir $(P1)/seeds/seed$(call seed_of,$*) $(COMMON)
$(P1)/seeds/seed%/metrics.json: | $(foreach r,$(P1_RUNS),$(P1)/seeds/seed%/training_log_$(r).json)
	$(RUN) -m problem1.evaluate --heads skip --results_dir $(@D) $(COMMON)

seeds-problem2: $(SEEDS:%=$(P2)/seeds/seed%/metrics.json)
$(P2_SEED_LOGS): $(P2)/seeds/%.json: | data/offset/train.npy
	$(RUN) -m problem2.train $(P2_FLAGS_$(call run_of,$*)) --seed $(call seed_of,$*) \
	  --results_dir $(P2)/seeds/seed$(call seed_of,$*) $(COMMON)
$(P2)/seeds/seed%/metrics.json: | $(foreach r,$(P2_RUNS),$(P2)/seeds/seed%/training_log_$(r).json)
	$(RUN) -m problem2.evaluate --results_dir $(@D) $(COMMON)

seeds-problem3: $(P3_SEED_LOGS_BY_CELL) $(P3_MAIN_SEED_LOGS) \
                $(SEEDS:%=$(P3)/seeds/seed%/metrics.json)
$(P3_SEED_LOGS) $(P3_MAIN_SEED_LOGS): $(P3)/seeds/%.json: | data/smiles/train.txt
	$(RUN) -m problem3.train $(P3_FLAGS_$(call run_of,$*)) --seed $(call seed_of,$*) \
	  --results_dir $(P3)/seeds/seed$(call seed_of,$*) $(COMMON)
$(P3)/seeds/seed%/metrics.json: $(foreach r,$(P3_SWEEP) $(P3_MAIN),\
                                  $(P3)/seeds/seed%/training_log_$(r).json)
	$(RUN) -m problem3.evaluate --results_dir $(@D) $(COMMON)

# Problem 3's long run at 10,000 samples (uniqueness among 10,000 samples). The weights are not
# committed, so on a fresh clone this trains the 4,000-step run again (43 min).
samples10k: $(P3)/metrics_n10000.json
$(P3)/samples_$(P3_MAIN)_n10000.txt: | $(P3)/model_$(P3_MAIN).pth
	$(RUN) -m tools.samples10k --sample
$(P3)/metrics_n10000.json: $(P3)/samples_$(P3_MAIN)_n10000.txt
	$(PY) -m tools.samples10k

# Problem 3's validity by ring span within length bins, from the committed 10,000 samples
# (seed 0; seeds 1-4 committed no samples): no training, about 10 s. It depends on the tool,
# not on the samples file, whose rule would train the long run where its weights are absent.
difficulty: $(P3)/difficulty.json
$(P3)/difficulty.json: tools/smiles_difficulty.py
	$(PY) -m tools.smiles_difficulty

# Problem 1's greedy pruning chosen on validation and scored on test (the bias of the
# homework's test-chosen curve); needs the two n4000 models, which are not committed.
pruning-bias: $(P1)/pruning_validation.json
$(P1)/pruning_validation.json: | $(P1_ANALYSED:%=$(P1)/model_%.pth)
	$(RUN) -m tools.pruning_bias

# Linear probes and activation patching of the carries on Problem 1's analysed models
# (P1_ANALYSED: forward and reversed n4000, seeds 0-4); the weights are not committed, so
# this trains the ten models first (about 25 min)
model_of = $(patsubst model_%,%,$(word 2,$(subst /, ,$(1))))
carry-probe: $(P1)/carry_probe.json
$(P1)/carry_probe.json: | $(P1_ANALYSED:%=$(P1)/model_%.pth) \
  $(foreach s,$(SEEDS),$(P1_ANALYSED:%=$(P1)/seeds/seed$(s)/model_%.pth))
	$(RUN) -m tools.carry_probe $(COMMON)
$(P1)/seeds/%.pth: | data/addition/train.csv
	$(RUN) -m problem1.train $(P1_FLAGS_$(call model_of,$*)) --seed $(call seed_of,$*) \
	  --results_dir $(P1)/seeds/seed$(call seed_of,$*) $(COMMON)

# Problem 2's rotary runs of seeds 0-4 retrained (about 3 min), then the long-sequence check
# with keys at distance 64 or more masked out (problem2/results/rotary_window.json)
rotary-window:
	$(RUN) -m tools.rotary_window

# problemN/results/reference_bands.json (mean, sd, min, max over seed 0 and the extra seeds),
# then the reports' generated tables
bands:
	$(PY) -m tools.bands
	$(PY) -m tools.report_tables

handout:
	rm -rf $(HANDOUT) && $(PY) -m grading.handout $(HANDOUT)

autograder:
	$(PY) -m grading.grade --autograder $(AUTOGRADER)

# every common mistake of grading/mutants.py planted in turn (a few minutes); rewrites
# grading/MISTAKES.md and fails if a mistake passes the graded tests
mutants:
	$(PY) -m grading.mutants --write

# the grading kit's acceptance: reference, filled handouts and single parts grade as they
# should, and every planted mistake of grading/mutants.py fails a graded test (8 minutes)
grade-check:
	$(PY) -m tools.grade_check
	$(PY) -m grading.mutants

# the grader in a 768 MiB / 0.5 CPU cgroup (v1, root) against a memory bomb, a /dev/shm and a
# disk fill and a thread storm: each scores 0 and the grader survives (about 3 minutes)
grade-limits:
	$(PY) -m tools.grade_limits
# END INSTRUCTORS
