"""Fresh realistic mistakes, written apart from course.grading/mutants.py's catalogue, to measure
how many the public tests catch and what their first failure tells a student.

    python -m course.tools.fresh_mistakes                   # plant each, grade its part, report
    python -m course.tools.fresh_mistakes --only f_p2c_rotary_half_split ...
    python -m course.tools.fresh_mistakes --json out.json   # ... and keep every failure's message
    python -m course.tools.fresh_mistakes --catalogue --parts p1b  # the catalogue's instead
    python -m course.tools.fresh_mistakes --set 51          # issue 51's set (ISSUE51)
    python -m course.tools.fresh_mistakes --set 58 --local  # issue 58's (ISSUE58)

Instructors only. Each mistake is one text edit of one reference file (course.grading.mutants'
Mutant: the old text must be there exactly once), planted alone in a copy of the reference
problem folders and graded on its own part by course.grading.grade, public and hidden tests both.
A mistake counts as caught publicly when a public test of its part fails; the report
prints, for each mistake, the first public failure as a student sees it (the first line
of the test's message) so that one can read whether it names the function at fault.
"""

import json
from pathlib import Path

from course.grading.mutants import MUTANTS, Mutant, graded_failures
from provided.common import REPO_ROOT, ArgumentParser, fail, script
from provided.results import atomic_write_text

