"""Problem 1: where are the carries? Linear probes on the encoder, over five seeds.

    python -m course.tools.carry_probe  # or `make carry-probe`, which
                                        # trains the missing models

The report's reading of the attention maps says that in forward order the encoder moves the
lower columns into the higher digits' positions, so that the memory vectors the decoder reads
for a high place already hold the carry into it, and that reversed order has no such need.
This measures that directly. For each n4000 model (forward and reversed, seeds 0-4) a
logistic-regression probe is fitted to read a carry from

    input    the encoder's input at some source positions (token embedding + position)
    memory   the encoder's output (the memory the decoder attends to) at the same positions

and scored on the test pairs. The probes (carry c_i is the carry out of column i):

    c0@tens       c0 from the positions of a1 and b1 (the tens digits)
    c0@hundreds   c0 from the positions of a2 and b2 (the hundreds digits)
    c1@hundreds   c1 from the positions of a2 and b2

From the input no probe can do better than guessing: those positions do not hold the digits
the carry depends on. Where the memory reads well, the encoder has put the lower columns'
carry there. (A probe from all seven input positions would read every carry: c_i is a
linear threshold of the operands' lower digits, e.g. c2 = [a + b >= 1000].) Fitted on
training pairs 4,001-10,000 (pairs the model never trained on), scored on the 2,000 test
pairs; features standardized, L2 penalty 1e-3, L-BFGS.
A probe shows what the memory holds, not what the decoder uses. Activation patching tests
that, on the hundreds digit s2 = (a2 + b2 + c1) mod 10. For each test pair a donor pair is
taken from the same 6,000 pairs (the first with the property asked for), the memory
vectors at some source positions are replaced by the donor's, and the model decodes:

    control       the hundreds positions from a donor with another a2 (same b2 and c1):
                  the fraction of s2 that follows the donor's a2 (is patching felt at all?)
    carry@hundreds   the hundreds positions from a donor with the same a2 and b2 but the
                  other c1: the fraction of s2 that follows the donor's carry
    carry@lower   the tens and ones positions from that same donor: the same fraction
    s3 carry@...  the same two patches, read on the thousands digit s3 = c2 of the pairs
                  with a2 + b2 = 9 (there c2 = c1, so s3 follows the donor's carry or not)

Writes problem1/results/carry_probe.json:

    {"probes": [...], "majority": {probe: test accuracy of always guessing the commoner value},
     "runs": {run: {seed: {probe: {"input": accuracy, "memory": accuracy}}}},
     "test_pairs": 2000, "s3_pairs": the test pairs with a2 + b2 = 9,
     "patching": {run: {seed: {"control", "carry@hundreds", "carry@lower",
                               "s3 carry@hundreds", "s3 carry@lower": fraction}}},
     "counts": {"majority": {probe: pairs}, "runs": {run: {seed: {probe: {kind: pairs}}}},
                "patching": {run: {seed: {key: pairs}}}}}

Every accuracy and fraction is a count of pairs: "counts" holds those integers, and each
accuracy or fraction is its count over its pairs (test_pairs, or s3_pairs for the "s3 ..."
keys) as the float nearest that fraction, so that 1089 of 2000 is written 0.5445 (not the
float32 0.54449999...). The reports' tables round once from the counts
(course/tools/tables/problem1.py); kit test test_report_exact.py recomputes every value from
its count.

Runs on the CPU (about 25 s for the ten models), whatever --device says.

Instructors only (course/tools/): evidence for the report, not part of the homework.
"""

import torch
import torch.nn.functional as F

from course.grading.bands import seed_dir
from course.tools.problem1_breakdown import column_carries
from problem1.config import ANALYSED, load_model
from problem1.dataset import AdditionDataset
from provided.common import ArgumentParser, add_common_args, fail, script, setup
from provided.results import write_json

