"""The common mistakes, planted one at a time in the reference: the kit's proof of strength.

    python -m course.grading.mutants                 # plant every mutant, grade its part, report
    python -m course.grading.mutants --write         # ... and rewrite course/grading/MISTAKES.md
    python -m course.grading.mutants --only p1d_validate_train_mode ...

Instructors only (the handout leaves course/grading/ out). Each Mutant is one realistic student
mistake in one solution function: a text edit of the reference file that changes what the
function does. The runner grades a submission made of the reference problem folders with
that one edit, part by part as the grader does (course.grading.grade), and records which tests
fail. Every mutant must fail a graded test (public or hidden), and at least 75% of them a
public test, so that students get most of their feedback before the deadline.
"""

import json
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from provided.common import REPO_ROOT, ArgumentParser, fail, script
from provided.results import atomic_write_text

MISTAKES_FILE = REPO_ROOT / "course" / "grading" / "MISTAKES.md"
# MISTAKES.md's section written by course/tools/part_alone.py (--mistakes --write), which
# --write here keeps as it is
BLAST_BEGIN, BLAST_END = "<!-- blast radius: begin -->", "<!-- blast radius: end -->"


@dataclass(frozen=True)
class Mutant:
    name: str  # part, function, mistake
    part: str
    file: str
    old: str  # reference text, found exactly once in file
    new: str
    mistake: str  # the mistake, as a student would make it

    def apply(self, source: str) -> str:
        if source.count(self.old) != 1:
            raise ValueError(f"{self.name}: the text to replace is in {self.file} "
                             f"{source.count(self.old)} times, not once")
        return source.replace(self.old, self.new)