M = Mutant
FRESH = [
    # ------------------------------------------------------------------ p1a: dataset
    M("f_p1a_tgt_in_shifted_left", "p1a", "problem1/dataset.py",
      "self.tgt_in = torch.cat([bos, self.tgt_out[:, :-1]], dim=1)",
      "self.tgt_in = torch.cat([bos, self.tgt_out[:, 1:]], dim=1)",
      "tgt_in drops the first sum digit instead of the last (shifted the wrong way)"),
    M("f_p1a_tgt_in_before_reversal", "p1a", "problem1/dataset.py",
      '        if digit_order == "reversed":\n            self.tgt_out = self.tgt_out.flip(1)\n'
      "        bos = torch.full((len(a), 1), BOS)\n"
      "        self.tgt_in = torch.cat([bos, self.tgt_out[:, :-1]], dim=1)  # [N, 4]\n",
      "        bos = torch.full((len(a), 1), BOS)\n"
      "        self.tgt_in = torch.cat([bos, self.tgt_out[:, :-1]], dim=1)  # [N, 4]\n"
      '        if digit_order == "reversed":\n            self.tgt_out = self.tgt_out.flip(1)\n',
      "tgt_in built from the forward sum before tgt_out is reversed"),
    M("f_p1a_max_pairs_last", "p1a", "problem1/dataset.py",
      "pairs = pairs[:max_pairs]", "pairs = pairs[-max_pairs:]",
      "max_pairs keeps the last pairs of the file instead of the first"),
    # ------------------------------------------------------------------ p1b: attention
    M("f_p1b_mask_multiplies_scores", "p1b", "problem1/attention.py",
      'scores = scores.masked_fill(~mask, float("-inf"))', "scores = scores * mask",
      "mask applied by multiplying the scores (blocked scores 0, not -inf)"),
    M("f_p1b_mask_after_softmax", "p1b", "problem1/attention.py",
      '    if mask is not None:\n        scores = scores.masked_fill(~mask, float("-inf"))\n'
      "    weights = scores.softmax(dim=-1)\n",
      "    weights = scores.softmax(dim=-1)\n"
      "    if mask is not None:\n        weights = weights.masked_fill(~mask, 0.0)\n",
      "mask applied after the softmax (weights zeroed, rows no longer sum to 1)"),
    M("f_p1b_merge_without_transpose", "p1b", "problem1/attention.py",
      "out = out.transpose(1, 2).flatten(2)",
      "out = out.reshape(out.size(0), out.size(2), -1)",
      "heads merged by a plain reshape [B, h, T, d_k] -> [B, T, d_model], no transpose"),
    M("f_p1b_causal_torch_convention", "p1b", "problem1/attention.py",
      "return torch.ones(size, size, dtype=torch.bool, device=device).tril()",
      "return torch.ones(size, size, dtype=torch.bool, device=device).triu(1)",
      "causal mask in torch's convention (True = blocked) instead of True = attend"),
    M("f_p1b_split_heads_interleaved", "p1b", "problem1/attention.py",
      "return x.unflatten(-1, (self.num_heads, self.d_k)).transpose(1, 2)",
      "return x.unflatten(-1, (self.d_k, self.num_heads)).permute(0, 3, 1, 2)",
      "split_heads gives head i the strided columns i, i + h, ... (d_k, h) instead of a block"),
    # ------------------------------------------------------------------ p1c: layers
    M("f_p1c_ffn_residual_from_input", "p1c", "problem1/model.py",
      "        x = self.norm1(x + self.dropout(attended))\n"
      "        x = self.norm2(x + self.dropout(self.ffn(x)))\n        return x, weights",
      "        h = self.norm1(x + self.dropout(attended))\n"
      "        x = self.norm2(x + self.dropout(self.ffn(h)))\n        return x, weights",
      "encoder's feed-forward residual adds the layer's input x, not the first norm's output"),
    M("f_p1c_memory_mask_ignored", "p1c", "problem1/model.py",
      "self.cross_attn(x, memory, memory, memory_mask)", "self.cross_attn(x, memory, memory)",
      "decoder's cross-attention ignores memory_mask"),
    M("f_p1c_self_mask_always_causal", "p1c", "problem1/model.py",
      "        if self_mask is None:\n            self_mask = causal_mask(x.size(1), x.device)\n",
      "        self_mask = causal_mask(x.size(1), x.device)\n",
      "decoder always uses the causal mask, ignoring an explicit self_mask"),
    M("f_p1c_encoder_mask_dropped", "p1c", "problem1/model.py",
      "attended, weights = self.self_attn(x, x, x, mask)",
      "attended, weights = self.self_attn(x, x, x)",
      "encoder self-attention ignores its mask"),
    M("f_p1c_cross_reads_layer_input", "p1c", "problem1/model.py",
      "        attended, self_weights = self.self_attn(x, x, x, self_mask)\n"
      "        x = self.norm1(x + self.dropout(attended))\n"
      "        attended, cross_weights = self.cross_attn(x, memory, memory, memory_mask)\n"
      "        x = self.norm2(x + self.dropout(attended))\n",
      "        attended, self_weights = self.self_attn(x, x, x, self_mask)\n"
      "        crossed, cross_weights = self.cross_attn(x, memory, memory, memory_mask)\n"
      "        x = self.norm1(x + self.dropout(attended))\n"
      "        x = self.norm2(x + self.dropout(crossed))\n",
      "cross-attention queries from the layer's input instead of the first sublayer's output"),
    # ------------------------------------------------------------------ p1d: training
    M("f_p1d_loss_against_tgt_in", "p1d", "problem1/train.py",
      "loss = F.cross_entropy(logits.flatten(0, 1), tgt_out.flatten())",
      "loss = F.cross_entropy(logits.flatten(0, 1), tgt_in.flatten())",
      "loss against tgt_in (the decoder input) instead of tgt_out"),
    M("f_p1d_step_before_backward", "p1d", "problem1/train.py",
      "    optimizer.zero_grad(set_to_none=True)\n    loss.backward()\n    optimizer.step()\n",
      "    optimizer.zero_grad(set_to_none=True)\n    optimizer.step()\n    loss.backward()\n",
      "optimizer.step() before loss.backward(): each step uses no (or the last) gradient"),
    M("f_p1d_validate_first_batch", "p1d", "problem1/train.py",
      "        predicted = model.generate(dataset.src.to(device)).cpu()  # [N, 4]\n"
      "    return score_predictions(predicted, dataset.tgt_out)",
      "        predicted = model.generate(dataset.src[:128].to(device)).cpu()  # [N, 4]\n"
      "    return score_predictions(predicted, dataset.tgt_out[:128])",
      "validate scores the first batch of 128 sums only"),
    M("f_p1d_steps_to_95_assumes_spacing", "p1d", "problem1/train.py",
      "    for point in log:\n        if point[\"val_exact_match\"] >= threshold:\n"
      "            return point[\"step\"]\n",
      "    for i, point in enumerate(log):\n        if point[\"val_exact_match\"] >= threshold:\n"
      "            return 50 * (i + 1)\n",
      "steps_to_95 computes the step from the index (every 50 steps) instead of reading it"),
    # ------------------------------------------------------------------ p1e: heads
    M("f_p1e_remove_head_zeroes_values", "p1e", "problem1/evaluate.py",
      "module.W_o.weight[:, h * module.d_k:(h + 1) * module.d_k] = 0.0",
      "module.W_v.weight[h * module.d_k:(h + 1) * module.d_k] = 0.0",
      "remove_head zeroes the head's rows of W_v instead of its columns of W_o"),
    M("f_p1e_remove_head_width_hardcoded", "p1e", "problem1/evaluate.py",
      "module.W_o.weight[:, h * module.d_k:(h + 1) * module.d_k] = 0.0",
      "module.W_o.weight[:, h * 32:(h + 1) * 32] = 0.0",
      "remove_head hard-codes the head width 32 (the homework's d_k) instead of d_k"),
    M("f_p1e_pruning_ties_to_last", "p1e", "problem1/evaluate.py",
      "cheapest = max(remaining, key=scores.__getitem__)",
      "cheapest = max(reversed(remaining), key=scores.__getitem__)",
      "greedy pruning breaks ties by the last head listed instead of the first"),
    M("f_p1e_pruning_ranked_once", "p1e", "problem1/evaluate.py",
      "    while remaining:\n"
      "        scores = {head: score(removed + [head]) for head in remaining}\n"
      "        cheapest = max(remaining, key=scores.__getitem__)"
      "  # first head of the highest score\n"
      "        removed.append(cheapest)\n        remaining.remove(cheapest)\n"
      '        curve.append({"removed": list(removed), "test_exact_match": scores[cheapest]})\n',
      "    alone = {head: score([head]) for head in remaining}\n"
      "    for head in sorted(remaining, key=lambda h: -alone[h]):\n"
      "        removed.append(head)\n"
      '        curve.append({"removed": list(removed), "test_exact_match": score(removed)})\n',
      "greedy pruning ranks the heads once by their single-head cost, never recomputed"),
    M("f_p1e_ablation_cumulative", "p1e", "problem1/evaluate.py",
      "    return {head: score([head]) for head in heads}\n",
      "    removed, result = [], {}\n    for head in heads:\n        removed.append(head)\n"
      "        result[head] = score(list(removed))\n    return result\n",
      "single-head ablation keeps the earlier heads removed (cumulative)"),
    # ------------------------------------------------------------------ p2a: dataset
    M("f_p2a_k_hardcoded", "p2a", "problem2/dataset.py",
      "self.targets[:, k:] = self.tokens[:, : self.tokens.shape[1] - k]",
      "self.targets[:, 7:] = self.tokens[:, :-7]",
      "the offset hard-coded as 7, the k argument ignored"),
    # ------------------------------------------------------------------ p2b: sinusoidal
    M("f_p2b_exponent_i_not_2i", "p2b", "problem2/positional.py",
      "    omega = _omega(d_model)  # [d/2]\n",
      "    omega = 10000.0 ** (-torch.arange(d_model // 2, dtype=torch.float64) / d_model)\n",
      "sinusoidal frequencies 10000^(-i/d) instead of 10000^(-2i/d)"),
    M("f_p2b_rotation_half_split", "p2b", "problem2/positional.py",
      "    even = torch.arange(0, d_model, 2)\n    rotation[even, even] = cos\n"
      "    rotation[even, even + 1] = sin\n    rotation[even + 1, even] = -sin\n"
      "    rotation[even + 1, even + 1] = cos\n",
      "    first = torch.arange(d_model // 2)\n    second = first + d_model // 2\n"
      "    rotation[first, first] = cos\n    rotation[first, second] = sin\n"
      "    rotation[second, first] = -sin\n    rotation[second, second] = cos\n",
      "shift_rotation's blocks on the pairs (i, i + d/2) instead of (2i, 2i+1)"),
    M("f_p2b_rotation_one_frequency", "p2b", "problem2/positional.py",
      "    angles = shift * _omega(d_model)  # [d/2]\n",
      "    angles = shift * _omega(d_model)[:1].expand(d_model // 2)  # [d/2]\n",
      "shift_rotation uses omega_0 for every pair"),
    # ------------------------------------------------------------------ p2c: rotary
    M("f_p2c_rotary_half_split", "p2c", "problem2/positional.py",
      "    pairs = torch.view_as_complex(x.unflatten(-1, (-1, 2)).contiguous())  # [..., T, d/2]\n"
      "    return torch.view_as_real(pairs * rotation).flatten(-2)"
      "  # [..., T, d], pairs interleaved\n",
      "    half = x.shape[-1] // 2\n    x1, x2 = x[..., :half], x[..., half:]\n"
      "    cos, sin = rotation.real, rotation.imag\n"
      "    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)\n",
      "rotary on the half-split pairs (i, i + d/2), the common layout, not (2i, 2i+1)"),
    M("f_p2c_frequencies_i_not_2i", "p2c", "problem2/positional.py",
      "    return _omega(d_model).float()\n",
      "    return (10000.0 ** (-torch.arange(d_model // 2, dtype=torch.float64)"
      " / d_model)).float()\n",
      "rotary frequencies 10000^(-i/d) instead of 10000^(-2i/d)"),
    M("f_p2c_sinusoidal_score_key_unencoded", "p2c", "problem2/positional.py",
      "q_at, k_at = q + table[a], k + table[b]", "q_at, k_at = q + table[a], k",
      "score_shift_invariance adds the table row to the query only"),
    M("f_p2c_shift_query_only", "p2c", "problem2/positional.py",
      "return abs(score(q_pos + shift, k_pos + shift) - score(q_pos, k_pos)).item()",
      "return abs(score(q_pos + shift, k_pos) - score(q_pos, k_pos)).item()",
      "score_shift_invariance shifts the query's position only"),
    M("f_p2c_rotary_ignores_positions", "p2c", "problem2/positional.py",
      "angles = positions.to(device=x.device, dtype=x.dtype)[:, None] * theta",
      "angles = torch.arange(x.shape[-2], device=x.device, dtype=x.dtype)[:, None] * theta",
      "apply_rotary uses 0..T-1 instead of the positions given"),
    # ------------------------------------------------------------------ p2d: training
    M("f_p2d_argmax_wrong_dim", "p2d", "problem2/train.py",
      "correct = ((logits.argmax(-1) == targets) & has_target).sum().item()",
      "correct = ((logits.argmax(1) == targets) & has_target).sum().item()",
      "loss_and_correct takes the argmax over the positions instead of the vocabulary"),
    M("f_p2d_eval_loss_per_sequence", "p2d", "problem2/train.py",
      '    return {"loss": loss_sum / count, "accuracy": correct / count}\n',
      '    return {"loss": loss_sum / tokens.shape[0], "accuracy": correct / count}\n',
      "evaluate_split divides the loss by the number of sequences, not of targets"),
    M("f_p2d_drops_last_batch", "p2d", "problem2/train.py",
      "    for start in range(0, tokens.shape[0], batch_size):\n        if steps == max_steps:",
      "    for start in range(0, tokens.shape[0] - batch_size + 1, batch_size):\n"
      "        if steps == max_steps:",
      "train_epoch drops the incomplete last batch"),
    M("f_p2d_epoch_loss_per_step", "p2d", "problem2/train.py",
      'return {"loss": loss_sum / count, "accuracy": correct / count, "steps": steps}',
      'return {"loss": loss_sum / steps, "accuracy": correct / count, "steps": steps}',
      "train_epoch's loss is the summed loss divided by the steps, not by the targets"),
    M("f_p2d_step_loss_per_sequence", "p2d", "problem2/train.py",
      "(batch_loss / batch_count).backward()", "(batch_loss / len(batch)).backward()",
      "each step's loss divided by the batch's sequences instead of its targets"),
    # ------------------------------------------------------------------ p2e: evaluation
    M("f_p2e_counts_last_batch_only", "p2e", "problem2/evaluate.py",
      "        correct += ((logits.argmax(-1) == batch_targets) & has_target).sum(0).cpu()\n"
      "        count += has_target.sum(0).cpu()\n",
      "        correct = ((logits.argmax(-1) == batch_targets) & has_target).sum(0).cpu().float()\n"
      "        count = has_target.sum(0).cpu().float()\n",
      "per_position_counts keeps the last batch's tallies only (= instead of +=)"),
    M("f_p2e_beyond_buckets_first_four", "p2e", "problem2/evaluate.py",
      '"beyond_buckets": buckets[TRAIN_LENGTH // BUCKET:],',
      '"beyond_buckets": buckets[:TRAIN_LENGTH // BUCKET],',
      "beyond_buckets takes the first four buckets"),
    M("f_p2e_accuracy_inclusive_end", "p2e", "problem2/evaluate.py",
      "    total = count[start:end].sum().item()\n"
      "    return correct[start:end].sum().item() / total if total else None\n",
      "    total = count[start:end + 1].sum().item()\n"
      "    return correct[start:end + 1].sum().item() / total if total else None\n",
      "accuracy_over includes position end"),
    M("f_p2e_pairwise_exponent_i", "p2e", "problem2/evaluate.py",
      "angle = p * 10000.0 ** (-2 * i / d)", "angle = p * 10000.0 ** (-i / d)",
      "pairwise_rotary with the exponent i/d instead of 2i/d"),
    M("f_p2e_shift_check_transposed", "p2e", "problem2/evaluate.py",
      "shift_rotation(s, d_model) @ table[p]", "table[p] @ shift_rotation(s, d_model)",
      "shift_rotation_max_error applies R_s transposed (row vector times R_s)"),
    M("f_p2e_median_of_rotary", "p2e", "problem2/evaluate.py",
      '"sinusoidal_score_shift_error_median": torch.tensor(sinusoidal).median().item(),',
      '"sinusoidal_score_shift_error_median": torch.tensor(rotary).median().item(),',
      "the sinusoidal median computed over the rotary changes"),
    # ------------------------------------------------------------------ p3a: dataset
    M("f_p3a_vocab_of_characters", "p3a", "problem3/dataset.py",
      "tokens.update(tokenize(smiles))", "tokens.update(smiles)",
      "build_vocab collects characters instead of tokens"),
    M("f_p3a_ignore_by_input_pad", "p3a", "problem3/dataset.py",
      "self.targets[self.targets == PAD] = IGNORE_INDEX",
      "self.targets[self.inputs == PAD] = IGNORE_INDEX",
      "IGNORE_INDEX where the input is PAD, not where the target is"),
    M("f_p3a_padded_with_eos", "p3a", "problem3/dataset.py",
      "ids = torch.full((len(self.smiles), max_len), PAD, dtype=torch.long)",
      "ids = torch.full((len(self.smiles), max_len), EOS, dtype=torch.long)",
      "sequences padded with EOS instead of PAD"),
    # ------------------------------------------------------------------ p3b: model
    M("f_p3b_attention_unscaled", "p3b", "problem3/model.py",
      "out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)",
      "out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=1.0)",
      "attention scores not scaled by 1/sqrt(d_head)"),
    M("f_p3b_pre_ffn_residual_normed", "p3b", "problem3/model.py",
      "            x = x + self.dropout(self.ffn(self.ln2(x)))\n",
      "            x = self.ln2(x) + self.dropout(self.ffn(self.ln2(x)))\n",
      "pre-LN block: the feed-forward residual adds LN2(x) instead of x"),
    M("f_p3b_post_ln1_twice", "p3b", "problem3/model.py",
      "            x = self.ln2(x + self.dropout(self.ffn(x)))\n",
      "            x = self.ln1(x + self.dropout(self.ffn(x)))\n",
      "post-LN block normalizes both sublayers with ln1 (ln2 unused)"),
    M("f_p3b_positions_from_one", "p3b", "problem3/model.py",
      "positions = torch.arange(start, start + T, device=input_ids.device)",
      "positions = torch.arange(start + 1, start + T + 1, device=input_ids.device)",
      "position embedding indexed from 1"),
    M("f_p3b_float_causal_mask", "p3b", "problem3/model.py",
      "return torch.ones(size, size, dtype=torch.bool, device=device).tril()",
      "return torch.ones(size, size, device=device).tril()",
      "causal mask as a float 0/1 tensor (added to the scores, so it does not mask)"),
    M("f_p3b_no_out_proj", "p3b", "problem3/model.py",
      "return self.out_proj(out.transpose(1, 2).reshape(B, T, d))",
      "return out.transpose(1, 2).reshape(B, T, d)",
      "attention's output projection skipped"),
    # ------------------------------------------------------------------ p3c: training
    M("f_p3c_warmup_zero_divides", "p3c", "problem3/train.py",
      "    if warmup <= 0:\n        return peak_lr\n", "",
      "lr_at_step divides by warmup 0"),
    M("f_p3c_clip_after_step", "p3c", "problem3/train.py",
      "    total_grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP_NORM)\n"
      "    optimizer.step()\n",
      "    optimizer.step()\n"
      "    total_grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP_NORM)\n",
      "gradients clipped after the optimizer step"),
    M("f_p3c_summed_loss", "p3c", "problem3/train.py",
      "targets.flatten(), ignore_index=IGNORE_INDEX)\n    optimizer.zero_grad",
      "targets.flatten(), ignore_index=IGNORE_INDEX,\n"
      "                           reduction=\"sum\")\n    optimizer.zero_grad",
      "train_step's loss summed over the targets instead of averaged"),
    M("f_p3c_lr_first_group_only", "p3c", "problem3/train.py",
      '    for group in optimizer.param_groups:\n        group["lr"] = lr\n',
      '    optimizer.param_groups[0]["lr"] = lr\n',
      "the learning rate set on the first parameter group only"),
    M("f_p3c_head_bias_norm", "p3c", "problem3/train.py",
      "head_grad_norm = model.head.weight.grad.norm()",
      "head_grad_norm = model.head.bias.grad.norm()",
      "head gradient norm of the head's bias instead of its weight"),
    # ------------------------------------------------------------------ p3d: sampling, syntax
    M("f_p3d_temperature_after_softmax", "p3d", "problem3/sample.py",
      "        logits = model(step_input, kv_cache=cache)[:, -1] / temperature\n"
      "        next_id = torch.multinomial(torch.softmax(logits, dim=-1), 1,"
      " generator=generator)\n",
      "        logits = model(step_input, kv_cache=cache)[:, -1]\n"
      "        next_id = torch.multinomial(torch.softmax(logits, dim=-1) / temperature, 1,"
      " generator=generator)\n",
      "temperature divides the probabilities after the softmax (no effect)"),
    M("f_p3d_one_token_short", "p3d", "problem3/sample.py",
      "for _ in range(max_len - 2):", "for _ in range(max_len - 3):",
      "sampling loop one step short: a sample holds at most max_len - 3 tokens"),
    M("f_p3d_probabilities_squared", "p3d", "problem3/sample.py",
      "torch.multinomial(torch.softmax(logits, dim=-1), 1, generator=generator)",
      "torch.multinomial(torch.log_softmax(logits, dim=-1).exp() ** 2, 1, generator=generator)",
      "sampling from squared probabilities (a temperature of 1/2 hidden in the sampler)"),
    M("f_p3d_open_rings_ignored", "p3d", "problem3/evaluate.py",
      "    return depth == 0 and not open_rings\n", "    return depth == 0\n",
      "is_well_formed forgets to check that every ring closed"),
    M("f_p3d_span_in_characters", "p3d", "problem3/evaluate.py",
      "return max(ring_spans(tokenize(smiles)), default=0)",
      "return max(ring_spans(list(smiles)), default=0)",
      "max_open_ring_span counts characters instead of tokens"),
    M("f_p3d_well_formed_raises", "p3d", "problem3/evaluate.py",
      "    try:\n        tokens = tokenize(smiles)\n    except ValueError:\n        return False\n",
      "    tokens = tokenize(smiles)\n",
      "is_well_formed lets tokenize's ValueError escape"),
    # ------------------------------------------------------------------ p3e: evaluation
    M("f_p3e_validity_is_well_formed", "p3e", "problem3/evaluate.py",
      '"validity": len(valid) / len(samples),',
      '"validity": sum(map(is_well_formed, samples)) / len(samples),',
      "validity counts the well-formed samples instead of the valid ones"),
    M("f_p3e_novelty_over_valid_count", "p3e", "problem3/evaluate.py",
      '"novelty": len(distinct - train_canonical) / len(distinct) if distinct else None,',
      '"novelty": len(distinct - train_canonical) / len(valid) if distinct else None,',
      "novelty's denominator the valid samples instead of the distinct valid molecules"),
    M("f_p3e_breakdown_over_all_samples", "p3e", "problem3/evaluate.py",
      "**{o: counts[o] / len(members) if members else None for o in OUTCOMES}",
      "**{o: counts[o] / len(samples) if members else None for o in OUTCOMES}",
      "a bin's fractions divided by all samples instead of the bin's"),
    M("f_p3e_trains_none", "p3e", "problem3/evaluate.py",
      '"trains": final is not None and final < TRAIN_THRESHOLD,',
      '"trains": final < TRAIN_THRESHOLD if final is not None else None,',
      "trains is None (not False) for a run without a final loss"),
    # ------------------------------------------------------------------ a second round
    M("f_p1d_threshold_ignored", "p1d", "problem1/train.py",
      '        if point["val_exact_match"] >= threshold:',
      '        if point["val_exact_match"] >= 0.95:',
      "steps_to_95 compares with a fixed 0.95, ignoring its threshold argument"),
    M("f_p1b_mha_mask_not_passed", "p1b", "problem1/attention.py",
      "out, weights = scaled_dot_product_attention(q, k, v, mask)",
      "out, weights = scaled_dot_product_attention(q, k, v)",
      "MultiHeadAttention never passes its mask on"),
    M("f_p2d_new_order_per_batch", "p2d", "problem2/train.py",
      "        batch = order[start:start + batch_size]\n",
      "        batch = torch.randperm(tokens.shape[0], generator=generator)[:batch_size]\n",
      "train_epoch draws a fresh permutation for every batch (batches overlap)"),
    M("f_p3a_targets_a_view", "p3a", "problem3/dataset.py",
      "        self.inputs = ids[:, :-1].clone()\n        self.targets = ids[:, 1:].clone()\n",
      "        self.inputs = ids[:, :-1]\n        self.targets = ids[:, 1:]\n",
      "inputs and targets are views of one tensor: IGNORE_INDEX written into the inputs too"),
    M("f_p3b_no_embedding_dropout", "p3b", "problem3/model.py",
      "x = self.dropout(self.tok_emb(input_ids) + self.pos_emb(positions))",
      "x = self.tok_emb(input_ids) + self.pos_emb(positions)",
      "no dropout on the embedding sum"),
    M("f_p3c_lr_integer_division", "p3c", "problem3/train.py",
      "return peak_lr * min(1.0, step / warmup)", "return peak_lr * min(1.0, step // warmup)",
      "warmup with integer division (lr 0 until the end of warmup)"),
    M("f_p2c_rotary_float64_out", "p2c", "problem2/positional.py",
      "theta = rotary_frequencies(x.shape[-1]).to(device=x.device, dtype=x.dtype)",
      "theta = rotary_frequencies(x.shape[-1]).to(device=x.device, dtype=torch.float64)",
      "apply_rotary returns float64 for a float32 input"),
]


