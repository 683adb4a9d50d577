# The instructors' targets. The root Makefile includes this file where it exists (the handout
# has no course/), so every target runs from the repository root as `make TARGET`:
#
#   make test-course        the course's own tests: hidden, kit, grader attacks
#   make seeds              seeds 1-4 of every run, then the bands and tables
#   make seeds-cluster      the same runs as one Slurm job each (course/tools/cluster.py)
#   make problem1-breakdown Problem 1's errors by carries (breakdown.json)
#   make problem2-analysis  Problem 2's analyses beyond the homework (analysis.json)
#   make handout            the student handout (build/handout)
#   make autograder         the Gradescope zip (build/autograder.zip)
#   make grade-check        the grading kit's acceptance (8 minutes)
#   make mutants            the mistake catalogue planted and graded (MISTAKES.md)
#   make mutation           Cosmic Ray's mutants of every solution region, each against its
#                           part's graded tests (course/grading/mutation.json; not in CI)
#   make part-alone         each part filled alone earns all its points (2 minutes)
#   make blast-radius       each mistake costs points in its own part only (MISTAKES.md)
#   make grade-container    the grading suite in a container as Gradescope runs one: podman,
#                           runc, no writable cgroup fs (root; CI runs it beside the next)
#   make test-course-host   the course's tests but those the container pass runs (CI)
#   make grade-limits       the grader in a small cgroup against resource attacks (root)
#   make grade-footprint    the reference graded in that cgroup, with its weights (root)
#   make bands              the reference bands and the reports' generated tables
#   make samples10k | difficulty | pruning-bias | carry-probe | rotary-window
#                           the reference reports' further evidence (see INSTRUCTORS.md)
#
# Here `make problem1` and `make problem2` (and so `make all`) also make the reference
# results that only the course's tools write, so that every committed file has its rule.

problem1: problem1-breakdown
problem2: problem2-analysis

HANDOUT    ?= build/handout
AUTOGRADER ?= build/autograder.zip

.PHONY: test-course
test-course:
	$(PY) -m pytest course

.PHONY: handout autograder grade-check seeds seeds-problem1 seeds-problem2 seeds-problem3 \
        samples10k difficulty pruning-bias bands mutants rotary-window carry-probe grade-limits \
        grade-footprint grade-container \
        part-alone blast-radius \
        problem2-analysis problem1-breakdown
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

# The same seed runs as one cluster job per run (course/tools/cluster.py, through submitit;
# INSTRUCTORS.md, "The seeds on a cluster"): submit and wait for every job (the tool stops,
# exit 2, while any run has no training log), then make here what needs several runs: each
# seed folder's metrics and analyses, and the bands. It never trains on this machine: not
# `make seeds`, whose samples10k trains seed 0's 4,000-step run where its weights are absent
# (a fresh clone); make samples10k apart where you want it. Its first line says so (kit test
# test_instructions.py). CLUSTER_ARGS holds the tool's options, e.g.
#   make seeds-cluster CLUSTER_ARGS="--executor slurm --partition cpu --cpus-per-task 1"
CLUSTER_ARGS ?= --executor slurm
CLUSTER_FIRST_LINE := make seeds-cluster: every seed run trains as a cluster job, none on this \
  machine; here only the seed folders' evaluations and the bands (not samples10k)
.PHONY: seeds-cluster
seeds-cluster:
	@echo "$(CLUSTER_FIRST_LINE)"
	$(PY) -m course.tools.cluster seeds --wait --seeds $(SEEDS) --device $(DEVICE) $(CLUSTER_ARGS)
	$(MAKE) seeds-problem1 seeds-problem2 seeds-problem3
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

# (Problem 1: each folder's metrics.json, evaluate.py's test metrics without the head analysis,
# and its breakdown.json, by course/tools/problem1_seed_metrics.py and problem1_breakdown.py)
P1_SEED_FOLDER_LOGS := $(foreach r,$(P1_RUNS),$(P1)/seeds/seed%/training_log_$(r).json)
seeds-problem1: $(SEEDS:%=$(P1)/seeds/seed%/metrics.json) \
                $(SEEDS:%=$(P1)/seeds/seed%/breakdown.json)