M = Mutant
MUTANTS = [
    # ------------------------------------------------------------------ problem 1
    M("p1a_sum_digits_not_reversed", "p1a", "problem1/dataset.py",
      '        if digit_order == "reversed":\n            self.tgt_out = self.tgt_out.flip(1)\n',
      "", "reversed order ignored: the sum digits stay most significant first"),
    M("p1a_operands_reversed_too", "p1a", "problem1/dataset.py",
      "            self.tgt_out = self.tgt_out.flip(1)\n",
      "            self.tgt_out = self.tgt_out.flip(1)\n            self.src = self.src.flip(1)\n",
      "reversed order also reverses the source, not only the sum"),
    M("p1a_tgt_in_not_shifted", "p1a", "problem1/dataset.py",
      "self.tgt_in = torch.cat([bos, self.tgt_out[:, :-1]], dim=1)",
      "self.tgt_in = self.tgt_out.clone()",
      "decoder input not shifted right: tgt_in equals tgt_out (the answer leaks)"),
    M("p1a_sum_three_digits", "p1a", "problem1/dataset.py",
      "self.tgt_out = digits(a + b, 4)", "self.tgt_out = digits((a + b) % 1000, 4)",
      "the sum's carry digit dropped (sum mod 1000)"),
    M("p1a_max_pairs_off_by_one", "p1a", "problem1/dataset.py",
      "pairs = pairs[:max_pairs]", "pairs = pairs[:max_pairs - 1]",
      "max_pairs off by one"),
    M("p1b_no_scale", "p1b", "problem1/attention.py",
      "scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))",
      "scores = q @ k.transpose(-2, -1)", "scores not scaled by 1/sqrt(d_k)"),
    M("p1b_scale_by_d_k", "p1b", "problem1/attention.py",
      "scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))",
      "scores = q @ k.transpose(-2, -1) / q.size(-1)", "scores divided by d_k, not sqrt(d_k)"),
    M("p1b_mask_flipped", "p1b", "problem1/attention.py",
      'scores = scores.masked_fill(~mask, float("-inf"))',
      'scores = scores.masked_fill(mask, float("-inf"))',
      "mask polarity flipped: True blocks instead of allows"),
    M("p1b_softmax_over_queries", "p1b", "problem1/attention.py",
      "weights = scores.softmax(dim=-1)", "weights = scores.softmax(dim=-2)",
      "softmax over the queries instead of the keys"),
    M("p1b_causal_mask_upper", "p1b", "problem1/attention.py",
      "return torch.ones(size, size, dtype=torch.bool, device=device).tril()",
      "return torch.ones(size, size, dtype=torch.bool, device=device).triu()",
      "causal mask lets each query see the future (triu for tril)"),
    M("p1b_causal_mask_strict", "p1b", "problem1/attention.py",
      "return torch.ones(size, size, dtype=torch.bool, device=device).tril()",
      "return torch.ones(size, size, dtype=torch.bool, device=device).tril(-1)",
      "causal mask hides the diagonal: a query cannot see its own position"),
    M("p1b_split_heads_wrong_reshape", "p1b", "problem1/attention.py",
      "return x.unflatten(-1, (self.num_heads, self.d_k)).transpose(1, 2)",
      "return x.reshape(x.size(0), self.num_heads, x.size(1), self.d_k)",
      "heads split by a plain reshape (no transpose): tokens mixed across heads"),
    M("p1b_key_projection_for_values", "p1b", "problem1/attention.py",
      "v = self.split_heads(self.W_v(value))", "v = self.split_heads(self.W_v(key))",
      "values projected from the keys' input"),
    M("p1b_no_output_projection", "p1b", "problem1/attention.py",
      "return self.W_o(out), weights", "return out, weights", "output projection W_o skipped"),
    M("p1c_pre_norm_encoder", "p1c", "problem1/model.py",
      "        attended, weights = self.self_attn(x, x, x, mask)\n"
      "        x = self.norm1(x + self.dropout(attended))",
      "        y = self.norm1(x)\n        attended, weights = self.self_attn(y, y, y, mask)\n"
      "        x = x + self.dropout(attended)",
      "pre-norm instead of the post-norm the homework asks for"),
    M("p1c_encoder_no_residual", "p1c", "problem1/model.py",
      "x = self.norm2(x + self.dropout(self.ffn(x)))\n        return x, weights",
      "x = self.norm2(self.dropout(self.ffn(x)))\n        return x, weights",
      "feed-forward residual connection missing"),
    M("p1c_decoder_not_causal", "p1c", "problem1/model.py",
      "        if self_mask is None:\n            self_mask = causal_mask(x.size(1), x.device)\n",
      "", "decoder self-attention without the causal mask"),
    M("p1c_cross_attention_keys_from_decoder", "p1c", "problem1/model.py",
      "attended, cross_weights = self.cross_attn(x, memory, memory, memory_mask)",
      "attended, cross_weights = self.cross_attn(memory, x, x, None)",
      "cross-attention with queries and keys swapped"),
    M("p1c_dropout_after_norm", "p1c", "problem1/model.py",
      "x = self.norm3(x + self.dropout(self.ffn(x)))",
      "x = self.dropout(self.norm3(x + self.ffn(x)))",
      "dropout on the layer's output instead of on the sublayer's"),
    M("p1d_train_step_no_zero_grad", "p1d", "problem1/train.py",
      "    optimizer.zero_grad(set_to_none=True)\n    loss.backward()\n    optimizer.step()\n"
      "    return loss.item()",
      "    loss.backward()\n    optimizer.step()\n    return loss.item()",
      "gradients never cleared: each step adds to the last one's"),
    M("p1d_train_step_eval_mode", "p1d", "problem1/train.py",
      "    model.train()\n    logits, _ = model(src, tgt_in)",
      "    logits, _ = model(src, tgt_in)",
      "train_step leaves the model in whatever mode it got (eval after a validation)"),
    M("p1d_train_step_sum_loss", "p1d", "problem1/train.py",
      "loss = F.cross_entropy(logits.flatten(0, 1), tgt_out.flatten())",
      'loss = F.cross_entropy(logits.flatten(0, 1), tgt_out.flatten(), reduction="sum")',
      "summed loss instead of the mean"),
    M("p1d_validate_train_mode", "p1d", "problem1/train.py",
      "    model.eval()\n    with torch.inference_mode():\n        predicted",
      "    with torch.inference_mode():\n        predicted",
      "validate without eval mode: dropout active while decoding"),
    M("p1d_validate_teacher_forced", "p1d", "problem1/train.py",
      "        predicted = model.generate(dataset.src.to(device)).cpu()  # [N, 4]",
      "        logits, _ = model(dataset.src.to(device), dataset.tgt_in.to(device))\n"
      "        predicted = logits.argmax(-1).cpu()",
      "validation teacher-forced instead of greedy decoding"),
    M("p1d_steps_to_95_strict", "p1d", "problem1/train.py",
      'if point["val_exact_match"] >= threshold:', 'if point["val_exact_match"] > threshold:',
      "steps_to_95 needs strictly more than the threshold"),
    M("p1d_steps_to_95_last", "p1d", "problem1/train.py",
      '    for point in log:\n        if point["val_exact_match"] >= threshold:',
      '    for point in reversed(log):\n        if point["val_exact_match"] >= threshold:',
      "steps_to_95 returns the last step above the threshold, not the first"),
    M("p1e_remove_head_rows", "p1e", "problem1/evaluate.py",
      "module.W_o.weight[:, h * module.d_k:(h + 1) * module.d_k] = 0.0",
      "module.W_o.weight[h * module.d_k:(h + 1) * module.d_k, :] = 0.0",
      "head removed by zeroing W_o's rows (outputs) instead of its columns (the head's inputs)"),
    M("p1e_remove_head_off_by_one", "p1e", "problem1/evaluate.py",
      "module.W_o.weight[:, h * module.d_k:(h + 1) * module.d_k] = 0.0",
      "module.W_o.weight[:, h * module.d_k:(h + 1) * module.d_k + 1] = 0.0",
      "head slice one column too wide"),
    M("p1e_pruning_removes_most_useful", "p1e", "problem1/evaluate.py",
      "cheapest = max(remaining, key=scores.__getitem__)",
      "cheapest = min(remaining, key=scores.__getitem__)",
      "greedy pruning removes the head whose removal hurts most"),
    M("p1e_pruning_curve_without_start", "p1e", "problem1/evaluate.py",
      'curve = [{"removed": [], "test_exact_match": score([])}]', "curve = []",
      "pruning curve without its starting point (no head removed)"),
    M("p1e_maps_teacher_forced", "p1e", "problem1/evaluate.py",
      "        tgt_in = torch.cat([bos, predicted[:, :-1]], dim=1)  # what greedy decoding saw",
      "        tgt_in = dataset.tgt_in.to(device)",
      "attention maps from teacher forcing rather than from what greedy decoding saw"),
    M("p1e_maps_first_example", "p1e", "problem1/evaluate.py",
      "torch.stack([w.mean(dim=0) for w in attention[name]])",
      "torch.stack([w[0] for w in attention[name]])",
      "attention maps of the first example instead of the mean over examples"),
    # ------------------------------------------------------------------ problem 2
    M("p2a_targets_off_by_one", "p2a", "problem2/dataset.py",
      "self.targets[:, k:] = self.tokens[:, : self.tokens.shape[1] - k]",
      "self.targets[:, k:] = self.tokens[:, 1: self.tokens.shape[1] - k + 1]",
      "target is the token k - 1 back instead of k back"),
    M("p2a_targets_forward", "p2a", "problem2/dataset.py",
      "self.targets[:, k:] = self.tokens[:, : self.tokens.shape[1] - k]",
      "self.targets[:, : self.tokens.shape[1] - k] = self.tokens[:, k:]",
      "target looks k ahead instead of k back"),
    M("p2a_first_positions_zero", "p2a", "problem2/dataset.py",
      "self.targets = torch.full_like(self.tokens, IGNORE_INDEX)  # [N, T]",
      "self.targets = torch.zeros_like(self.tokens)  # [N, T]",
      "the first k positions get target 0 instead of IGNORE_INDEX"),
    M("p2b_sin_cos_swapped", "p2b", "problem2/positional.py",
      "    table[:, 0::2] = torch.sin(angles)\n    table[:, 1::2] = torch.cos(angles)",
      "    table[:, 0::2] = torch.cos(angles)\n    table[:, 1::2] = torch.sin(angles)",
      "cos on the even columns, sin on the odd ones"),
    M("p2b_halves_not_interleaved", "p2b", "problem2/positional.py",
      "    table[:, 0::2] = torch.sin(angles)\n    table[:, 1::2] = torch.cos(angles)",
      "    half = d_model // 2\n    table[:, :half] = torch.sin(angles)\n"
      "    table[:, half:] = torch.cos(angles)",
      "sin and cos in two halves instead of interleaved pairs"),
    M("p2b_positions_from_one", "p2b", "problem2/positional.py",
      "positions = torch.arange(max_len, dtype=torch.float64)",
      "positions = torch.arange(1, max_len + 1, dtype=torch.float64)",
      "positions counted from 1"),
    M("p2b_rotation_transposed", "p2b", "problem2/positional.py",
      "    rotation[even, even + 1] = sin\n    rotation[even + 1, even] = -sin",
      "    rotation[even, even + 1] = -sin\n    rotation[even + 1, even] = sin",
      "shift rotation transposed (rotates by -s)"),
    M("p2c_rotary_positions_shifted", "p2c", "problem2/positional.py",
      "angles = positions.to(device=x.device, dtype=x.dtype)[:, None] * theta  # [T, d/2]",
      "angles = (positions.to(device=x.device, dtype=x.dtype)[:, None] + 1) * theta",
      "rotary positions counted from 1"),
    M("p2c_rotary_conjugate", "p2c", "problem2/positional.py",
      "rotation = torch.complex(torch.cos(angles), torch.sin(angles))  # exp(j p theta_i)",
      "rotation = torch.complex(torch.cos(angles), -torch.sin(angles))",
      "rotary rotates the wrong way"),
    M("p2c_frequencies_doubled", "p2c", "problem2/positional.py",
      "    return _omega(d_model).float()", "    return 2 * _omega(d_model).float()",
      "rotary frequencies twice theta_i"),
    M("p2c_score_shift_signed", "p2c", "problem2/positional.py",
      "return abs(score(q_pos + shift, k_pos + shift) - score(q_pos, k_pos)).item()",
      "return (score(q_pos + shift, k_pos + shift) - score(q_pos, k_pos)).item()",
      "score shift error signed, not absolute"),
    M("p2c_rotary_in_place", "p2c", "problem2/positional.py",
      "    return torch.view_as_real(pairs * rotation).flatten(-2)",
      "    x.copy_(torch.view_as_real(pairs * rotation).flatten(-2))\n    return x\n    ",
      "apply_rotary rotates its input in place (and returns it)"),
    M("p2d_loss_mean_not_sum", "p2d", "problem2/train.py",
      'loss_sum = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), reduction="sum",',
      'loss_sum = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), reduction="mean",',
      "loss_and_correct returns the mean where the sum is asked"),
    M("p2d_count_includes_ignored", "p2d", "problem2/train.py",
      "    return loss_sum, correct, has_target.sum().item()",
      "    return loss_sum, correct, targets.numel()",
      "positions without a target counted among the targets"),
    M("p2d_evaluate_train_mode", "p2d", "problem2/train.py",
      "    model.eval()\n    loss_sum, correct, count = 0.0, 0, 0",
      "    loss_sum, correct, count = 0.0, 0, 0",
      "evaluate_split without eval mode (dropout active)"),
    M("p2d_evaluate_mean_of_batch_means", "p2d", "problem2/train.py",
      "        loss_sum += batch_loss.item()\n        correct += batch_correct\n"
      "        count += batch_count\n    return {\"loss\": loss_sum / count, "
      "\"accuracy\": correct / count}",
      "        loss_sum += batch_loss.item() / batch_count\n"
      "        correct += batch_correct / batch_count\n        count += 1\n"
      "    return {\"loss\": loss_sum / count, \"accuracy\": correct / count}",
      "loss and accuracy as the mean of per-batch means"),
    M("p2d_train_no_zero_grad", "p2d", "problem2/train.py",
      "        optimizer.zero_grad(set_to_none=True)\n        (batch_loss / batch_count)",
      "        (batch_loss / batch_count)",
      "gradients never cleared between steps"),
    M("p2d_train_not_shuffled", "p2d", "problem2/train.py",
      "order = torch.randperm(tokens.shape[0], generator=generator).to(tokens.device)",
      "order = torch.arange(tokens.shape[0]).to(tokens.device)",
      "batches not shuffled"),
    M("p2d_train_unseeded_shuffle", "p2d", "problem2/train.py",
      "order = torch.randperm(tokens.shape[0], generator=generator).to(tokens.device)",
      "order = torch.randperm(tokens.shape[0]).to(tokens.device)",
      "shuffle ignores the seeded generator"),
    M("p2d_train_sum_loss_step", "p2d", "problem2/train.py",
      "(batch_loss / batch_count).backward()", "batch_loss.backward()",
      "each step on the summed loss instead of the mean"),
    M("p2d_train_max_steps_off_by_one", "p2d", "problem2/train.py",
      "        if steps == max_steps:\n            break",
      "        if steps > max_steps:\n            break",
      "one step more than max_steps"),
    M("p2d_train_eval_mode", "p2d", "problem2/train.py",
      "    model.train()\n    order = torch.randperm",
      "    order = torch.randperm",
      "train_epoch leaves the model in eval mode after a validation"),
    M("p2e_counts_include_ignored", "p2e", "problem2/evaluate.py",
      "        count += has_target.sum(0).cpu()",
      "        count += torch.ones_like(batch_targets).sum(0).cpu()",
      "positions without a target counted"),
    M("p2e_accuracy_mean_of_means", "p2e", "problem2/evaluate.py",
      "    return correct[start:end].sum().item() / total if total else None",
      "    per = correct[start:end] / count[start:end].clamp(min=1)\n"
      "    return per[count[start:end] > 0].mean().item() if total else None",
      "bucket accuracy as the mean of per-position accuracies (mean of means)"),
    M("p2e_in_range_off_by_one", "p2e", "problem2/evaluate.py",
      '"in_range": accuracy_over(correct, count, 0, TRAIN_LENGTH),',
      '"in_range": accuracy_over(correct, count, 0, TRAIN_LENGTH - 1),',
      "in-range positions stop one short"),
    M("p2e_beyond_mean_of_buckets", "p2e", "problem2/evaluate.py",
      '"beyond": accuracy_over(correct, count, TRAIN_LENGTH, T),',
      '"beyond": sum(buckets[TRAIN_LENGTH // BUCKET:]) / len(buckets[TRAIN_LENGTH // BUCKET:]),',
      "beyond as the mean of the four bucket accuracies, not their pooled counts"),
    M("p2e_magnitude_signed", "p2e", "problem2/evaluate.py",
      "scale.append(abs((q @ k).item()))", "scale.append((q @ k).item())",
      "score_magnitude_median over the signed q . k (the abs left out)"),
    M("p2e_median_as_mean", "p2e", "problem2/evaluate.py",
      '"sinusoidal_score_shift_error_median": torch.tensor(sinusoidal).median().item(),',
      '"sinusoidal_score_shift_error_median": torch.tensor(sinusoidal).mean().item(),',
      "a median computed as a mean"),
    M("p2e_pairwise_wrong_sign", "p2e", "problem2/evaluate.py",
      "            block = torch.tensor([[math.cos(angle), -math.sin(angle)],\n"
      "                                  [math.sin(angle), math.cos(angle)]]",
      "            block = torch.tensor([[math.cos(angle), math.sin(angle)],\n"
      "                                  [-math.sin(angle), math.cos(angle)]]",
      "pairwise rotary reference rotates the wrong way"),
    M("p2e_eval_train_mode", "p2e", "problem2/evaluate.py",
      "    model.eval()\n    T = tokens.shape[1]\n    correct, count",
      "    T = tokens.shape[1]\n    correct, count",
      "per-position counts without eval mode"),
    M("p2e_shift_draw_off_by_one", "p2e", "problem2/evaluate.py",
      "shift = int(torch.randint(1, TRAIN_LENGTH + 1, (1,), generator=generator))",
      "shift = int(torch.randint(1, TRAIN_LENGTH, (1,), generator=generator))",
      "score-shift check draws its shifts from [1, 63], not [1, 64] (randint's upper bound "
      "is exclusive)"),
    # ------------------------------------------------------------------ problem 3
    M("p3a_vocab_from_val", "p3a", "problem3/dataset.py",
      "    for smiles in read_smiles(train_path):\n        tokens.update(tokenize(smiles))",
      "    for smiles in read_smiles(train_path)[:10]:\n        tokens.update(tokenize(smiles))",
      "vocabulary from a few lines only"),
    M("p3a_pad_targets_kept", "p3a", "problem3/dataset.py",
      "        self.targets[self.targets == PAD] = IGNORE_INDEX\n", "",
      "PAD targets left in the loss"),
    M("p3a_inputs_not_shifted", "p3a", "problem3/dataset.py",
      "        self.targets = ids[:, 1:].clone()", "        self.targets = ids[:, :-1].clone()",
      "targets not shifted: each position predicts itself"),
    M("p3b_mask_strict", "p3b", "problem3/model.py",
      "return torch.ones(size, size, dtype=torch.bool, device=device).tril()",
      "return torch.ones(size, size, dtype=torch.bool, device=device).tril(-1)",
      "causal mask hides the diagonal"),
    M("p3b_no_mask", "p3b", "problem3/model.py",
      "out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)",
      "out = F.scaled_dot_product_attention(q, k, v)",
      "attention ignores the causal mask"),
    M("p3b_mask_flipped", "p3b", "problem3/model.py",
      "out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)",
      "out = F.scaled_dot_product_attention(q, k, v, attn_mask=~mask)",
      "the mask's meaning flipped (True blocks, as in nn.MultiheadAttention)"),
    M("p3b_own_causal_mask", "p3b", "problem3/model.py",
      "out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)",
      "out = F.scaled_dot_product_attention(q, k, v, is_causal=True)",
      "a causal mask of its own (is_causal=True) instead of the mask it is given"),
    M("p3b_post_norm_as_pre", "p3b", "problem3/model.py",
      "            x = self.ln1(x + self.dropout(self.attention(x, mask, kv_cache)))",
      "            x = x + self.dropout(self.attention(self.ln1(x), mask, kv_cache))",
      "post-LN block normalizes the sublayer's input (pre-LN) instead of the sum"),
    M("p3b_final_norm_in_post", "p3b", "problem3/model.py",
      'self.ln_f = nn.LayerNorm(d_model) if norm == "pre" else nn.Identity()',
      "self.ln_f = nn.LayerNorm(d_model)",
      "a final LayerNorm in the post-LN model too"),
    M("p3b_no_positions", "p3b", "problem3/model.py",
      "x = self.dropout(self.tok_emb(input_ids) + self.pos_emb(positions))",
      "x = self.dropout(self.tok_emb(input_ids))",
      "position embedding left out"),
    M("p3b_heads_mixed", "p3b", "problem3/model.py",
      "return self.out_proj(out.transpose(1, 2).reshape(B, T, d))",
      "return self.out_proj(out.reshape(B, T, d))",
      "heads merged without the transpose"),
    M("p3b_attention_weight_dropout", "p3b", "problem3/model.py",
      "out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)",
      "out = F.scaled_dot_product_attention(\n"
      "            q, k, v, attn_mask=mask, dropout_p=self.dropout.p if self.training else 0.0)",
      "dropout on the attention weights too (dropout_p passed to "
      "F.scaled_dot_product_attention)"),
    M("p3c_lr_off_by_one", "p3c", "problem3/train.py",
      "return peak_lr * min(1.0, step / warmup)", "return peak_lr * min(1.0, (step - 1) / warmup)",
      "warmup counted from step 0 (the first step has learning rate 0)"),
    M("p3c_lr_never_peaks", "p3c", "problem3/train.py",
      "return peak_lr * min(1.0, step / warmup)", "return peak_lr * step / warmup",
      "warmup never stops at the peak"),
    M("p3c_no_zero_grad", "p3c", "problem3/train.py",
      "    optimizer.zero_grad(set_to_none=True)\n    loss.backward()\n    head_grad_norm",
      "    loss.backward()\n    head_grad_norm", "gradients never cleared"),
    M("p3c_norm_after_clipping", "p3c", "problem3/train.py",
      "    head_grad_norm = model.head.weight.grad.norm()\n"
      "    total_grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP_NORM)",
      "    total_grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP_NORM)\n"
      "    head_grad_norm = model.head.weight.grad.norm()",
      "head gradient norm measured after clipping"),
    M("p3c_no_clipping", "p3c", "problem3/train.py",
      "total_grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP_NORM)",
      "total_grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), float('inf'))",
      "gradients not clipped"),
    M("p3c_padding_in_loss", "p3c", "problem3/train.py",
      "loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=IGNORE_INDEX)",
      "loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten().clamp(min=0))",
      "padding positions in the loss"),
    M("p3c_lr_not_set", "p3c", "problem3/train.py",
      '    for group in optimizer.param_groups:\n        group["lr"] = lr\n', "",
      "the scheduled learning rate never reaches the optimizer"),
    M("p3c_eval_mode", "p3c", "problem3/train.py",
      "    model.train()\n    logits = model(inputs)", "    logits = model(inputs)",
      "train_step leaves the model in eval mode after a validation"),
    M("p3d_temperature_multiplies", "p3d", "problem3/sample.py",
      "logits = model(step_input, kv_cache=cache)[:, -1] / temperature",
      "logits = model(step_input, kv_cache=cache)[:, -1] * temperature",
      "temperature multiplies the logits instead of dividing them"),
    M("p3d_greedy_not_sampled", "p3d", "problem3/sample.py",
      "next_id = torch.multinomial(torch.softmax(logits, dim=-1), 1, generator=generator)",
      "next_id = logits.argmax(-1, keepdim=True)",
      "argmax instead of sampling"),
    M("p3d_unseeded", "p3d", "problem3/sample.py",
      "next_id = torch.multinomial(torch.softmax(logits, dim=-1), 1, generator=generator)",
      "next_id = torch.multinomial(torch.softmax(logits, dim=-1), 1)",
      "sampling ignores the seeded generator"),
    M("p3d_one_token_too_many", "p3d", "problem3/sample.py",
      "for _ in range(max_len - 2):", "for _ in range(max_len - 1):",
      "max_len off by one: a sample may hold max_len - 1 tokens"),
    M("p3d_stops_at_first_eos", "p3d", "problem3/sample.py",
      "        if finished.all():\n            break",
      "        if finished.any():\n            break",
      "sampling stops when the first sample ends, cutting the others short"),
    M("p3d_well_formed_unbalanced_close", "p3d", "problem3/evaluate.py",
      "            if depth < 0:\n                return False\n", "",
      "a ')' before its '(' accepted"),
    M("p3d_well_formed_rings_counted", "p3d", "problem3/evaluate.py",
      "            open_rings ^= {token}", "            open_rings |= {token}",
      "ring digits only opened, never closed"),
    M("p3d_well_formed_empty", "p3d", "problem3/evaluate.py",
      "    if not smiles:\n        return False\n", "",
      "the empty string counted as well-formed"),
    M("p3d_span_default", "p3d", "problem3/evaluate.py",
      "return max(ring_spans(tokenize(smiles)), default=0)",
      "return max(ring_spans(tokenize(smiles)), default=-1)",
      "no closed ring gives -1 instead of 0"),
    M("p3d_well_formed_two_digit_rings_ignored", "p3d", "problem3/evaluate.py",
      "        elif RING_DIGIT.match(token):\n            open_rings ^= {token}",
      "        elif token.isdigit():\n            open_rings ^= {token}",
      "two-digit ring labels (%10 .. %99) ignored by is_well_formed: only digit tokens "
      "open and close rings"),
    M("p3d_span_two_digit_rings_ignored", "p3d", "problem3/evaluate.py",
      "    return max(ring_spans(tokenize(smiles)), default=0)\n",
      "    opened, longest = {}, 0\n"
      "    for index, token in enumerate(tokenize(smiles)):\n"
      "        if token.isdigit():\n"
      "            if token in opened:\n"
      "                longest = max(longest, index - opened.pop(token))\n"
      "            else:\n"
      "                opened[token] = index\n"
      "    return longest\n",
      "max_open_ring_span counts single-digit rings only: two-digit labels (%10 .. %99) "
      "ignored"),
    M("p3d_bracket_digits_as_rings", "p3d", "problem3/evaluate.py",
      "        elif RING_DIGIT.match(token):", "        elif re.search(r\"\\d\", token):",
      "any token with a digit counted as a ring label (the H count, charge or isotope of a "
      "bracket atom too)"),
    M("p3e_validity_over_valid", "p3e", "problem3/evaluate.py",
      '"validity": len(valid) / len(samples),',
      '"validity": len(valid) / max(1, len([s for s in samples if s])),',
      "validity over the non-empty samples only"),
    M("p3e_uniqueness_over_samples", "p3e", "problem3/evaluate.py",
      '"uniqueness": len(distinct) / len(valid) if valid else None,',
      '"uniqueness": len(distinct) / len(samples) if valid else None,',
      "uniqueness over all samples instead of the valid ones"),
    M("p3e_uniqueness_not_canonical", "p3e", "problem3/evaluate.py",
      "    distinct = set(valid)",
      "    distinct = {s for s, c in zip(samples, canon) if c is not None}",
      "distinct counted on the raw strings, not canonical SMILES"),
    M("p3e_novelty_over_valid", "p3e", "problem3/evaluate.py",
      '"novelty": len(distinct - train_canonical) / len(distinct) if distinct else None,',
      '"novelty": len([c for c in valid if c not in train_canonical]) / len(valid)'
      " if distinct else None,",
      "novelty over valid samples (duplicates counted) instead of distinct molecules"),
    M("p3e_novelty_raw_strings", "p3e", "problem3/evaluate.py",
      '"novelty": len(distinct - train_canonical) / len(distinct) if distinct else None,',
      '"novelty": len({s for s, c in zip(samples, canon) if c is not None'
      " and s not in train_canonical}) / len(distinct) if distinct else None,",
      "novelty of the samples as written, compared with the canonical training set"),
    M("p3e_breakdown_empty_bin_zero", "p3e", "problem3/evaluate.py",
      "**{o: counts[o] / len(members) if members else None for o in OUTCOMES}",
      "**{o: counts[o] / max(1, len(members)) for o in OUTCOMES}",
      "an empty bin's fractions are 0 instead of None"),
    M("p3e_trains_inclusive", "p3e", "problem3/evaluate.py",
      '"trains": final is not None and final < TRAIN_THRESHOLD,',
      '"trains": final is not None and final <= TRAIN_THRESHOLD,',
      "trains when the loss equals the threshold"),
    M("p3e_grad_mean_with_missing", "p3e", "problem3/evaluate.py",
      '"head_grad_norm_mean_100": float(np.mean(finite)) if complete else None,',
      '"head_grad_norm_mean_100": float(np.mean(finite)) if finite else None,',
      "mean over the finite early norms even when some are missing"),
    M("p3e_grad_median_as_mean", "p3e", "problem3/evaluate.py",
      '"head_grad_norm_max_100": max(finite) if complete else None,',
      '"head_grad_norm_max_100": float(np.mean(finite)) if complete else None,',
      "the maximum computed as a mean"),
]


