"""Problem 3: the long run's final model at 10,000 samples (uniqueness among 10,000 samples).

    make samples10k                    (instructors)
    python -m course.tools.samples10k --sample   # draws the samples: needs the long run's weights
    python -m course.tools.samples10k            # measures the samples file

metrics.json measures 1,000 samples per model; MOSES reports uniqueness among 10,000 valid
(unique@10k), where repeats are ten times as likely to show. --sample draws 10,000 strings
from results/model_pre_lr0.001_w500_s4000.pth as sample.py does (T = 1, seed 0) into
results/samples_pre_lr0.001_w500_s4000_n10000.txt, and stops. Without it, this checks that
their first 1,000 are the committed samples_{run}.txt (same seed, same batches of 500), and
writes
results/metrics_n10000.json: problem3.evaluate.sample_metrics of all 10,000 and of each
block of 1,000 (the spread of a 1,000-sample measurement).
"""

from problem3.config import MAIN_RUN, load_model, vocab_of
from problem3.evaluate import sample_metrics, train_canonical_set
from problem3.sample import NUM_SAMPLES, sample_run
from provided.common import DATA_DIR, ArgumentParser, fail, results_dir, script
from provided.results import atomic_write_text, write_json

NUM_LARGE = 10_000


def blocks(samples: list[str], size: int) -> list[list[str]]:
    return [samples[start:start + size] for start in range(0, len(samples), size)]


@script
def main(argv=None) -> int:
    parser = ArgumentParser(__doc__)
    parser.add_argument("--sample", action="store_true",
                        help="only draw the samples from the long run's weights")
    args = parser.parse_args(argv)
    folder = results_dir("problem3")
    path = folder / f"samples_{MAIN_RUN}_n{NUM_LARGE}.txt"
    if args.sample:
        model, _, checkpoint = load_model(folder / f"model_{MAIN_RUN}.pth", "cpu")
        vocab = vocab_of(checkpoint)
        drawn = sample_run(model, vocab, NUM_LARGE, 1.0, 0, "cpu")
        atomic_write_text(path, "\n".join(drawn) + "\n")
        print(f"wrote {path}")
        return 0
    if not path.exists():
        fail(f"{path} not found: run `make samples10k` "
             "(it needs the long run's weights)")
    samples = path.read_text().split("\n")[:-1]
    committed = (folder / f"samples_{MAIN_RUN}.txt").read_text().split("\n")[:-1]
    if len(samples) != NUM_LARGE or samples[:NUM_SAMPLES] != committed:
        fail(f"{path} does not hold {NUM_LARGE} samples whose first {NUM_SAMPLES} are "
             f"samples_{MAIN_RUN}.txt: sample again with `make samples10k`")
    train = train_canonical_set(DATA_DIR / "smiles" / "train.txt", folder / "cache")
    write_json(folder / f"metrics_n{NUM_LARGE}.json", {
        "run": MAIN_RUN, "temperature": 1.0, "seed": 0,
        "all": sample_metrics(samples, train),
        "blocks_of_1000": [sample_metrics(block, train)
                           for block in blocks(samples, NUM_SAMPLES)]})
    print(f"wrote {folder / f'metrics_n{NUM_LARGE}.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