$(P1_SEED_LOGS): $(P1)/seeds/%.json: | data/addition/train.csv
	$(RUN) -m problem1.train $(P1_FLAGS_$(call run_of,$*)) --seed $(call seed_of,$*) \
	  --results_dir $(P1)/seeds/seed$(call seed_of,$*) $(COMMON)
$(P1)/seeds/seed%/metrics.json: | $(P1_SEED_FOLDER_LOGS)
	$(RUN) -m course.tools.problem1_seed_metrics --results_dir $(@D) $(COMMON)
$(P1)/seeds/seed%/breakdown.json: | $(P1_SEED_FOLDER_LOGS)
	$(RUN) -m course.tools.problem1_breakdown --results_dir $(@D) $(COMMON)

# (Problem 2: each folder's analysis.json, course/tools/problem2_analysis.py, after its metrics)
seeds-problem2: $(SEEDS:%=$(P2)/seeds/seed%/metrics.json) \
                $(SEEDS:%=$(P2)/seeds/seed%/analysis.json)
$(P2_SEED_LOGS): $(P2)/seeds/%.json: | data/offset/train.npy
	$(RUN) -m problem2.train $(P2_FLAGS_$(call run_of,$*)) --seed $(call seed_of,$*) \
	  --results_dir $(P2)/seeds/seed$(call seed_of,$*) $(COMMON)
$(P2)/seeds/seed%/metrics.json: | $(foreach r,$(P2_RUNS),$(P2)/seeds/seed%/training_log_$(r).json)
	$(RUN) -m problem2.evaluate --results_dir $(@D) $(COMMON)
$(P2)/seeds/seed%/analysis.json: | $(P2)/seeds/seed%/metrics.json
	$(RUN) -m course.tools.problem2_analysis --results_dir $(@D) $(COMMON)

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
	$(RUN) -m course.tools.samples10k --sample
$(P3)/metrics_n10000.json: $(P3)/samples_$(P3_MAIN)_n10000.txt
	$(PY) -m course.tools.samples10k

# Problem 3's validity by ring span within length bins, from the committed 10,000 samples
# (seed 0; seeds 1-4 committed no samples): no training, about 10 s. It depends on the tool,
# not on the samples file, whose rule would train the long run where its weights are absent.
difficulty: $(P3)/difficulty.json
$(P3)/difficulty.json: course/tools/smiles_difficulty.py
	$(PY) -m course.tools.smiles_difficulty

# Problem 1's greedy pruning chosen on validation and scored on test (the bias of the
# homework's test-chosen curve); needs the two n4000 models, which are not committed.
pruning-bias: $(P1)/pruning_validation.json
$(P1)/pruning_validation.json: | $(P1_ANALYSED:%=$(P1)/model_%.pth)
	$(RUN) -m course.tools.pruning_bias

# Problem 1's test errors by place of the sum and by number of carries, evidence for the
# report that the homework does not ask for (seed 0; the extra seeds' come with
# seeds-problem1); from the six models evaluate.py used, made again whenever it runs
problem1-breakdown: $(P1)/breakdown.json
$(P1)/breakdown.json: $(P1)/metrics.json
	$(RUN) -m course.tools.problem1_breakdown $(COMMON)

# Linear probes and activation patching of the carries on Problem 1's analysed models
# (P1_ANALYSED: forward and reversed n4000, seeds 0-4); the weights are not committed, so
# this trains the ten models first (about 25 min)
model_of = $(patsubst model_%,%,$(word 2,$(subst /, ,$(1))))
carry-probe: $(P1)/carry_probe.json
$(P1)/carry_probe.json: | $(P1_ANALYSED:%=$(P1)/model_%.pth) \
  $(foreach s,$(SEEDS),$(P1_ANALYSED:%=$(P1)/seeds/seed$(s)/model_%.pth))
	$(RUN) -m course.tools.carry_probe $(COMMON)
$(P1)/seeds/%.pth: | data/addition/train.csv
	$(RUN) -m problem1.train $(P1_FLAGS_$(call model_of,$*)) --seed $(call seed_of,$*) \
	  --results_dir $(P1)/seeds/seed$(call seed_of,$*) $(COMMON)

