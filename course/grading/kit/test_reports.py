"""The three reports against the committed JSON: every generated table
(course/tools/report_tables.py)
is current, and the numbers a reader checked in the prose are what the JSON, the logs and the
sample file give."""

import json
import math
import re
import statistics

import pytest

from course import reference_report
from course.grading import bands
from course.tools import report_tables
from course.tools.tables.style import fmt
from provided.common import REPO_ROOT, results_dir

pytestmark = pytest.mark.kit


def report(problem: str) -> str:
    """The report's text with its lines joined, so that a quoted phrase may wrap."""
    return " ".join(reference_report(problem).read_text().split())


def load(problem: str, name: str):
    return json.loads((results_dir(problem) / name).read_text())


def log(problem: str, run: str) -> dict:
    return load(problem, f"training_log_{run}.json")


# ------------------------------------------------------------------------ generated tables
def test_generated_tables_match_the_json():
    differences = report_tables.differences()
    assert not differences, ("tables out of date (run `python -m course.tools.report_tables`):\n"
                             + "\n".join(differences))


@pytest.mark.parametrize("problem", ["problem1", "problem2", "problem3"])
def test_committed_bands_are_recomputed_from_the_seed_folders(problem):
    assert bands.collect(problem, bands.QUANTITIES[problem]) == load(problem,
                                                                     "reference_bands.json")


def test_bands_command_line():
    assert bands.parse_problems([]) == ["problem1", "problem2", "problem3"]
    assert bands.parse_problems(["problem3"]) == ["problem3"]
    with pytest.raises(SystemExit):
        bands.parse_problems(["problem4"])


def test_a_stale_table_is_named_and_rewritten():
    text = "intro\n<!-- table: t1 -->\nold\n<!-- end table -->\n<!-- table: t2 -->\nsame\n" \
           "<!-- end table -->\n"
    new, changed, problems = report_tables.fill(text, {"t1": "new", "t2": "same"})
    assert changed == ["t1"] and not problems
    assert "<!-- table: t1 -->\nnew\n<!-- end table -->" in new and "old" not in new
    _, changed, problems = report_tables.fill(new, {"t1": "new", "t2": "same", "t3": "x"})
    assert changed == [] and problems == ["table t3: generated but has no markers in the report"]


def test_rounding_is_half_up_from_the_json_text():
    assert fmt(0.64175) == "0.6418" and fmt(0.999875) == "0.9999" and fmt(1.0) == "1.0000"
    assert fmt(0.9942500000000001) == "0.9943" and fmt(None) == "–"


# -------------------------------------------------------------------- quoted prose numbers
def p1_quotes() -> list[str]:
    metrics = load("problem1", "metrics.json")
    maps = load("problem1", "attention_maps.json")
    breakdown = load("problem1", "breakdown.json")
    # forward decoder layer 1, head 3, output step 0 (s3); source a2 a1 a0 + b2 b1 b0
    s3 = maps["forward_n4000"]["decoder_cross"][1][3][0]
    late = {run: statistics.fmean(p["val_exact_match"] for p in log("problem1", run)["log"][-10:])
            for run in ("forward_n2000", "reversed_n2000")}
    h2 = maps["reversed_n4000"]["decoder_self"][0][2]
    pruning = metrics["pruning"]["reversed_n4000"]
    carries = breakdown["forward_n1000"]["exact_match_by_carries"].values()
    on_val = load("problem1", "pruning_validation.json")
    p1_bands = load("problem1", "reference_bands.json")
    late_fwd = p1_bands["forward_n1000"]["late_val_exact_match"]["values"]
    steps = {run: p1_bands[run]["steps_to_95"]["values"]
             for run in ("reversed_n2000", "reversed_n4000")}
    assert all(r2 < r4 for r2, r4 in zip(*steps.values())), steps
    same_from = max(24 - k for k in range(25) if all(
        set(on_val[run][j]["removed"]) == set(metrics["pruning"][run][j]["removed"])
        for run in on_val for j in range(k, 25)))
    best_on_val = max(p["test_exact_match"] for p in on_val["forward_n4000"])
    full = metrics["pruning"]["forward_n4000"][0]["test_exact_match"]
    return [
        f"the same curve from {same_from} heads left down",
        f"above the full forward model's {fmt(full)}",
        f"(up to {fmt(best_on_val)}, {round((best_on_val - full) * 2000)} more correct sums)",
        f"dec1.cross.h3 puts {fmt(s3[2] + s3[6], 3)} on a0 + b0 (a0 {fmt(s3[2], 3)}, "
        f"b0 {fmt(s3[6], 3)};",
        f"removing it alone lowers test exact match to "
        f"{fmt(metrics['ablation']['forward_n4000']['dec1.cross.h3'])}",
        f"| enc1.self.h2 | {fmt(metrics['ablation']['forward_n4000']['enc1.self.h2'])} |",
        f"averaged over them the two orders are {fmt(late['forward_n2000'])} and "
        f"{fmt(late['reversed_n2000'])}",
        f"its worst place is the tens digit s1 "
        f"({fmt(breakdown['forward_n1000']['place_accuracy']['s1'])}",
        f"flat across carry counts ({fmt(min(carries))}-{fmt(max(carries))}",
        f"(test exact match {fmt(metrics['ablation']['reversed_n4000']['dec0.self.h2'])} "
        f"without it)",
        f"weight on the BOS position at steps 0-2 ({fmt(h2[0][0], 3)}, {fmt(h2[1][0], 3)}, "
        f"{fmt(h2[2][0], 3)})",
        f"lowers exact match from {fmt(pruning[17]['test_exact_match'])} to "
        f"{fmt(pruning[18]['test_exact_match'])}",
        f"sqrt(p(1 - p) / 2000): {fmt(math.sqrt(0.99 * 0.01 / 2000))} at p = 0.99",
        f"average is {fmt(min(late_fwd))}-{fmt(max(late_fwd))} over the five",
        f"in every seed ({min(steps['reversed_n2000'])}-{max(steps['reversed_n2000'])} against "
        f"{min(steps['reversed_n4000'])}-{max(steps['reversed_n4000'])}, lines above)",
    ]