# ------------------------------------------------------------------ issue 51's set
# Written from the root README's formulas and the solution docstrings only, before any test
# changed for issue 51 (the tests unread while writing them).
ISSUE51 = [
    M("g_p1a_split_assert", "p1a", "problem1/dataset.py",
      "        if split not in SPLITS:\n"
      "            raise ValueError(f\"split must be one of {SPLITS}, got {split!r}\")\n",
      "        assert split in SPLITS, f\"bad split {split!r}\"\n",
      "an assert (AssertionError) where the docstring says a bad split raises ValueError"),
    M("g_p1a_getitem_order", "p1a", "problem1/dataset.py",
      "return self.src[index], self.tgt_in[index], self.tgt_out[index]",
      "return self.src[index], self.tgt_out[index], self.tgt_in[index]",
      "__getitem__ returns (src, tgt_out, tgt_in) instead of (src, tgt_in, tgt_out)"),
    M("g_p1b_heads_assert", "p1b", "problem1/attention.py",
      "        if d_model % num_heads:\n"
      "            raise ValueError(f\"d_model={d_model} is not divisible by "
      "num_heads={num_heads}\")\n",
      "        assert d_model % num_heads == 0\n",
      "an assert where the docstring says ValueError when num_heads does not divide d_model"),
    M("g_p1b_projections_no_bias", "p1b", "problem1/attention.py",
      "        self.W_q = nn.Linear(d_model, d_model)\n        self.W_k = nn.Linear(d_model, "
      "d_model)\n        self.W_v = nn.Linear(d_model, d_model)\n",
      "        self.W_q = nn.Linear(d_model, d_model, bias=False)\n"
      "        self.W_k = nn.Linear(d_model, d_model, bias=False)\n"
      "        self.W_v = nn.Linear(d_model, d_model, bias=False)\n",
      "W_q, W_k, W_v without bias (the docstring says each with bias)"),
    M("g_p1b_weights_head_averaged", "p1b", "problem1/attention.py",
      "        return self.W_o(out), weights\n",
      "        return self.W_o(out), weights.mean(dim=1)\n",
      "MultiHeadAttention returns the weights averaged over heads [B, T_q, T_k] (as "
      "nn.MultiheadAttention does), not [B, h, T_q, T_k]"),
    M("g_p1c_dropout_on_sum", "p1c", "problem1/model.py",
      "        x = self.norm1(x + self.dropout(attended))\n"
      "        x = self.norm2(x + self.dropout(self.ffn(x)))\n        return x, weights",
      "        x = self.norm1(self.dropout(x + attended))\n"
      "        x = self.norm2(self.dropout(x + self.ffn(x)))\n        return x, weights",
      "encoder layer drops out the residual sum, not the sublayer's output"),
    M("g_p1c_decoder_weights_swapped", "p1c", "problem1/model.py",
      "return x, self_weights, cross_weights", "return x, cross_weights, self_weights",
      "decoder layer returns (x, cross weights, self weights)"),
    M("g_p1d_loss_tensor", "p1d", "problem1/train.py",
      "    optimizer.step()\n    return loss.item()\n",
      "    optimizer.step()\n    return loss.detach()\n",
      "train_step returns the loss as a tensor, not a Python float"),
    M("g_p1d_validate_swapped", "p1d", "problem1/train.py",
      "    return score_predictions(predicted, dataset.tgt_out)\n",
      "    exact, token = score_predictions(predicted, dataset.tgt_out)\n"
      "    return token, exact\n",
      "validate returns (token accuracy, exact match)"),
    M("g_p1d_zero_grad_after_backward", "p1d", "problem1/train.py",
      "    optimizer.zero_grad(set_to_none=True)\n    loss.backward()\n    optimizer.step()\n",
      "    loss.backward()\n    optimizer.zero_grad(set_to_none=True)\n    optimizer.step()\n",
      "gradients cleared between backward and step: the step has no gradient"),
    M("g_p1e_remove_head_bias", "p1e", "problem1/evaluate.py",
      "        module.W_o.weight[:, h * module.d_k:(h + 1) * module.d_k] = 0.0\n",
      "        module.W_o.weight[:, h * module.d_k:(h + 1) * module.d_k] = 0.0\n"
      "        module.W_o.bias.zero_()\n",
      "remove_head also zeroes W_o's bias (shared by every head)"),
    M("g_p1e_maps_unshifted", "p1e", "problem1/evaluate.py",
      "        _, attention = model(src, tgt_in)\n",
      "        _, attention = model(src, predicted)\n",
      "attention maps with the predictions as decoder input (no BOS, not shifted)"),
    M("g_p2a_k_zero", "p2a", "problem2/dataset.py",
      "self.targets[:, k:] = self.tokens[:, : self.tokens.shape[1] - k]",
      "self.targets[:, k:] = self.tokens[:, :-k]",
      "tokens[:, :-k]: k = 0 gives an empty slice"),
    M("g_p2a_split_unchecked", "p2a", "problem2/dataset.py",
      "        if split not in SPLITS:\n"
      "            raise ValueError(f\"split must be one of {SPLITS}, got {split!r}\")\n", "",
      "no split check: a bad split raises FileNotFoundError, not ValueError"),
    M("g_p2b_table_float64", "p2b", "problem2/positional.py",
      "    table[:, 1::2] = torch.cos(angles)\n    return table.float()\n",
      "    table[:, 1::2] = torch.cos(angles)\n    return table\n",
      "sinusoidal_table returns float64, not float32"),
    M("g_p2c_rotary_float32_only", "p2c", "problem2/positional.py",
      "pairs = torch.view_as_complex(x.unflatten(-1, (-1, 2)).contiguous())",
      "pairs = torch.view_as_complex(x.float().unflatten(-1, (-1, 2)).contiguous())",
      "apply_rotary computes in float32 whatever x's dtype (float64 in, float32 out)"),
    M("g_p2c_scheme_unchecked", "p2c", "problem2/positional.py",
      "    if scheme not in SCHEMES:\n"
      "        raise ValueError(f\"scheme must be one of {SCHEMES}, got {scheme!r}\")\n", "",
      "score_shift_invariance treats any scheme but 'rotary' as sinusoidal (no ValueError)"),
    M("g_p2d_correct_tensor", "p2d", "problem2/train.py",
      "correct = ((logits.argmax(-1) == targets) & has_target).sum().item()",
      "correct = ((logits.argmax(-1) == targets) & has_target).sum()",
      "loss_and_correct returns correct as a tensor, not an int"),
    M("g_p2e_empty_accuracy_zero", "p2e", "problem2/evaluate.py",
      "return correct[start:end].sum().item() / total if total else None",
      "return correct[start:end].sum().item() / total if total else 0.0",
      "accuracy_over returns 0.0 where no position has a target (None asked)"),
    M("g_p2e_pairwise_x_float64", "p2e", "problem2/evaluate.py",
      "x = torch.randn(length, d_model, generator=torch.Generator().manual_seed(seed))",
      "x = torch.randn(length, d_model, dtype=torch.float64,\n"
      "                    generator=torch.Generator().manual_seed(seed))",
      "rotary_vs_pairwise_error draws a float64 x (the docstring says float32)"),
    M("g_p2e_key_anywhere", "p2e", "problem2/evaluate.py",
      "k_pos = int(torch.randint(0, q_pos + 1, (1,), generator=generator))",
      "k_pos = int(torch.randint(0, TRAIN_LENGTH, (1,), generator=generator))",
      "score_shift_errors draws the key position anywhere, not at or before the query"),
    M("g_p3a_lines_from_zero", "p3a", "problem3/dataset.py",
      "encoded = self._encode_line(smiles, row + 1)", "encoded = self._encode_line(smiles, row)",
      "a bad line named by its index from 0, not its line number from 1"),
    M("g_p3b_max_len_exclusive", "p3b", "problem3/model.py",
      "if start + T > self.max_len:", "if start + T >= self.max_len:",
      "a sequence of exactly max_len positions raises ValueError"),
    M("g_p3b_cache_keeps_last", "p3b", "problem3/model.py",
      "        if kv_cache is not None:\n            if \"k\" in kv_cache:\n"
      "                k = torch.cat([kv_cache[\"k\"], k], dim=2)\n"
      "                v = torch.cat([kv_cache[\"v\"], v], dim=2)\n"
      "            kv_cache[\"k\"], kv_cache[\"v\"] = k, v\n",
      "        if kv_cache is not None:\n            new_k, new_v = k, v\n"
      "            if \"k\" in kv_cache:\n"
      "                k = torch.cat([kv_cache[\"k\"], k], dim=2)\n"
      "                v = torch.cat([kv_cache[\"v\"], v], dim=2)\n"
      "            kv_cache[\"k\"], kv_cache[\"v\"] = new_k, new_v\n",
      "the kv cache keeps only the newest keys and values, not all of them"),
    M("g_p3c_skip_nonfinite_step", "p3c", "problem3/train.py",
      "    optimizer.step()\n    return loss.item(), head_grad_norm.item()",
      "    if torch.isfinite(loss):\n        optimizer.step()\n"
      "    return loss.item(), head_grad_norm.item()",
      "train_step skips the optimizer step when the loss is not finite"),
    M("g_p3c_total_norm_after_clip", "p3c", "problem3/train.py",
      "    total_grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP_NORM)\n",
      "    torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP_NORM)\n"
      "    total_grad_norm = torch.stack([p.grad.norm() for p in model.parameters()\n"
      "                                   if p.grad is not None]).norm()\n",
      "total gradient norm measured after clipping"),
    M("g_p3d_softmax_over_batch", "p3d", "problem3/sample.py",
      "torch.multinomial(torch.softmax(logits, dim=-1), 1, generator=generator)",
      "torch.multinomial(torch.softmax(logits, dim=0), 1, generator=generator)",
      "softmax over the batch (dim 0) instead of the vocabulary"),
    M("g_p3d_blanket_except", "p3d", "problem3/evaluate.py",
      "        tokens = tokenize(smiles)\n    except ValueError:\n        return False\n",
      "        tokens = tokenize(smiles)\n    except Exception:\n        return False\n",
      "is_well_formed catches every exception, not only tokenize's ValueError"),
    M("g_p3d_span_swallows", "p3d", "problem3/evaluate.py",
      "    return max(ring_spans(tokenize(smiles)), default=0)\n",
      "    try:\n        return max(ring_spans(tokenize(smiles)), default=0)\n"
      "    except ValueError:\n        return 0\n",
      "max_open_ring_span returns 0 for a string tokenize rejects (ValueError documented)"),
    M("g_p3e_bins_exclusive", "p3e", "problem3/evaluate.py",
      "        members = [s for s in samples if in_bin(key(s), bounds)]\n",
      "        low, high = bounds\n"
      "        members = [s for s in samples\n"
      "                   if low <= key(s) and (high is None or key(s) < high)]\n",
      "breakdown's bins exclude their upper bound (inclusive bounds asked)"),
]
# ------------------------------------------------------------------ issue 58's set
# The mistakes issue 58 found passing every test or met by a message that named the wrong
# cause, each planted to check that its part's public tests now fail and say what they saw.
ISSUE58 = [
    M("h_p1d_exact_per_position", "p1d", "problem1/train.py",
      "    return score_predictions(predicted, dataset.tgt_out)\n",
      "    correct = predicted == dataset.tgt_out\n"
      "    return correct.all(dim=0).float().mean().item(), correct.float().mean().item()\n",
      "validate's exact match taken per digit position (.all(dim=0)), not per sum"),
    M("h_p2d_step_over_sequences", "p2d", "problem2/train.py",
      "(batch_loss / batch_count).backward()", "(batch_loss / len(batch)).backward()",
      "train_epoch steps on the batch's summed loss over its number of sequences"),
    M("h_p2e_generator_kept", "p2e", "problem2/evaluate.py",
      "    generator = torch.Generator().manual_seed(seed)\n    rotary, sinusoidal, scale",
      "    generator = score_shift_errors.__dict__.setdefault(\n"
      "        \"generator\", torch.Generator().manual_seed(seed))\n    rotary, sinusoidal, scale",
      "score_shift_errors keeps its first generator between calls (the seed then ignored)"),
    M("h_p3b_scaled_by_d_model", "p3b", "problem3/model.py",
      "out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)",
      "out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=d ** -0.5)",
      "attention scores divided by sqrt(d_model), not sqrt(d_head)"),
    M("h_p3b_functional_dropout", "p3b", "problem3/model.py",
      "x = self.dropout(self.tok_emb(input_ids) + self.pos_emb(positions))",
      "x = F.dropout(self.tok_emb(input_ids) + self.pos_emb(positions), self.dropout.p)",
      "the embeddings' dropout written F.dropout(x, p): on in eval mode too"),
    M("h_p3d_newest_token_only", "p3d", "problem3/sample.py",
      "step_input = next_id if cache[0] else ids", "step_input = next_id",
      "generate_batch feeds only the newest token after the first step, even to a model "
      "that leaves kv_cache empty"),
    # written after the six above were fixed, from the docstrings, to try the messages
    M("h_p1a_plus_as_start", "p1a", "problem1/dataset.py",
      "bos = torch.full((len(a), 1), BOS)", "bos = torch.full((len(a), 1), PLUS)",
      "tgt_in starts with PLUS instead of BOS"),
    M("h_p1e_pruning_ties_last", "p1e", "problem1/evaluate.py",
      "cheapest = max(remaining, key=scores.__getitem__)",
      "cheapest = max(reversed(remaining), key=scores.__getitem__)",
      "greedy_pruning breaks ties towards the head listed last"),
    M("h_p1e_pruning_costs_once", "p1e", "problem1/evaluate.py",
      "scores = {head: score(removed + [head]) for head in remaining}",
      "scores = scores if removed else {head: score([head]) for head in remaining}",
      "greedy_pruning ranks the heads once by their single-head cost, never recomputed"),
    M("h_p3c_warmup_from_zero", "p3c", "problem3/train.py",
      "return peak_lr * min(1.0, step / warmup)", "return peak_lr * min(1.0, (step - 1) / warmup)",
      "lr_at_step counts steps from 0 (the first step has rate 0)"),
    M("h_p1c_cross_self_mask", "p1c", "problem1/model.py",
      "self.cross_attn(x, memory, memory, memory_mask)",
      "self.cross_attn(x, memory, memory, self_mask)",
      "the decoder's cross-attention masked with the self-attention's mask"),
    M("h_p3e_novelty_over_valid", "p3e", "problem3/evaluate.py",
      "\"novelty\": len(distinct - train_canonical) / len(distinct) if distinct else None,",
      "\"novelty\": sum(c not in train_canonical for c in valid) / len(valid) if valid else None,",
      "novelty over every valid sample, repeats included, not the distinct ones"),
    M("h_p2b_table_positions_from_one", "p2b", "problem2/positional.py",
      "positions = torch.arange(max_len, dtype=torch.float64)",
      "positions = torch.arange(1, max_len + 1, dtype=torch.float64)",
      "sinusoidal_table's positions counted from 1"),
    M("h_p2a_targets_ahead", "p2a", "problem2/dataset.py",
      "self.targets[:, k:] = self.tokens[:, : self.tokens.shape[1] - k]",
      "self.targets[:, : self.tokens.shape[1] - k] = self.tokens[:, k:]",
      "the target at i is the token at i + k (ahead) instead of i - k"),
    M("h_p2c_sinusoidal_table_not_added_to_k", "p2c", "problem2/positional.py",
      "q_at, k_at = q + table[a], k + table[b]", "q_at, k_at = q + table[a], k",
      "score_shift_invariance adds the position to the query only (sinusoidal)"),
    M("h_p2c_shift_only_query", "p2c", "problem2/positional.py",
      "return abs(score(q_pos + shift, k_pos + shift) - score(q_pos, k_pos)).item()",
      "return abs(score(q_pos + shift, k_pos) - score(q_pos, k_pos)).item()",
      "score_shift_invariance shifts the query's position only"),
    M("h_p3a_targets_keep_pad", "p3a", "problem3/dataset.py",
      "        self.targets[self.targets == PAD] = IGNORE_INDEX\n", "",
      "the padding stays a target (PAD, not IGNORE_INDEX)"),
    M("h_p3a_inputs_not_shifted", "p3a", "problem3/dataset.py",
      "self.targets = ids[:, 1:].clone()", "self.targets = ids[:, :-1].clone()",
      "targets equal the inputs (not shifted by one)"),
    M("h_p3a_vocab_from_first_line", "p3a", "problem3/dataset.py",
      "    for smiles in read_smiles(train_path):\n        tokens.update(tokenize(smiles))\n",
      "    for smiles in read_smiles(train_path)[:1]:\n        tokens.update(tokenize(smiles))\n",
      "build_vocab reads the first training line only"),
]
SETS = {"1": FRESH, "51": ISSUE51, "58": ISSUE58}