RUNS = ANALYSED
SEEDS = (0, 1, 2, 3, 4)
TRAINED_PAIRS = 4000  # the n4000 runs trained on the first 4,000 training pairs
# source positions: a2 a1 a0 + b2 b1 b0
HUNDREDS, TENS, LOWER = [0, 4], [1, 5], [1, 2, 5, 6]
POSITIONS = {"tens": TENS, "hundreds": HUNDREDS}
PROBES = {"c0@tens": (0, "tens"), "c0@hundreds": (0, "hundreds"),
          "c1@hundreds": (1, "hundreds")}
L2 = 1e-3


@torch.no_grad()
def features(model, src: torch.Tensor) -> dict:
    """{'input': [N, 7, d_model], 'memory': [N, 7, d_model]} of a model in eval mode."""
    return {"input": model.embed(src), "memory": model.encode(src)[0]}


def probe_accuracy(x_fit, y_fit, x_test, y_test) -> float:
    """Test accuracy of an L2-penalized logistic regression fitted on (x_fit, y_fit)."""
    return probe_correct(x_fit, y_fit, x_test, y_test) / len(y_test)


def probe_correct(x_fit, y_fit, x_test, y_test) -> int:
    """How many test pairs an L2-penalized logistic regression fitted on (x_fit, y_fit)
    gets right."""
    mean, std = x_fit.mean(0), x_fit.std(0).clamp_min(1e-6)
    x_fit, x_test = (x_fit - mean) / std, (x_test - mean) / std
    torch.manual_seed(0)
    weight = torch.zeros(x_fit.shape[1], requires_grad=True)
    bias = torch.zeros(1, requires_grad=True)
    optimizer = torch.optim.LBFGS([weight, bias], max_iter=200, line_search_fn="strong_wolfe")

    def closure():
        optimizer.zero_grad()
        loss = F.binary_cross_entropy_with_logits(x_fit @ weight + bias, y_fit.float())
        loss = loss + L2 * weight.square().sum()
        loss.backward()
        return loss
    optimizer.step(closure)
    with torch.no_grad():
        return int(((x_test @ weight + bias > 0).long() == y_test).sum())


def probe_model(fit: dict, test: dict, fit_src, test_src) -> dict:
    """{probe: {'input': pairs right, 'memory': pairs right}} of one model, from its
    features of the fitting and the test pairs."""
    fit_y, test_y = column_carries(fit_src), column_carries(test_src)
    out = {}
    for probe, (carry, where) in PROBES.items():
        cols = POSITIONS[where]
        out[probe] = {kind: probe_correct(fit[kind][:, cols].flatten(1), fit_y[:, carry],
                                           test[kind][:, cols].flatten(1), test_y[:, carry])
                      for kind in ("input", "memory")}
    return out


def donors(src: torch.Tensor, pool: torch.Tensor, other_a2: bool) -> torch.Tensor:
    """For each pair of src [N, 7], the index of the first pair of pool [M, 7] with the same
    b2 and either another a2 and the same c1 (other_a2) or the same a2 and the other c1."""
    carry, pool_carry = column_carries(src)[:, 1], column_carries(pool)[:, 1]
    chosen = []
    for pair, c1 in zip(src, carry):
        same_b2 = pool[:, 4] == pair[4]
        if other_a2:
            match = same_b2 & (pool[:, 0] != pair[0]) & (pool_carry == c1)
        else:
            match = same_b2 & (pool[:, 0] == pair[0]) & (pool_carry != c1)
        chosen.append(int(match.nonzero()[0]))
    return torch.tensor(chosen)