def p2_quotes() -> list[str]:
    metrics, analysis = load("problem2", "metrics.json"), load("problem2", "analysis.json")
    uniform = statistics.fmean(1 / (i + 1) for i in range(7, 64))
    rotary = analysis["rotary"]["long_sequences"]["buckets"]
    window = load("problem2", "rotary_window.json")["seeds"]
    seed_rotary = {seed: load("problem2", f"seeds/seed{seed}/analysis.json")["rotary"]
                   ["long_sequences"]["buckets"] for seed in (1, 2, 3, 4)}
    return [
        f"weight on the target key averages "
        f"{fmt(analysis['none']['attention']['on_target']['in_range'])} over queries 7–63",
        f"averaged over the same queries, would give {fmt(uniform)}",
        f"then falls to {fmt(rotary[6])} at 384–447 and {fmt(rotary[7])} at 448–511",
        f"Rotary stays at {fmt(min(rotary[1:6]))}–{fmt(max(rotary[1:6]))} per bucket up to "
        f"position 383",
        f"seed 1, {fmt(seed_rotary[1][7])} at 448–511",
        f"at 448–511 they reach {fmt(seed_rotary[2][7])}, {fmt(seed_rotary[3][7])} and "
        f"{fmt(seed_rotary[4][7])} (seeds 2, 3 and 4), and seed 3 is already at "
        f"{fmt(seed_rotary[3][2])} at 128–191",
        "gives accuracy 1.0000 in every bucket up to position 511, in all five seeds"
        if all(b == 1.0 for run in window.values() for b in run["window"]) else "(window)",
        f"(against {', '.join(fmt(window[str(s)]['full'][7]) for s in range(4))} and "
        f"{fmt(window['4']['full'][7])} at 448–511 without the mask)",
        f"below the {fmt(metrics['none']['beyond'])} that the position-free model reaches (and "
        f"the {fmt(analysis['bag_of_tokens_ceiling']['beyond'])} bag-of-tokens ceiling)",
    ]