def first_line(output: str) -> str:
    """The first line of a failure's message, as a student reads it."""
    text = output.strip().split("\n\n")[0]
    return text.splitlines()[0][:400] if text else ""


def run_local(mistakes: list[Mutant]) -> dict:
    """run's result from local pytest runs instead of the grader (course/tools/plant.py): the
    messages a student reads at home, each part's public and hidden tests in one run."""
    from course.tools.plant import planted, run_part, scratch_copy

    found = {}
    with scratch_copy() as root:
        for mistake in mistakes:
            text = mistake.apply((REPO_ROOT / mistake.file).read_text())
            with planted(root, mistake.file, text):
                result = run_part(root, mistake.part)
            if result["error"]:
                print(f"{mistake.name}: the run failed: {result['error'][-500:]}", flush=True)
            failed = result["failed"]
            found[mistake.name] = {
                "part": mistake.part, "mistake": mistake.mistake,
                "public": [(t["name"], first_line(t["message"])) for t in failed
                           if t["visibility"] == "visible"],
                "hidden": [t["name"] for t in failed if t["visibility"] != "visible"]}
            report(mistake.name, found[mistake.name])
    return found


def run(mistakes: list[Mutant]) -> dict:
    """{name: {"public": [(test, first line)], "hidden": [test names]}} for each mistake."""
    found = {}
    for mistake, failed in graded_failures(mistakes):
        found[mistake.name] = {
            "part": mistake.part, "mistake": mistake.mistake,
            "public": [(t["name"].split(": ", 1)[-1], first_line(t["output"]))
                       for t in failed if t["visibility"] == "visible"],
            "hidden": [t["name"].split(": ", 1)[-1] for t in failed
                       if t["visibility"] != "visible"]}
        report(mistake.name, found[mistake.name])
    return found