# ---------------------------------------------------------------------------- running
def submission_with(mutant: Mutant, out: Path) -> Path:
    """A submission made of the reference problem folders with mutant's edit."""
    for path in REPO_ROOT.glob("problem*/*.py"):
        target = out / path.relative_to(REPO_ROOT)
        target.parent.mkdir(parents=True, exist_ok=True)
        text = path.read_text()
        if path.relative_to(REPO_ROOT).as_posix() == mutant.file:
            text = mutant.apply(text)
        target.write_text(text)
    return out


def graded_failures(mutants: list[Mutant]):
    """(mutant, the failing test entries of its part) for each mutant in turn, planted alone
    in the reference and graded by one grader."""
    from course.grading import grade

    grader = grade.setup(sorted({m.part for m in mutants}))
    try:
        with tempfile.TemporaryDirectory(prefix="mutants_") as scratch:
            for mutant in mutants:
                folder = submission_with(mutant, Path(scratch) / mutant.name)
                budget = grade.Budget(time.monotonic() + 600, grader.test_seconds)
                results = grade.grade(folder, grader, [mutant.part], None, budget)
                shutil.rmtree(folder)
                yield mutant, [t for t in results["tests"] if t["tags"] == [mutant.part]
                               and t["score"] < t["max_score"]]
    finally:
        grader.close()