def p3_quotes() -> list[str]:
    from problem3.evaluate import RING_DIGIT, is_well_formed
    from provided.smiles import tokenize

    metrics = load("problem3", "metrics.json")
    train = {p["step"]: p["train_loss"] for p in log("problem3", "post_lr0.03_w500_s1500")["log"]}
    properties = load("problem3", "properties.json")["samples"]["mol_wt"]
    low, high = sum(w < 250 for w in properties), sum(w > 350 for w in properties)
    at_100 = {e["run"]: next(p["head_grad_norm"] for p in log("problem3", e["run"])["log"]
                             if p["step"] == 100) for e in metrics["sweep"]}
    ranked = sorted(at_100, key=at_100.get)
    stalled, healthy = ranked[:3], ranked[3:]
    samples = [s for s in (results_dir("problem3") / "samples_pre_lr0.001_w500_s4000.txt")
               .read_text().splitlines() if s]
    ill = [s for s in samples if not is_well_formed(s)]

    def unclosed(smiles: str) -> bool:
        try:
            tokens = tokenize(smiles)
        except ValueError:
            return False
        digits = [t for t in tokens if RING_DIGIT.match(t)]
        return any(digits.count(d) % 2 for d in set(digits))

    final = metrics["main"]["by_temperature"][1]
    band = load("problem3", "reference_bands.json")

    def loss_range(cell):
        values = band[cell]["final_val_loss"]["values"]
        return f"{fmt(min(values), 3)}-{fmt(max(values), 3)}"

    large = load("problem3", "metrics_n10000.json")
    block_validity = [b["validity"] for b in large["blocks_of_1000"]]
    pre_stall = band["pre_lr0.03_w0"]["head_grad_norm_at_100"]["values"]
    worst_pre = max(v for cell in band if cell.startswith("pre")
                    for v in band[cell]["final_val_loss"]["values"])
    quotes = [
        f"with final losses from {loss_range('post_lr0.03_w500').replace('-', ' to ')}:",
        f"stalls near 1.5 in every seed ({loss_range('pre_lr0.03_w0')})",
        f"ends at {loss_range('post_lr0.001_w0')} in all five",
        f"have small values in all five seeds ({fmt(min(pre_stall), 3)}-"
        f"{fmt(max(pre_stall), 3)})",
        f"scatter from {loss_range('post_lr0.01_w0').replace('-', ' to ')} over the seeds",
        f"Warmup takes pre-LN at 3e-2 from {loss_range('pre_lr0.03_w0')} to "
        f"{loss_range('pre_lr0.03_w500')}",
        f"(worst final validation loss {fmt(worst_pre, 3)},",
        f"(mean {fmt(band['post_lr0.01_w0']['final_val_loss']['mean'], 3)}, sd "
        f"{fmt(band['post_lr0.01_w0']['final_val_loss']['sd'], 3)})",
        f"Counted over 10,000 samples ({large['all']['validity'] * 10000:,.0f} of them valid), our "
        f"uniqueness ({fmt(large['all']['uniqueness'], 3)})",
        f"about ±{fmt((max(block_validity) - min(block_validity)) / 2, 3)} in validity",
        f"is {fmt(train[1200], 3)} at step 1200 and then rises",
        f"to {fmt(train[1500], 3)} at step 1500, still rising",
        f"{low + high} of the {len(properties)} valid samples "
        f"({round(100 * (low + high) / len(properties))}%; {low} below 250 and {high} above 350",
        f"post-LN at 3e-2 ({fmt(at_100['post_lr0.03_w0_s1500'], 3)}) and at 1e-2 "
        f"({fmt(at_100['post_lr0.01_w0_s1500'], 3)}) without warmup and pre-LN at 3e-2 "
        f"without warmup ({fmt(at_100['pre_lr0.03_w0_s1500'], 3)})",
        f"all nine others have {fmt(min(at_100[r] for r in healthy), 3)} or more",
        f"{sum(unclosed(s) for s in ill)} of the {len(ill)} ill-formed samples",
        "validity 0.975, uniqueness 0.999 among 10,000 samples (unique@10k) and novelty 0.842",
        f"our final model has validity {fmt(final['validity'], 3)}, uniqueness "
        f"{fmt(final['uniqueness'], 3)} and novelty {fmt(final['novelty'], 3)}",
    ]
    assert set(stalled) == {"post_lr0.03_w0_s1500", "post_lr0.01_w0_s1500",
                            "pre_lr0.03_w0_s1500"}, stalled
    path = results_dir("problem3") / "mechanism.json"
    if path.exists():
        runs = {(r["norm"], r["lr"]): r for r in json.loads(path.read_text())["runs"]}

        def late_ratio(norm, lr):
            return statistics.median(x for rec in runs[(norm, lr)]["records"]
                                     if rec["step"] >= 100 for x in rec["update_ratio"])
        quotes.append(f"the median update ratio is {fmt(late_ratio('post', 0.01))} for post-LN "
                      f"at 1e-2, against {fmt(late_ratio('pre', 0.01))} for pre-LN")
        at_50 = next(r for r in runs[("post", 0.01)]["records"] if r["step"] == 50)
        quotes.append(f"(batch loss {fmt(at_50['loss'], 3)} at step 50 in")
        clipped = [r["step"] for r in runs[("post", 0.001)]["records"]
                   if r["total_grad_norm"] > 1.0]
        quotes.append(f"above 1.0 only at step {clipped[0]} and step {clipped[1]};")
        assert len(clipped) == 2, clipped
    norms = [point["total_grad_norm"] for folder in bands.seed_dirs("problem3").values()
             for point in json.loads((folder / "training_log_post_lr0.001_w0_s1500.json")
                                     .read_text())["log"]]
    assert max(norms) < 1.0, "a post-LN 1e-3 run without warmup was clipped at a logged step"
    quotes.append(f"1.0 at every one of the {len(norms)} logged steps (every 50th, at most "
                  f"{fmt(max(norms), 2)})")
    pairs = []  # (mean with warmup > mean without) per seed and configuration
    for folder in bands.seed_dirs("problem3").values():
        means = {path.name[len("training_log_"):-len("_s1500.json")]: statistics.fmean(
            p["head_grad_norm"] for p in json.loads(path.read_text())["log"]
            if p["step"] in (50, 100)) for path in folder.glob("training_log_*_s1500.json")}
        pairs += [means[cell] > means[cell.replace("_w500", "_w0")]
                  for cell in means if cell.endswith("_w500")]
    quotes.append(f"than without in {sum(pairs)} of {len(pairs)} pairs of otherwise equal runs")
    by_step = metrics["main"]["by_step"]
    quotes.append(f"{fmt(by_step[0]['well_formed'] - by_step[0]['validity'], 3)} of the samples "
                  f"are well-formed but invalid at step 1000 and "
                  f"{fmt(by_step[-1]['well_formed'] - by_step[-1]['validity'], 3)} at step 4000")
    rises = 0
    for folder in bands.seed_dirs("problem3").values():
        val = {p["step"]: p["val_loss"] for p in json.loads(
            (folder / "training_log_post_lr0.03_w500_s1500.json").read_text())["val"]}
        rises += val[1500] > val[1250]
    quotes.append(f"rises from step 1250 to 1500 in {rises} of 5 seeds")
    from course.tools.tables.problem3 import main_by_seed
    mains = main_by_seed()
    if len(mains) > 1:
        finals = [m["by_step"][-1] for m in mains.values()]
        kekule = [m["well_formed_invalid_reasons"]["kekulization"] for m in mains.values()]
        quotes += [f"validity {fmt(min(f['validity'] for f in finals), 3)}-"
                   f"{fmt(max(f['validity'] for f in finals), 3)}, uniqueness",
                   f"all five seeds, {min(kekule)}-{max(kekule)} of 1,000"]
    first_val = log("problem3", "post_lr0.01_w0_s1500")["val"][0]
    quotes.append(f"{fmt(first_val['val_loss'], 3)} at step {first_val['step']} is below both")
    seeds_w500 = band["post_lr0.03_w500"]["final_val_loss"]
    later = [v for seed, v in zip(seeds_w500["seeds"], seeds_w500["values"]) if seed != 0]
    quotes.append(f"{fmt(min(later), 3)}-{fmt(max(later), 3)} in seeds 1-4")
    return quotes


