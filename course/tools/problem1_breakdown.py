"""Problem 1: where each run's test errors are, by place of the sum and by number of carries.

    python -m course.tools.problem1_breakdown                 # seed 0: problem1/results/
    python -m course.tools.problem1_breakdown --results_dir problem1/results/seeds/seed1

Greedy-decodes the test split with each run's weights in --results_dir (as evaluate.py
does; a missing run is skipped with one line) and writes breakdown.json beside them:

    {run: {"place_accuracy": {"s0": ..., "s3": ...},
           "exact_match_by_carries": {"0": ..., "3": ...},
           "pairs_by_carries": {"0": ..., "3": ...}}}

place_accuracy is the digit accuracy per place of the sum (s0 the ones, s3 the thousands,
whatever the run's digit order); exact_match_by_carries the exact match of the sums with
0-3 carries (a carry count that no test sum has is left out); pairs_by_carries how many
such sums the split holds. The reference report's forward-order argument counts over these
files of the five seeds (course/tools/tables/problem1.py); carry_probe.py reuses
column_carries. Instructors only (course/tools/): the homework asks for no breakdown.
"""

import torch

from problem1 import evaluate
from provided.common import ArgumentParser, add_common_args, script, setup
from provided.results import write_json


def column_carries(src) -> torch.Tensor:
    """src [N, 7] -> [N, 3] carries c0, c1, c2: out of the ones, tens and hundreds column."""
    a, b = src[:, :3].flip(1), src[:, 4:].flip(1)  # [N, 3], ones digit first
    carry, out = torch.zeros(len(src), dtype=torch.long), []
    for place in range(3):
        carry = ((a[:, place] + b[:, place] + carry) >= 10).long()
        out.append(carry)
    return torch.stack(out, dim=1)


def carries(src) -> torch.Tensor:
    """src [N, 7] -> [N] number of carries (0-3) in the column addition of a + b."""
    return column_carries(src).sum(dim=1)


def breakdown(predicted, dataset, digit_order: str) -> dict:
    """Where the errors are: digit accuracy per place of the sum (s0 = ones ... s3 =
    thousands) and exact match by the number of carries in the sum.

    predicted [N, 4] in output order; dataset has .src and .tgt_out, written in digit_order.
    """
    correct = predicted == dataset.tgt_out  # [N, 4] in output order
    if digit_order == "forward":
        correct = correct.flip(1)  # -> place order s0, s1, s2, s3
    count = carries(dataset.src)
    exact = correct.all(dim=1)
    pairs = {c: int((count == c).sum()) for c in range(4)}
    return {
        "place_accuracy": {f"s{p}": correct[:, p].sum().item() / len(correct) for p in range(4)},
        "exact_match_by_carries": {str(c): exact[count == c].sum().item() / n
                                   for c, n in pairs.items() if n},
        "pairs_by_carries": {str(c): n for c, n in pairs.items()},
    }


@script
def main(argv=None) -> int:
    args = add_common_args(ArgumentParser(__doc__), "problem1").parse_args(argv)
    device = setup(args)
    errors = {saved.run: breakdown(predicted, test, saved.digit_order)
              for _, saved, test, predicted in evaluate.decoded_runs(args, device)}
    write_json(args.results_dir / "breakdown.json", errors)
    print(f"wrote {args.results_dir / 'breakdown.json'} ({len(errors)} runs)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
