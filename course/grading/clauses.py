"""The clause-to-test map: every sentence of every solution docstring that states a behaviour
(a shape, a dtype, a value, an order, an exception, a determinism, an edge case, a mode)
names the public tests that fail when it is broken, so that a student learns of the mistake
before the deadline.

CLAUSES maps each docstring of a solution region (course.grading.rubric.REGIONS; an
__init__ without a docstring of its own is read through its class's docstring, and a method
without any docstring, such as __len__, is covered by its class's) to its clauses, in
order: (a fragment of the docstring, copied word for word, the public tests that fail when
it is broken as "file::test name"). A fragment that states no behaviour (advice, a reason,
a cross-reference) names no test but says why, as (fragment, None, why).

The kit test course/grading/kit/test_clauses.py checks that every fragment is in its
docstring, that every sentence of every docstring holds a fragment, that every behaviour
fragment names at least one test and that each named test exists. It does not run the
tests: which tests catch which mistakes is measured by course/tools/mutation.py (make
mutation) and course/tools/fresh_mistakes.py.
"""

T1A = "tests/test_problem1_dataset.py::"
T1B = "tests/test_problem1_attention.py::"
T1C = "tests/test_problem1_model.py::"
T1D = "tests/test_problem1_train.py::"
T1E = "tests/test_problem1_evaluate.py::"
T2A = "tests/test_problem2_dataset.py::"
T2P = "tests/test_problem2_positional.py::"
T2D = "tests/test_problem2_train.py::"
T2E = "tests/test_problem2_evaluate.py::"
T3A = "tests/test_problem3_dataset.py::"
T3B = "tests/test_problem3_model.py::"
T3C = "tests/test_problem3_train.py::"
T3D = "tests/test_problem3_sample.py::"
T3E = "tests/test_problem3_evaluate.py::"

NOT_BEHAVIOUR = None