def report(name: str, result: dict) -> None:
    mark = "public" if result["public"] else ("hidden" if result["hidden"] else "MISSED")
    print(f"{mark:<7} {name}: {result['mistake']}", flush=True)
    if result["public"]:
        test, message = result["public"][0]
        print(f"        first: {test}: {message}", flush=True)


@script
def main(argv=None) -> int:
    parser = ArgumentParser(__doc__)
    parser.add_argument("--set", choices=sorted(SETS), default="1",
                        help="which fresh set: 1, the first two rounds (FRESH), 51, the set "
                             "written for issue 51 before its tests (ISSUE51), or 58, the "
                             "mistakes issue 58 found missed or misnamed (ISSUE58)")
    parser.add_argument("--only", nargs="+", default=None, help="these mistakes only")
    parser.add_argument("--parts", nargs="+", default=None, help="the mistakes of these parts")
    parser.add_argument("--local", action="store_true",
                        help="run each part's tests in a local pytest (course/tools/plant.py), "
                             "as a student does, instead of the grader")
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    parser.add_argument("--catalogue", action="store_true",
                        help="course/grading/mutants.py's mistakes instead, to read their "
                             "first failures")
    args = parser.parse_args(argv)
    pool = MUTANTS if args.catalogue else SETS[args.set]
    unknown = sorted(set(args.only or []) - {m.name for m in pool})
    if unknown:
        fail(f"--only {' '.join(unknown)}: no such mistake (see course/tools/fresh_mistakes.py)")
    mistakes = [m for m in pool if (not args.only or m.name in args.only)
                and (not args.parts or m.part in args.parts)]
    for mistake in mistakes:  # each edit applies exactly once to the reference
        mistake.apply((REPO_ROOT / mistake.file).read_text())
    found = (run_local if args.local else run)(mistakes)
    public = sum(1 for f in found.values() if f["public"])
    graded = sum(1 for f in found.values() if f["public"] or f["hidden"])
    missed = [n for n, f in found.items() if not f["public"]]
    print(f"caught by a public test: {public} of {len(found)} ({100 * public / len(found):.0f}%);"
          f" by the graded suite: {graded} of {len(found)}"
          + (f"; not caught publicly: {' '.join(missed)}" if missed else ""))
    if args.json:
        atomic_write_text(args.json, json.dumps(found, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