@torch.no_grad()
def patching(model, order: str, src: torch.Tensor, pool: torch.Tensor, memory: torch.Tensor,
             pool_memory: torch.Tensor, other_a2: torch.Tensor, other_c1: torch.Tensor) -> dict:
    """{'control', 'carry@hundreds', 'carry@lower', 's3 carry@hundreds', 's3 carry@lower'}:
    the number of test pairs whose decoded s2 (or s3, over the pairs with a2 + b2 = 9,
    whose thousands digit is their carry c1) follows the donor (see the module docstring).
    memory and pool_memory are the model's encodings of src and pool; other_a2 and other_c1
    the donors (`donors`) of each kind."""
    a2, b2, c1 = src[:, 0], src[:, 4], column_carries(src)[:, 1]

    def patched(index, positions) -> torch.Tensor:
        """[N, 4] the sum's digits in place order (s0 .. s3) decoded from patched memory."""
        out = memory.clone()
        out[:, positions] = pool_memory[index][:, positions]
        predicted = model.generate(src, memory=out)  # output order
        return predicted.flip(1) if order == "forward" else predicted

    follows_a2 = patched(other_a2, HUNDREDS)[:, 2] == (pool[other_a2, 0] + b2 + c1) % 10
    out = {"control": int(follows_a2.sum())}
    nine = a2 + b2 == 9  # s3 = c2 = c1 exactly here
    for name, positions in (("hundreds", HUNDREDS), ("lower", LOWER)):
        digits = patched(other_c1, positions)
        out[f"carry@{name}"] = int((digits[:, 2] == (a2 + b2 + 1 - c1) % 10).sum())
        out[f"s3 carry@{name}"] = int((digits[nine, 3] == 1 - c1[nine]).sum())
    return out


def pairs_of(key: str, test_pairs: int, s3_pairs: int) -> int:
    """The pairs a count of the patching is out of: the s3 patches read only the pairs with
    a2 + b2 = 9."""
    return s3_pairs if key.startswith("s3 ") else test_pairs


def with_fractions(counts: dict, test_pairs: int, s3_pairs: int) -> dict:
    """carry_probe.json from the counts: each accuracy or fraction is its count over its
    pairs, the float nearest the exact fraction (one rounding), and the counts kept."""
    return {"probes": list(PROBES),
            "majority": {p: k / test_pairs for p, k in counts["majority"].items()},
            "runs": {run: {seed: {p: {kind: k / test_pairs for kind, k in by_kind.items()}
                                  for p, by_kind in probes.items()}
                           for seed, probes in by_seed.items()}
                     for run, by_seed in counts["runs"].items()},
            "test_pairs": test_pairs, "s3_pairs": s3_pairs,
            "patching": {run: {seed: {key: k / pairs_of(key, test_pairs, s3_pairs)
                                      for key, k in keys.items()}
                               for seed, keys in by_seed.items()}
                         for run, by_seed in counts["patching"].items()},
            "counts": counts}


@script
def main(argv=None) -> int:
    parser = ArgumentParser(__doc__)
    add_common_args(parser, "problem1")
    args = parser.parse_args(argv)
    setup(args)
    paths = {(run, seed): seed_dir(args.results_dir, seed) / f"model_{run}.pth"
             for run in RUNS for seed in SEEDS}
    missing = [path for path in paths.values() if not path.exists()]
    if missing:
        fail(f"{missing[0]} not found ({len(missing)} of {len(RUNS) * len(SEEDS)} models "
             "missing): `make carry-probe` trains them "
             "(about 25 minutes on two cores)")
    src = {split: AdditionDataset(args.data_dir, split, "forward").src
           for split in ("train", "test")}
    fit_src, test_src = src["train"][TRAINED_PAIRS:], src["test"]
    test_y = column_carries(test_src)
    ones = {probe: int(test_y[:, c].sum()) for probe, (c, _) in PROBES.items()}
    counts = {"majority": {probe: max(k, len(test_src) - k) for probe, k in ones.items()},
              "runs": {run: {} for run in RUNS}, "patching": {run: {} for run in RUNS}}
    other = {kind: donors(test_src, fit_src, kind == "a2") for kind in ("a2", "c1")}
    for run, order in RUNS.items():
        for seed in SEEDS:
            model, _, _ = load_model(paths[run, seed], "cpu")
            fit, test = features(model, fit_src), features(model, test_src)
            counts["runs"][run][str(seed)] = probe_model(fit, test, fit_src, test_src)
            counts["patching"][run][str(seed)] = patching(
                model, order, test_src, fit_src, test["memory"], fit["memory"], other["a2"],
                other["c1"])
            print(run, seed, counts["runs"][run][str(seed)], counts["patching"][run][str(seed)])
    out = args.results_dir / "carry_probe.json"
    write_json(out, with_fractions(counts, len(test_src),
                                   int((test_src[:, 0] + test_src[:, 4] == 9).sum())))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
