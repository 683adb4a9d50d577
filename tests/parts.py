"""The homework's parts, one table: each part's test marker (pytest -m p1b), problem, letter
and title. conftest.py registers the markers from it and checks that every graded test
carries exactly one; the course's rubric gives each part its points."""

PARTS = {
    "p1a": ("problem1", "A", "Addition dataset"),
    "p1b": ("problem1", "B", "Attention"),
    "p1c": ("problem1", "C", "Encoder and decoder layers"),
    "p1d": ("problem1", "D", "Training"),
    "p1e": ("problem1", "E", "Head ablation, pruning, attention maps"),
    "p2a": ("problem2", "A", "Offset dataset"),
    "p2b": ("problem2", "B", "Sinusoidal table and shift rotation"),
    "p2c": ("problem2", "C", "Rotary encoding and score shift"),
    "p2d": ("problem2", "D", "Training"),
    "p2e": ("problem2", "E", "Evaluation and checks"),
    "p3a": ("problem3", "A", "Vocabulary and dataset"),
    "p3b": ("problem3", "B", "Decoder-only model"),
    "p3c": ("problem3", "C", "Training"),
    "p3d": ("problem3", "D", "Sampling and well-formedness"),
    "p3e": ("problem3", "E", "Evaluation"),
}

# Which functions a test's subject relies on, within its own part (the other parts' code
# is stood in for, tests/tiny*.py, so that each part is graded alone): per test file, rows
# (the relying tests' name prefixes, the function relied on, that function's own tests'
# name prefixes). conftest.py runs a function's own tests before the tests that rely on it
# and, when a relying test fails after one of those did, says so in its message: fix that
# function first (local runs; the grader keeps each test's own message, see conftest.py).
RELIES_ON = {
    "tests/test_problem1_attention.py": [
        (("test_mha_", "test_head_column_layout"), "scaled_dot_product_attention",
         ("test_sdpa_",)),
    ],
    "tests/test_problem1_train.py": [
        (("test_train_end_to_end",), "train_step", ("test_train_step_",)),
        (("test_train_end_to_end",), "validate", ("test_validate_",)),
        (("test_train_end_to_end",), "steps_to_95", ("test_steps_to_95",)),
    ],
    "tests/test_problem1_evaluate.py": [
        (("test_evaluate_end_to_end", "test_head_removal_scorer_"), "remove_head",
         ("test_remove_head_",)),
        (("test_evaluate_end_to_end",), "greedy_pruning", ("test_greedy_pruning_",)),
        (("test_evaluate_end_to_end",), "single_head_ablation", ("test_single_head_ablation",)),
        (("test_evaluate_end_to_end",), "mean_attention_maps", ("test_mean_attention_maps_",)),
    ],
    "tests/test_problem2_positional.py": [
        (("test_apply_rotary_", "test_rotary_score_"), "rotary_frequencies",
         ("test_rotary_frequencies_",)),
        (("test_score_shift_rotary_", "test_score_shift_random_"), "apply_rotary",
         ("test_apply_rotary_", "test_rotary_score_")),
    ],
    "tests/test_problem2_train.py": [
        (("test_train_epoch_", "test_evaluate_split_", "test_training_"), "loss_and_correct",
         ("test_loss_and_correct_",)),
        (("test_training_",), "train_epoch", ("test_train_epoch_",)),
        (("test_training_",), "evaluate_split", ("test_evaluate_split_",)),
    ],
    "tests/test_problem2_evaluate.py": [
        (("test_metrics",), "per_position_counts", ("test_per_position_counts_",)),
        (("test_metrics",), "accuracy_over", ("test_accuracy_over_",)),
        (("test_checks",), "pairwise_rotary", ("test_pairwise_rotary_",)),
        (("test_checks",), "score_shift_errors", ("test_score_shift_errors_",)),
    ],
    "tests/test_problem3_model.py": [
        (("test_decoder_", "test_final_layernorm_", "test_embeddings_", "test_dropout_on_",
          "test_no_dropout_", "test_eval_mode_"), "causal_mask", ("test_causal_mask",)),
        (("test_decoder_", "test_final_layernorm_", "test_embeddings_", "test_dropout_on_",
          "test_no_dropout_", "test_eval_mode_"), "Block", ("test_block_", "test_post_block_")),
        (("test_eval_mode_",), "DecoderLM.forward",
         ("test_decoder_lm_composes_", "test_embeddings_")),
    ],
    "tests/test_problem3_train.py": [
        (("test_train_end_to_end", "test_diverged_run_"), "lr_at_step", ("test_lr_at_step",)),
        (("test_train_end_to_end", "test_diverged_run_"), "train_step", ("test_train_step_",)),
    ],
    "tests/test_problem3_sample.py": [
        (("test_sample_script_",), "generate_batch", ("test_generate_",)),
    ],
    "tests/test_problem3_evaluate.py": [
        (("test_evaluate_end_to_end",), "sample_metrics", ("test_validity_",)),
        (("test_evaluate_end_to_end",), "breakdown", ("test_breakdown_",)),
        (("test_evaluate_end_to_end",), "sweep_entry", ("test_sweep_entry_",)),
    ],
}