@pytest.mark.parametrize("problem, quotes", [("problem1", p1_quotes), ("problem2", p2_quotes),
                                             ("problem3", p3_quotes)])
def test_quoted_numbers_match_the_json(problem, quotes):
    text = report(problem)
    missing = [quote for quote in quotes() if " ".join(quote.split()) not in text]
    assert not missing, f"{reference_report(problem)} does not quote, as the JSON gives:\n" + \
        "\n".join(missing)


class Archive:
    """A stand-in for the PDF's image archive: the names of what was added."""

    def __init__(self):
        self.names = []

    def add(self, data: bytes, name: str) -> None:
        self.names.append(name)


@pytest.mark.parametrize("problem", ["problem1", "problem2", "problem3"])
def test_a_report_read_as_a_students_puts_each_answer_under_its_question(problem):
    """The reference report read by course.grading.written as a student's
    problemN/REPORT.md: each question of the template is a section of its own, under the
    template's heading, opening with its Answer, and every figure it shows is linked
    from problemN/ (as the template's are) and embedded, none refused."""
    from course.grading import sheet, written

    questions = [q for q in sheet.written_questions() if q.problem == problem]
    text = reference_report(problem).read_text()
    cut = written.split_report(text, questions)
    assert sorted(cut.sections) == [q.number for q in questions]
    for q in questions:
        assert cut.headings[q.number] == f"{q.number}. {q.title}", q.key
        body = re.sub(r"<!--.*?-->", "", cut.sections[q.number], flags=re.S).lstrip()
        assert body.startswith("**Answer"), (q.key, body[:80])
    links = re.findall(r"!\[[^\]]*\]\(([^)\s]+)\)", text)
    figures = written.Figures((REPO_ROOT / problem).resolve(), Archive())
    refused = {link: why for link in links if (why := figures.embed(link)[1])}
    assert not refused, f"{problem}.md: figures the renderer does not embed: {refused}"
    assert len(figures.archive.names) == len(set(links))