# Problem 2's analyses beyond the homework, from the weights evaluate.py used (per-position
# accuracy, attention tallies, score margins, the length-512 check, the bag-of-tokens ceiling:
# problem2/results/analysis.json), and their figure (figures/accuracy_by_position.png)
problem2-analysis: $(P2)/figures/accuracy_by_position.png
$(P2)/analysis.json: $(P2)/metrics.json
	$(RUN) -m course.tools.problem2_analysis $(COMMON)
$(P2)/figures/accuracy_by_position.png: $(P2)/analysis.json
	$(PY) -m course.tools.problem2_figures

# Problem 2's rotary runs of seeds 0-4 retrained (about 3 min), then the long-sequence check
# with keys at distance 64 or more masked out (problem2/results/rotary_window.json)
rotary-window:
	$(RUN) -m course.tools.rotary_window

# problemN/results/reference_bands.json (mean, sd, min, max over seed 0 and the extra seeds),
# then the reports' generated tables
bands:
	$(PY) -m course.grading.bands
	$(PY) -m course.tools.report_tables

handout:
	rm -rf $(HANDOUT) && $(PY) -m course.grading.handout $(HANDOUT)

autograder:
	$(PY) -m course.grading.grade --autograder $(AUTOGRADER)

# every common mistake of course/grading/mutants.py planted in turn (a few minutes); rewrites
# course/grading/MISTAKES.md and fails if a mistake passes the graded tests
mutants:
	$(PY) -m course.grading.mutants --write

# each part filled alone in the handout (every other region raising) earns all its points in
# local pytest runs (about 2 minutes); blast-radius: each mistake of course/grading/mutants.py
# planted in turn costs points in its own part only (about 25 minutes; rewrites MISTAKES.md's
# blast radius)
part-alone:
	$(PY) -m course.tools.part_alone
blast-radius:
	$(PY) -m course.tools.part_alone --mistakes --write

# every solution region mutated by Cosmic Ray (course/tools/mutation.py), each mutant run
# against its part's graded tests alone, niced: about 15 min of one core; the outcomes are
# merged into course/grading/mutation.json, which the kit test test_mutation.py reads. Not
# in CI. MUTATION_ARGS, e.g. MUTATION_ARGS="--parts p1b", runs part of it.
MUTATION_ARGS ?=
.PHONY: mutation
mutation:
	nice $(PY) -m course.tools.mutation --write $(MUTATION_ARGS)

# the grading kit's acceptance: reference, filled handouts and single parts grade as they
# should, and every planted mistake of course/grading/mutants.py fails a graded test (8 minutes)
grade-check:
	$(PY) -m course.tools.grade_check
	$(PY) -m course.grading.mutants

# the grader in a 768 MiB / 0.5 CPU cgroup (v1, root) against a memory bomb, a /dev/shm and a
# disk fill and a thread storm: each scores 0 and the grader survives (about 3 minutes)
grade-limits:
	$(PY) -m course.tools.grade_limits

# the grading suite in a container as Gradescope runs one: no writable cgroup fs, Docker's
# default capabilities and seccomp profile (course/tools/container.py: the isolation tests,
# correct code's points and the grader's own behaviour there).
# test-course-host: the course's tests but the container's (GRADING_SUITE), which CI runs
# beside `make grade-container` (the container has its own /tmp, network and IPC, and shares
# the users' lock folder; .ci/run). The grader isolates alike natively and in the container
# (one configuration), so the isolation tests run once, where Gradescope's limits hold; the
# autograder's and the class report's tests run natively, beside it, to even the two passes.
GRADING_ISOLATION := $(addprefix course/grading/kit/,test_grade_sealed.py \
  test_sandbox_policy.py test_warden.py test_weights_reader.py)
GRADING_POINTS := $(addprefix course/grading/kit/,test_honest_idioms.py test_part_alone.py \
  test_grade.py test_submission_check.py)
GRADING_SUITE := $(GRADING_ISOLATION) $(GRADING_POINTS)
.PHONY: test-course-host
test-course-host:
	$(PY) -m pytest course $(GRADING_SUITE:%=--ignore=%)
grade-container:
	$(PY) -m course.tools.container -- $(PY) -m pytest -q -p no:cacheprovider $(GRADING_SUITE)

# after `make problem1 problem2` (the ten weights present), as a real submission is graded
grade-footprint:
	$(PY) -m course.tools.grade_limits --footprint