CLAUSES = {
    # ------------------------------------------------------------------ problem 1
    "problem1/dataset.py::AdditionDataset": [
        (
            "as (src [7], tgt_in [4], tgt_out [4]) long tensors",
            [T1A + "test_forward_items", T1A + "test_reversed_items_reverse_the_sum_only"],
        ),
        ("the split is read from data_dir/addition/{split}.csv", [T1A + "test_forward_items"]),
        (
            "max_pairs keeps the first max_pairs pairs (None: all)",
            [T1A + "test_pre_tokenized_tensors_and_max_pairs"],
        ),
        (
            "The items are also held whole, as the attributes .src [N, 7], .tgt_in [N, 4] and "
            ".tgt_out [N, 4] (long tensors, row i = item i)",
            [T1A + "test_pre_tokenized_tensors_and_max_pairs"],
        ),
        (
            "raises ValueError; a missing file raises FileNotFoundError",
            [T1A + "test_bad_arguments"],
        ),
    ],
    "problem1/attention.py::scaled_dot_product_attention": [
        (
            "softmax(q k^T / sqrt(d_k)) v",
            [T1B + "test_sdpa_scales_by_sqrt_dk", T1B + "test_sdpa_matches_torch_without_mask"],
        ),
        ("mask broadcastable to [B, h, T_q, T_k] (True = attend)", [T1B + "test_sdpa_masks"]),
        (
            "Returns (out [B, h, T_q, d_v], weights [B, h, T_q, T_k])",
            [T1B + "test_sdpa_matches_torch_without_mask"],
        ),
        (
            "masked scores are -inf before the softmax, so their weights are exactly zero",
            [T1B + "test_sdpa_masks"],
        ),
    ],
    "problem1/attention.py::causal_mask": [
        (
            "[size, size] bool, True on and below the diagonal: query i sees keys 0..i",
            [T1B + "test_causal_mask"],
        ),
    ],
    "problem1/attention.py::MultiHeadAttention.__init__": [
        (
            "Four projections W_q, W_k, W_v, W_o, each nn.Linear(d_model, d_model) with bias, and "
            "d_k = d_model // num_heads",
            [T1B + "test_mha_constructor_keeps_its_contract",
             T1B + "test_mha_matches_torch_multihead_attention"],
        ),
        (
            "ValueError if num_heads does not divide d_model",
            [T1B + "test_mha_constructor_keeps_its_contract"],
        ),
    ],
    "problem1/attention.py::MultiHeadAttention.split_heads": [
        (
            "[B, T, d_model] -> [B, h, T, d_k]: head i gets columns i*d_k:(i+1)*d_k",
            [T1B + "test_head_column_layout"],
        ),
    ],
    "problem1/attention.py::MultiHeadAttention.forward": [
        (
            "query [B, T_q, d_model], key and value [B, T_k, d_model]",
            [T1B + "test_mha_projects_keys_and_values_from_their_own_inputs"],
        ),
        (
            "Returns (out [B, T_q, d_model], weights [B, h, T_q, T_k])",
            [T1B + "test_mha_matches_torch_multihead_attention"],
        ),
    ],
    "problem1/model.py::EncoderLayer.forward": [
        (
            "x [B, T, d_model] -> (x [B, T, d_model], self-attention weights [B, h, T, T])",
            [
                T1C + "test_encoder_layer_shapes_and_normalized_output",
                T1C + "test_encoder_layer_matches_its_formula",
            ],
        ),
    ],
    "problem1/model.py::DecoderLayer.forward": [
        (
            "x [B, T, d_model], memory [B, S, d_model]",
            [T1C + "test_decoder_layer_matches_its_formula"],
        ),
        (
            "self_mask None means causal: build it with causal_mask",
            [
                T1C + "test_decoder_layer_is_causal_and_normalized",
                T1C + "test_layers_pass_their_masks_on",
            ],
        ),
        (
            "(imported above by that name; the Part C tests swap it, and MultiHeadAttention, for "
            "torch's, so that a Part B mistake costs no Part C points)",
            NOT_BEHAVIOUR,
            "why the name matters to the tests; the behaviour is the clause before",
        ),
        (
            "Returns (x [B, T, d_model], self weights [B, h, T, T], cross weights [B, h, T, S])",
            [T1C + "test_decoder_layer_is_causal_and_normalized"],
        ),
    ],
    "problem1/train.py::train_step": [
        (
            "One Adam step of teacher-forced cross-entropy over the four output digits",
            [
                T1D + "test_train_step_takes_one_step_on_the_teacher_forced_loss",
                T1D + "test_train_step_clears_the_gradients_between_steps",
            ],
        ),
        (
            "with the model in training mode (a validation before it leaves the model in eval "
            "mode)",
            [T1D + "test_train_step_runs_in_training_mode"],
        ),
        (
            "src [B, 7], tgt_in [B, 4], tgt_out [B, 4]",
            [T1D + "test_train_step_takes_one_step_on_the_teacher_forced_loss"],
        ),
        (
            "The cross-entropy of each output position is taken over all 12 logits (the whole "
            "vocabulary, PLUS and BOS included), and averaged over the B * 4 positions",
            [T1D + "test_train_step_takes_one_step_on_the_teacher_forced_loss"],
        ),
        (
            "Returns the batch's mean loss",
            [T1D + "test_train_step_takes_one_step_on_the_teacher_forced_loss"],
        ),
    ],
    "problem1/train.py::validate": [
        (
            "Greedy-decode every source of the split at once, in eval mode (no dropout), and "
            "compare with tgt_out",
            [T1D + "test_validate_decodes_greedily", T1D + "test_validate_runs_in_eval_mode"],
        ),
        (
            "Returns (exact match: fraction of sums with all four digits right, token accuracy: "
            "fraction of digits right)",
            [T1D + "test_validate_decodes_greedily"],
        ),
        (
            "No teacher forcing: each digit is predicted after the model's own earlier digits",
            [T1D + "test_validate_decodes_greedily"],
        ),
        (
            "device is where the sources are moved for decoding, the model's own device; None "
            "means the device of the model's parameters",
            [T1D + "test_validate_decodes_greedily"],
        ),
    ],
    "problem1/train.py::steps_to_95": [
        (
            "The first logged step whose val_exact_match reaches threshold, or None",
            [T1D + "test_steps_to_95"],
        ),
    ],
    "problem1/evaluate.py::remove_head": [
        (
            "Remove head `name` (e.g. 'dec1.cross.h2') in place: zero its d_k input columns of W_o",
            [
                T1E + "test_remove_head_changes_exactly_one_head",
                T1E + "test_remove_head_names_map_to_their_modules",
                T1E + "test_remove_head_uses_the_attentions_own_head_width",
            ],
        ),
    ],
    "problem1/evaluate.py::single_head_ablation": [
        (
            "{head: score([head])}: the test exact match with each head removed alone",
            [T1E + "test_single_head_ablation"],
        ),
    ],
    "problem1/evaluate.py::greedy_pruning": [
        (
            "Remove heads one at a time, each time the one whose removal costs the least",
            [T1E + "test_greedy_pruning_recomputes_costs"],
        ),
        (
            "score(removed: list of head names) -> exact match of the model without those heads",
            [T1E + "test_greedy_pruning_recomputes_costs"],
        ),
        (
            "The cost of every remaining head is recomputed after each removal",
            [T1E + "test_greedy_pruning_recomputes_costs"],
        ),
        (
            "(ties go to the head listed first)",
            [T1E + "test_greedy_pruning_breaks_ties_by_head_order"],
        ),
        (
            "Returns [{'removed': [...in order], 'test_exact_match': ...}] for 0, 1, ..., "
            "len(heads) heads removed",
            [T1E + "test_greedy_pruning_recomputes_costs"],
        ),
    ],
    "problem1/evaluate.py::mean_attention_maps": [
        (
            "Mean attention weights over the split, the decoder fed its own greedy predictions",
            [
                T1E + "test_mean_attention_maps_follow_greedy_decoding",
                T1E + "test_mean_attention_maps_shapes_and_means",
            ],
        ),
        (
            "with the model in eval mode (dropout off) whatever mode it was handed in",
            [T1E + "test_mean_attention_maps_run_the_model_in_eval_mode"],
        ),
        (
            "The model may be left in eval mode afterwards",
            NOT_BEHAVIOUR,
            "a freedom: either mode afterwards is correct, so no test may fail on it",
        ),
        ("A caller that trains next sets the mode itself", NOT_BEHAVIOUR, "advice about callers"),
        (
            "Returns {'encoder': [layers, h, 7, 7] self-attention, 'decoder_self': [layers, h, 4, "
            "4], 'decoder_cross': [layers, h, 4, 7]}, float tensors on the CPU",
            [T1E + "test_mean_attention_maps_shapes_and_means"],
        ),
        (
            "row j of a decoder map is output step j, column i of a cross map source position i",
            [T1E + "test_mean_attention_maps_follow_greedy_decoding"],
        ),
        (
            "device is where the sources are moved, the model's own device; None means the "
            "device of the model's parameters",
            [T1E + "test_mean_attention_maps_shapes_and_means"],
        ),
    ],
    # ------------------------------------------------------------------ problem 2
    "problem2/dataset.py::OffsetDataset": [
        (
            "(tokens [T], targets [T]) long tensors, one per sequence of "
            "data_dir/offset/{split}.npy",
            [T2A + "test_offset_dataset_targets"],
        ),
        (
            "The whole split is loaded once into self.tokens and self.targets [N, T]",
            [T2A + "test_offset_dataset_targets"],
        ),
        (
            "targets[:, i] = tokens[:, i - k] for i >= k and IGNORE_INDEX for i < k",
            [
                T2A + "test_offset_dataset_targets",
                T2A + "test_offset_dataset_other_k",
                T2A + "test_offset_dataset_k_zero_targets_every_token",
            ],
        ),
        (
            "A split other than 'train' or 'test' raises ValueError, a missing file "
            "FileNotFoundError",
            [T2A + "test_offset_dataset_bad_split_and_missing_file"],
        ),
    ],
    "problem2/positional.py::sinusoidal_table": [
        (
            "[max_len, d_model] float32: PE[p, 2i] = sin(p omega_i), PE[p, 2i+1] = cos(p omega_i)",
            [
                T2P + "test_sinusoidal_table_hand_picked_entries_d4",
                T2P + "test_sinusoidal_table_d64_against_math",
            ],
        ),
    ],
    "problem2/positional.py::shift_rotation": [
        (
            "[d_model, d_model] float32 R_s with PE[p + s] = R_s PE[p] for every p",
            [
                T2P + "test_shift_rotation_moves_every_row",
                T2P + "test_shift_rotation_zero_is_identity",
            ],
        ),
        (
            "R_s is block diagonal: one 2x2 block per pair (2i, 2i+1), at rows and columns 2i and "
            "2i+1, and zeros elsewhere",
            [T2P + "test_shift_rotation_moves_every_row"],
        ),
        (
            "Derive the block from the angle-addition identities for sin and cos",
            NOT_BEHAVIOUR,
            "how to derive it; the behaviour is R_s PE[p] = PE[p + s]",
        ),
        ("it must not depend on p", [T2P + "test_shift_rotation_moves_every_row"]),
    ],
    "problem2/positional.py::rotary_frequencies": [
        (
            "[d_model / 2] float32: theta_i = omega_i = 10000^(-2i/d), the sinusoidal frequencies",
            [T2P + "test_rotary_frequencies_equal_sinusoidal_frequencies"],
        ),
    ],
    "problem2/positional.py::apply_rotary": [
        (
            "Rotate each pair (2i, 2i+1) of x at position p by the angle p theta_i",
            [
                T2P + "test_apply_rotary_hand_example",
                T2P + "test_apply_rotary_matches_complex_rotation",
            ],
        ),
        (
            "x: [..., T, d]; positions: [T] (integers or floats)",
            [T2P + "test_apply_rotary_matches_complex_rotation"],
        ),
        (
            "Returns a tensor of x's shape and dtype",
            [
                T2P + "test_apply_rotary_keeps_a_float64_input_float64",
                T2P + "test_apply_rotary_matches_complex_rotation",
            ],
        ),
        (
            "(x_2i cos(p theta_i) - x_2i+1 sin(p theta_i), x_2i sin(p theta_i) + x_2i+1 cos(p "
            "theta_i))",
            [T2P + "test_apply_rotary_hand_example"],
        ),
        (
            "No vector is added: a rotated query or key keeps its norm",
            [T2P + "test_apply_rotary_position_zero_is_identity_and_norms_are_kept"],
        ),
    ],
    "problem2/positional.py::score_shift_invariance": [
        (
            "|score(q_pos + shift, k_pos + shift) - score(q_pos, k_pos)| for one query and one key",
            [
                T2P + "test_score_shift_sinusoidal_hand_value",
                T2P + "test_score_shift_random_vectors",
            ],
        ),
        ("q, k: [d] vectors", [T2P + "test_score_shift_random_vectors"]),
        (
            "Under 'rotary' the score is R(a) q . R(b) k with both vectors rotated by apply_rotary "
            "at their positions a and b",
            [
                T2P + "test_score_shift_rotary_hand_value_is_zero",
                T2P + "test_score_shift_random_vectors",
            ],
        ),
        (
            "under 'sinusoidal' it is (q + PE[a]) . (k + PE[b])",
            [T2P + "test_score_shift_sinusoidal_hand_value"],
        ),
        (
            "Zero (up to rounding) means the score depends on the two positions only through their "
            "difference",
            NOT_BEHAVIOUR,
            "what the number means",
        ),
        ("Any other scheme raises ValueError", [T2P + "test_score_shift_bad_scheme_raises"]),
    ],
    "problem2/train.py::loss_and_correct": [
        (
            "Summed cross-entropy, number of correct argmax predictions, and number of targets",
            [T2D + "test_loss_and_correct_by_hand"],
        ),
        ("only the positions with a target count", [T2D + "test_loss_and_correct_by_hand"]),
        (
            "Returns (loss_sum tensor, correct int, count int)",
            [T2D + "test_loss_and_correct_by_hand"],
        ),
    ],
    "problem2/train.py::evaluate_split": [
        (
            "the cross-entropy summed over those positions and divided by their number, and the "
            "fraction of them whose argmax is the target (pooled over every batch, not averaged "
            "per batch)",
            [T2D + "test_evaluate_split_pools_uneven_batches"],
        ),
        (
            "Runs the model in eval mode, batch_size sequences at a time",
            [
                T2D + "test_train_epoch_trains_and_evaluate_split_evaluates_in_their_modes",
                T2D + "test_evaluate_split_pools_uneven_batches",
            ],
        ),
    ],
    "problem2/train.py::train_epoch": [
        (
            "One seeded shuffled pass over tokens/targets [N, T], at most max_steps steps, with "
            "the model in training mode",
            [
                T2D + "test_train_epoch_stops_after_max_steps",
                T2D + "test_train_epoch_trains_and_evaluate_split_evaluates_in_their_modes",
            ],
        ),
        (
            'max_steps may be float("inf")',
            [T2D + "test_train_epoch_without_a_cap_takes_every_batch"],
        ),
        (
            "The order is torch.randperm(N, generator=generator): step i takes the rows "
            "order[i * batch_size:(i + 1) * batch_size]",
            [T2D + "test_train_epoch_takes_one_step_per_batch_in_the_seeded_order"],
        ),
        (
            "Each step minimizes the mean cross-entropy over the batch's positions with a target",
            [T2D + "test_train_epoch_takes_one_step_per_batch_in_the_seeded_order"],
        ),
        (
            "the loss and accuracy summed over the epoch's batches and divided by the number of "
            "targets seen, and the number of steps taken",
            [T2D + "test_train_epoch_reports_the_loss_and_accuracy_over_the_targets_seen"],
        ),
    ],
    "problem2/evaluate.py::per_position_counts": [
        (
            "Per-position tallies over the sequences of tokens/targets [N, T], in eval mode",
            [
                T2E + "test_per_position_counts_covers_every_sequence_when_they_outnumber_the_"
                "positions",
                T2E + "test_per_position_counts_with_a_stub_model",
                T2E + "test_per_position_counts_runs_in_eval_mode",
            ],
        ),
        (
            "Returns {'correct': [T], 'count': [T]} float tensors on the CPU",
            [T2E + "test_per_position_counts_with_a_stub_model"],
        ),
        (
            "how many sequences have a target there (targets[:, i] != IGNORE_INDEX) and at how "
            "many of those the argmax of model(tokens) equals the target",
            [T2E + "test_per_position_counts_with_a_stub_model"],
        ),
        (
            "Positions without a target count 0",
            [T2E + "test_per_position_counts_with_a_stub_model"],
        ),
    ],
    "problem2/evaluate.py::accuracy_over": [
        (
            "Accuracy pooled over positions start..end-1 (targets only)",
            [
                T2E + "test_accuracy_over_pools_the_counts",
                T2E + "test_accuracy_over_and_position_metrics_by_hand",
            ],
        ),
        ("None if there are none", [T2E + "test_accuracy_over_and_position_metrics_by_hand"]),
    ],
    "problem2/evaluate.py::position_metrics": [
        (
            "{'in_range': positions 0-63, 'beyond': 64-127, 'beyond_buckets': [64-79, 80-95, "
            "96-111, 112-127], 'buckets': the eight 16-position buckets 0-15 .. 112-127}",
            [
                T2E + "test_accuracy_over_and_position_metrics_by_hand",
                T2E + "test_position_metrics_in_range_starts_at_position_0",
            ],
        ),
        (
            "each a float (None where no position has a target)",
            [T2E + "test_accuracy_over_and_position_metrics_by_hand"],
        ),
    ],
    "problem2/evaluate.py::shift_rotation_max_error": [
        ("max over SHIFT_PAIRS of max_j |PE[p+s]_j - (R_s PE[p])_j|", [T2E + "test_checks"]),
    ],
    "problem2/evaluate.py::score_shift_errors": [
        (
            "score_shift_invariance under both schemes on the same random draws",
            [T2E + "test_score_shift_errors_draws_over_the_promised_ranges"],
        ),
        (
            "Each draw: q, k ~ N(0, I_d), a query position in [0, 64), a key position at or "
            "before it, and a shift in [1, 64]",
            [T2E + "test_score_shift_errors_draws_over_the_promised_ranges"],
        ),
        (
            "The seed fixes the draws: every call with the same seed draws the same q, k, "
            "positions and shifts",
            [T2E + "test_score_shift_errors_draws_are_fixed_by_the_seed"],
        ),
        (
            "the maximum change per scheme",
            [T2E + "test_score_shift_errors_reports_the_maximum_and_the_median"],
        ),
        (
            "the median change for sinusoidal",
            [T2E + "test_score_shift_errors_reports_the_maximum_and_the_median"],
        ),
        ("the median |q . k|, for scale", [T2E + "test_checks"]),
        (
            "Call score_shift_invariance by the name this module imports",
            NOT_BEHAVIOUR,
            "how the tests reach the function; a breach fails the tests of the clauses before",
        ),
    ],
    "problem2/evaluate.py::pairwise_rotary": [
        (
            "each pair (2i, 2i+1) at position p multiplied by the 2x2 matrix [[cos a, -sin a], "
            "[sin a, cos a]], a = p * 10000^(-2i/d), in float64",
            [T2E + "test_pairwise_rotary_by_hand"],
        ),
    ],
    "problem2/evaluate.py::rotary_vs_pairwise_error": [
        ("max |apply_rotary(x) - pairwise_rotary(x)|", [T2E + "test_checks"]),
        (
            "on a random float32 x [length, d_model]",
            [T2E + "test_rotary_vs_pairwise_error_draws_a_float32_x"],
        ),
    ],
    # ------------------------------------------------------------------ problem 3
    "problem3/dataset.py::build_vocab": [
        (
            "The SmilesVocab over every token of the training file",
            [T3A + "test_build_vocab_has_the_22_tokens_and_specials"],
        ),
    ],
    "problem3/dataset.py::SmilesDataset": [
        (
            "(input_ids [max_len - 1], target_ids [max_len - 1]) long tensors, one per line",
            [T3A + "test_dataset_item_layout"],
        ),
        (
            "The whole file is encoded once into self.inputs and self.targets [N, max_len - 1]",
            [T3A + "test_dataset_item_layout", T3A + "test_dataset_target_is_input_shifted_by_one"],
        ),
        (
            "raises ValueError naming its line number (from 1)",
            [T3A + "test_dataset_rejects_a_line_naming_its_number"],
        ),
    ],
    "problem3/model.py::causal_mask": [
        (
            "[size, size] bool, True on and below the diagonal (query i may attend to keys j <= i)",
            [T3B + "test_causal_mask"],
        ),
    ],
    "problem3/model.py::Block.attention": [
        (
            "Multi-head causal self-attention: x [B, T, d] -> [B, T, d]",
            [T3B + "test_block_matches_its_formula", T3B + "test_block_is_causal"],
        ),
        (
            "the keys and values of x are appended to those cached from earlier calls and x "
            "attends to all of them",
            [T3B + "test_kv_cache_if_used_gives_the_full_forward_logits"],
        ),
    ],
    "problem3/model.py::Block.forward": [
        (
            "x [B, T, d_model], mask bool broadcastable to [B, h, T, T_keys] -> [B, T, d_model]",
            [
                T3B + "test_block_matches_its_formula",
                T3B + "test_post_block_output_is_normalized_per_token_and_pre_is_not",
            ],
        ),
    ],
    "problem3/model.py::DecoderLM": [
        (
            "Decoder-only LM: input_ids [B, T] -> next-token logits [B, T, vocab_size]",
            [T3B + "test_decoder_lm_composes_its_modules"],
        ),
        (
            "tok_emb and pos_emb (nn.Embedding), dropout, blocks (an nn.ModuleList of Block), ln_f "
            "(nn.LayerNorm for 'pre', nn.Identity for 'post') and head (nn.Linear(d_model, "
            "vocab_size))",
            [
                T3B + "test_final_layernorm_only_for_pre",
                T3B + "test_decoder_lm_composes_its_modules",
                T3B + "test_eval_mode_turns_every_dropout_off",
            ],
        ),
    ],
    "problem3/model.py::DecoderLM.forward": [
        (
            "input_ids [B, T] -> logits [B, T, vocab_size]",
            [T3B + "test_decoder_lm_composes_its_modules"],
        ),
        (
            "A sequence longer than max_len raises ValueError",
            [T3B + "test_decoder_lm_takes_max_len_positions_and_rejects_more"],
        ),
        (
            "makes the call incremental: input_ids are then the tokens that follow those already "
            "cached",
            [T3B + "test_kv_cache_if_used_gives_the_full_forward_logits"],
        ),
    ],
    "problem3/train.py::lr_at_step": [
        (
            "Learning rate at step (numbered from 1): linear from 0 to peak over warmup steps, "
            "peak_lr * min(1, step / warmup), then the peak; with warmup 0, the peak from step 1",
            [T3C + "test_lr_at_step"],
        ),
    ],
    "problem3/train.py::train_step": [
        (
            "One optimizer step, in training mode",
            [
                T3C + "test_train_step_runs_in_training_mode",
                T3C + "test_train_step_clears_the_gradients_between_steps",
            ],
        ),
        (
            "at learning rate lr (set on every parameter group)",
            [T3C + "test_train_step_sets_the_lr_of_every_parameter_group"],
        ),
        (
            "on the mean cross-entropy over the targets other than IGNORE_INDEX",
            [T3C + "test_train_step_logs_gradient_norms_before_clipping"],
        ),
        (
            "with the gradients of this batch alone clipped to total norm CLIP_NORM",
            [T3C + "test_train_step_clears_the_gradients_between_steps"],
        ),
        (
            "the L2 norms of the gradient of the output head's weight and of all parameters "
            "together, both before clipping",
            [T3C + "test_train_step_logs_gradient_norms_before_clipping"],
        ),
        (
            "Non-finite values are returned as they are; the step is taken regardless",
            [
                T3C + "test_train_step_steps_even_when_the_loss_is_not_finite",
                T3C + "test_diverged_run_logs_null_and_finishes",
            ],
        ),
    ],
    "problem3/sample.py::generate_batch": [
        ("size strings sampled together", [T3D + "test_generate_stops_at_eos_and_caps_the_length"]),
        (
            "Every sequence starts at BOS [size, 1]; each step draws the next id of every "
            "unfinished sequence from softmax(model(ids)[:, -1] / temperature)",
            [
                T3D + "test_generate_samples_from_softmax_of_logits_over_temperature",
                T3D + "test_generate_stops_at_eos_and_caps_the_length",
            ],
        ),
        (
            "drawing with generator (so that the same generator state gives the same strings)",
            [T3D + "test_generate_is_seeded_and_lower_temperature_lowers_diversity"],
        ),
        (
            "until every sequence has produced EOS or holds max_len - 2 tokens after BOS",
            [T3D + "test_generate_stops_at_eos_and_caps_the_length"],
        ),
        (
            "The rows are decoded with vocab.decode, which stops at EOS",
            [T3D + "test_generate_stops_at_eos_and_caps_the_length"],
        ),
        (
            "model(input_ids) -> logits [B, T, V] is all that is needed",
            [T3D + "test_generate_feeds_the_whole_prefix_to_a_model_without_a_cache"],
        ),
        (
            "DecoderLM's optional kv_cache may make it faster",
            NOT_BEHAVIOUR,
            "optional: a sampler without the cache is as correct",
        ),
        (
            "A finished row (one that has produced EOS) gets no more tokens",
            [T3D + "test_generate_stops_at_eos_and_caps_the_length"],
        ),
        (
            "Drawing for every row at every step and putting PAD in the finished rows",
            NOT_BEHAVIOUR,
            "two allowed ways; no test may tell them apart",
        ),
    ],
    "problem3/evaluate.py::is_well_formed": [
        (
            "on the provided tokenizer's output",
            [T3D + "test_well_formed", T3D + "test_two_digit_ring_labels_open_and_close_rings"],
        ),
        ("the tokens rejoin to the string", [T3D + "test_ill_formed"]),
        ("parentheses balance and the depth never goes negative", [T3D + "test_ill_formed"]),
        (
            "each ring digit's next occurrence closes it, and no ring is open at the end",
            [T3D + "test_ill_formed", T3D + "test_well_formed"],
        ),
        (
            "%10 is a label of its own, neither 1 nor 0",
            [T3D + "test_two_digit_ring_labels_open_and_close_rings"],
        ),
        ("bracket atoms close", [T3D + "test_ill_formed"]),
        (
            "Never raises: an empty or untokenizable string is not well-formed",
            [
                T3D + "test_well_formed_never_raises_and_valid_implies_well_formed",
                T3D + "test_ill_formed",
            ],
        ),
        (
            "The only exception to expect is tokenize's ValueError: catch that one, not every "
            "exception",
            [T3D + "test_is_well_formed_lets_other_exceptions_through"],
        ),
    ],
    "problem3/evaluate.py::max_open_ring_span": [
        (
            "The longest distance in tokens between a ring digit and its closing partner; 0 when "
            "no ring closes",
            [T3D + "test_max_open_ring_span"],
        ),
        ("C1CC1 -> 3", [T3D + "test_max_open_ring_span"]),
        (
            "single digits and two-digit labels %10 .. %99, each one token, a ring closed by the "
            "next occurrence of the same label (a ring left open counts for nothing)",
            [
                T3D + "test_max_open_ring_span_with_two_digit_labels",
                T3D + "test_max_open_ring_span",
            ],
        ),
        (
            "A string that tokenize rejects raises tokenize's ValueError",
            [T3D + "test_max_open_ring_span_raises_for_a_string_tokenize_rejects"],
        ),
    ],
    "problem3/evaluate.py::sample_metrics": [
        (
            "well_formed and validity are fractions of all samples",
            [T3E + "test_validity_uniqueness_novelty_by_hand"],
        ),
        (
            "uniqueness = distinct canonical SMILES among the valid / valid; novelty = distinct "
            "valid canonical SMILES absent from train_canonical / distinct valid",
            [T3E + "test_validity_uniqueness_novelty_by_hand"],
        ),
        (
            "uniqueness and novelty are None when there is nothing to divide by",
            [T3E + "test_validity_uniqueness_novelty_by_hand"],
        ),
        (
            "samples is never empty here",
            NOT_BEHAVIOUR,
            "an empty list is undefined: None or raising are both allowed",
        ),
        (
            "Call is_well_formed and canonical by these names",
            NOT_BEHAVIOUR,
            "how the tests reach them; a breach fails the tests of the clauses before",
        ),
    ],
    "problem3/evaluate.py::breakdown": [
        (
            "One row per bin of key(sample), in the order of bins (inclusive (low, high) bounds, "
            "high None for no upper bound)",
            [T3E + "test_breakdown_bins_and_fractions"],
        ),
        (
            "for each of OUTCOMES the fraction of the bin's samples with that outcome (None for an "
            "empty bin)",
            [
                T3E + "test_breakdown_bins_and_fractions",
                T3E + "test_breakdown_gives_an_empty_bin_none_fractions",
            ],
        ),
    ],
    "problem3/evaluate.py::sweep_entry": [
        (
            "One row of the sweep table from a training log",
            [T3E + "test_sweep_entry_threshold_missing_points_and_a_diverged_run"],
        ),
        (
            "'trains': final validation loss below TRAIN_THRESHOLD (False when it is None)",
            [T3E + "test_sweep_entry_threshold_missing_points_and_a_diverged_run"],
        ),
        (
            "the mean and maximum of head_grad_norm at the log points of EARLY_STEPS, None unless "
            "both points are logged and finite",
            [
                T3E + "test_sweep_entry_early_gradient_statistics",
                T3E + "test_sweep_entry_threshold_missing_points_and_a_diverged_run",
            ],
        ),
    ],
}