def run(mutants: list[Mutant]) -> dict:
    """{mutant name: {"public": [failing public tests], "hidden": [failing hidden tests],
    "kinds": {failing test: how it fails}, "first_output": ...}}: a test's kind is
    course.grading.failures.failure_kind of its output (the exception's type and message
    family), which the class report matches a submission's failures against."""
    from course.grading.failures import failure_kind

    found = {}
    for mutant, failed in graded_failures(mutants):
        found[mutant.name] = {
            "public": [t["name"] for t in failed if t["visibility"] == "visible"],
            "hidden": [t["name"] for t in failed if t["visibility"] != "visible"],
            "kinds": {t["name"]: failure_kind(t["output"]) for t in failed},
            "first_output": next((t["output"].split("\n\n")[0][:300] for t in failed), "")}
        mark = "public" if found[mutant.name]["public"] else (
            "hidden" if found[mutant.name]["hidden"] else "ALIVE")
        print(f"{mark:<7} {mutant.name}", flush=True)
    return found


def markdown(found: dict) -> str:
    """course/grading/MISTAKES.md: the catalogue, each mistake with the tests that catch it."""
    caught = sum(1 for f in found.values() if f["public"] or f["hidden"])
    public = sum(1 for f in found.values() if f["public"])
    lines = ["# Common mistakes, and the tests that catch them", "",
             "Generated by `python -m course.grading.mutants --write` "
             "(`make mutants`): each mistake "
             "is planted alone in the reference (`course/grading/mutants.py`) and its part graded. "
             f"Caught by the graded tests: {caught} of {len(found)}; by a public test: "
             f"{public} of {len(found)} ({100 * public / len(found):.0f}%).", ""]
    by_part = {}
    for mutant in MUTANTS:
        if mutant.name in found:
            by_part.setdefault(mutant.part, []).append(mutant)
    for part, mutants in by_part.items():
        lines += [f"## {part}", "", "| mistake | caught by |", "|---|---|"]
        for mutant in mutants:
            result = found[mutant.name]
            tests = result["public"][:2] or result["hidden"][:1] or ["**not caught**"]
            names = "; ".join(t.split(": ", 1)[-1] for t in tests)
            where = "public" if result["public"] else ("hidden" if result["hidden"] else "")
            lines.append(f"| {mutant.mistake} (`{mutant.name}`, `{mutant.file}`) | "
                         f"{where}: {names} |")
        lines.append("")
    return "\n".join(lines)


@script
def main(argv=None) -> int:
    parser = ArgumentParser(__doc__)
    parser.add_argument("--only", nargs="+", default=None, help="these mutants only")
    parser.add_argument("--write", action="store_true", help="rewrite course/grading/MISTAKES.md")
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = parser.parse_args(argv)
    names = {m.name for m in MUTANTS}
    unknown = sorted(set(args.only or []) - names)
    if unknown:
        fail(f"--only {' '.join(unknown)}: no such mutant (see course/grading/mutants.py)")
    mutants = [m for m in MUTANTS if not args.only or m.name in args.only]
    for mutant in mutants:
        mutant.apply((REPO_ROOT / mutant.file).read_text())  # each edit applies exactly once
    found = run(mutants)
    alive = [name for name, f in found.items() if not (f["public"] or f["hidden"])]
    public = sum(1 for f in found.values() if f["public"])
    print(f"caught {len(found) - len(alive)} of {len(found)}; by a public test {public} "
          f"({100 * public / len(found):.0f}%)" + (f"; not caught: {alive}" if alive else ""))
    if args.json:
        atomic_write_text(args.json, json.dumps(found, indent=1))
    if args.write:
        old = MISTAKES_FILE.read_text() if MISTAKES_FILE.exists() else ""
        blast = old[old.find(BLAST_BEGIN):] if BLAST_BEGIN in old else ""
        atomic_write_text(MISTAKES_FILE, markdown(found) + ("\n" + blast if blast else ""))
    return 1 if alive else 0


if __name__ == "__main__":
    raise SystemExit(main())
