"""The written answers as one PDF per student (course/grading/written.py) on a class of two:
ada hands in complete reports (the templates answered, every figure, one answer far over
its pages), bob a repository one level down without problem2/REPORT.md, without one
Problem 1 figure, and with a Problem 3 report that tries to embed files outside its folder
(an absolute path, another student's figure, a link out, raw HTML, URLs). Checked: every
PDF has the outline's pages, each question on its pages with its heading, in order; the
missing marked where they are; nothing outside a submission's problem folder embedded."""

import csv
import os
import re

import pymupdf
import pytest

from course.grading import sheet, written
from provided.common import REPO_ROOT

pytestmark = pytest.mark.kit
ADA, BOB, SECRET = (44, 33), (40, 30), (37, 23)  # each one's figures: a size of its own
FIGURE = re.compile(r"!\[[^\]]*\]\(([^)]+)\)")
LONG = 3  # ada's Problem 3 question 3 is far longer than its pages


def png(path, size):
    path.parent.mkdir(parents=True, exist_ok=True)
    pixmap = pymupdf.Pixmap(pymupdf.csRGB, pymupdf.IRect(0, 0, *size), 0)
    pixmap.clear_with(200)
    path.write_bytes(pixmap.tobytes("png"))


def template(problem):
    return (REPO_ROOT / problem / "REPORT.md").read_text()


def answered(problem):
    """The template with an answer under each question's heading."""
    def answer(match):
        number = int(match.group(1))
        text = f"{match.group(0)}\nAnswer to {problem} question {number}: the argument.\n"
        if problem == "problem3" and number == LONG:
            text += "\n".join(f"Line {i} of a very long answer." for i in range(400)) + "\n"
        return text
    return re.sub(r"^## (\d+)\. .*$", answer, template(problem), flags=re.MULTILINE)


def figures_of(problem, section):
    """The figures a template's section references."""
    return FIGURE.findall(written.split_report(template(problem), questions(problem))
                          .sections[section])


def questions(problem=None):
    return [q for q in sheet.written_questions() if problem in (None, q.problem)]


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """The class, the PDFs and the outline written by the command."""
    base = tmp_path_factory.mktemp("written")
    png(base / "secret.png", SECRET)  # outside every submission
    (base / "secret.md").write_text("SECRET TEXT\n")
    ada, bob = base / "class" / "ada", base / "class" / "bob" / "hw4-repo"
    for problem in written.PROBLEMS:
        for root, size in ((ada, ADA), (bob, BOB)):
            (root / problem).mkdir(parents=True)
            for src in set(FIGURE.findall(template(problem))):
                png(root / problem / src, size)
        (ada / problem / "REPORT.md").write_text(answered(problem))
    (bob / "problem1" / "REPORT.md").write_text(answered("problem1"))
    (bob / "problem1" / "results" / "figures" / "ablation.png").unlink()
    os.symlink(base / "secret.png", bob / "problem3" / "results" / "figures" / "link.png")
    os.symlink(base / "secret.md", bob / "problem3" / "notes.md")
    hostile = (f"![a]({base / 'secret.png'}) ![b](../../../ada/problem3/results/figures/"
               "validity_curve.png) ![c](results/figures/link.png) ![d](../problem1/results/"
               f"figures/pruning.png) ![e](file://{base / 'secret.png'}) "
               f"![f](http://127.0.0.1:9/x.png) ![g](/etc/passwd) ![h](notes.md)\n\n"
               f'<img src="{base / "secret.png"}"> <iframe src="/etc/passwd"></iframe>\n')
    (bob / "problem3" / "REPORT.md").write_text(
        answered("problem3").replace("Answer to problem3 question 2: the argument.",
                                     "Answer to problem3 question 2: the argument.\n\n"
                                     + hostile))
    out = base / "pdfs"
    assert written.main([str(base / "class"), "--out", str(out)]) == 0
    with open(out / written.OUTLINE) as f:
        outline = list(csv.DictReader(f))
    return base, out, outline


def texts(path):
    """Each page's text (ligatures as letters, white space as single spaces) and images."""
    flags = pymupdf.TEXTFLAGS_TEXT & ~pymupdf.TEXT_PRESERVE_LIGATURES
    with pymupdf.open(path) as doc:
        return ([" ".join(page.get_text(flags=flags).split()) for page in doc],
                [page.get_image_info() for page in doc])


def test_every_pdf_has_the_outlines_pages_and_headings_in_order(made):
    _, out, outline = made
    rows = {row["section"]: row for row in outline}
    assert [row["section"] for row in outline] == ["cover"] + [
        key for problem in written.PROBLEMS
        for key in [problem] + [q.key for q in questions(problem)]]
    assert len(questions()) == 26
    for name in ("ada", "bob"):
        pages, _ = texts(out / f"{name}.pdf")
        assert len(pages) == int(outline[-1]["last_page"]) == 1 + 3 + 26 * written.PAGES
        assert f"Written answers: {name}" in pages[0]
        with pymupdf.open(out / f"{name}.pdf") as doc:
            toc = doc.get_toc()
        assert [page for _, _, page in toc] == [int(row["first_page"]) for row in outline]
        for q in questions():
            row = rows[q.key]
            first, last = int(row["first_page"]), int(row["last_page"])
            assert last - first + 1 == written.PAGES
            assert pages[first - 1].startswith(f"Problem {q.problem[-1]}, question {q.number}: "
                                      f"{' '.join(q.title.split())}"), (name, q.key)
            for i, page in enumerate(pages[first - 1:last]):
                footer = f"Problem {q.problem[-1]}, question {q.number}: page {i + 1} of "
                assert footer + str(written.PAGES) in page, (name, q.key, i)


def test_the_complete_submission_answers_every_question_with_its_figures(made):
    _, out, outline = made
    rows = {row["section"]: row for row in outline}
    pages, images = texts(out / "ada.pdf")
    assert not any("NO ANSWER" in page or "FIGURE" in page for page in pages)
    for q in questions():
        first, last = int(rows[q.key]["first_page"]), int(rows[q.key]["last_page"])
        assert f"Answer to {q.problem} question {q.number}:" in pages[first - 1]
        shown = [(i["width"], i["height"]) for page in images[first - 1:last] for i in page]
        assert shown == [ADA] * len(figures_of(q.problem, q.number)), q.key
    long = rows[f"problem3_q{LONG}"]
    assert "shrunk to" in pages[int(long["first_page"]) - 1]
    assert "Line 399 of a very long answer." in " ".join(
        pages[int(long["first_page"]) - 1:int(long["last_page"])])
    assert "How many seeds" in pages[int(rows["problem1"]["first_page"]) - 1]


def test_the_missing_are_marked_pages_never_a_crash(made):
    _, out, outline = made
    rows = {row["section"]: row for row in outline}
    pages, images = texts(out / "bob.pdf")
    for q in questions("problem2"):
        page = pages[int(rows[q.key]["first_page"]) - 1]
        assert "NO ANSWER" in page and "problem2/REPORT.md is missing" in page
    assert "problem2/REPORT.md is missing" in pages[int(rows["problem2"]["first_page"]) - 1]
    for q in questions("problem1") + questions("problem3"):
        page = pages[int(rows[q.key]["first_page"]) - 1]
        assert "NO ANSWER" not in page and f"Answer to {q.problem} question {q.number}" in page
    ablation = rows["problem1_q6"]
    text = " ".join(pages[int(ablation["first_page"]) - 1:int(ablation["last_page"])])
    assert "FIGURE MISSING: results/figures/ablation.png" in text
    shown = [i for page in images[int(ablation["first_page"]) - 1:int(ablation["last_page"])]
             for i in page]
    assert len(shown) == len(figures_of("problem1", 6)) - 1  # the pruning curve alone
    assert "figure results/figures/ablation.png: missing" in pages[0]


def test_nothing_outside_the_submissions_problem_folder_is_embedded(made):
    base, out, outline = made
    rows = {row["section"]: row for row in outline}
    pages, images = texts(out / "bob.pdf")
    assert {(i["width"], i["height"]) for page in images for i in page} == {BOB}
    expected = sum(len(FIGURE.findall(template(p))) for p in ("problem1", "problem3")) - 1
    assert sum(len(page) for page in images) == expected
    whole = "".join(pages)
    assert "SECRET TEXT" not in whole and "root:" not in whole
    q2 = rows["problem3_q2"]
    text = " ".join(pages[int(q2["first_page"]) - 1:int(q2["last_page"])])
    assert text.count("FIGURE REFUSED") == 7  # each one marked in its place
    assert text.count("outside the problem's folder") == 4  # b, c (a link), d, h (a link)
    assert "![e](file://" in text  # no image to markdown (file: is no link): its text
    assert '<img src="' in text and '<iframe src="/etc/passwd">' in text  # raw HTML: text
    assert not any(path.name.startswith("secret") for path in out.iterdir())


def test_bad_input_is_one_line_naming_it(made, tmp_path, capsys):
    base, out, _ = made
    (tmp_path / "file").write_text("")
    (tmp_path / "empty").mkdir()
    for argv, named in (([str(tmp_path / "nope"), "--out", str(tmp_path / "o")], "nope"),
                        ([str(tmp_path / "file"), "--out", str(tmp_path / "o")], "file"),
                        ([str(base / "class"), "--out", str(tmp_path / "file")], "--out"),
                        ([str(base / "class"), "--out", str(base / "class" / "x")], "--out"),
                        ([str(tmp_path / "empty"), "--out", str(base / "o2")], "no submission")):
        with pytest.raises(SystemExit) as stop:
            written.main(argv)
        err = capsys.readouterr().err.strip()
        assert stop.value.code == 2 and len(err.splitlines()) == 1, err
        assert err.startswith("error:") and named in err, err


def test_the_instructors_guide_states_the_pages_and_questions():
    text = " ".join((REPO_ROOT / "course" / "INSTRUCTORS.md").read_text().split())
    assert "python -m course.grading.written submissions/ --out written_pdfs/" in text
    assert f"each of the {len(questions())} questions on {written.PAGES} pages" in text


def test_a_question_heading_says_point_or_points():
    """'(1 point)', never '(1 points)'; 2.5 and 0.5 are points."""
    from fractions import Fraction

    def heading(points) -> str:
        return written.heading_html(sheet.Question("problem1", 1, "Title", Fraction(points)))
    assert "(1 point)" in heading(1) and "(2 points)" in heading(2)
    assert "(0.5 points)" in heading(Fraction(1, 2))


def test_html_comments_are_hidden_and_other_raw_html_is_text():
    """A template's hint or a `<!-- table -->` marker is not the student's answer: hidden,
    as a browser hides it; any other raw HTML stays text, never interpreted."""
    md = written.markdown()
    env = {"figures": None, "notes": []}
    text = ("Answer <!-- a hint --> here.\n\n<!-- table: p1_runs -->\n| a |\n|---|\n| 1 |\n"
            "<!-- end table -->\n\n<b>bold</b> and <!-- one --> <!-- two -->\n\n"
            "<div>block</div> <!-- inside -->\n")
    out = md.render(text, env)
    for hidden in ("a hint", "table: p1_runs", "end table", "one", "two"):
        assert hidden not in out, (hidden, out)
    assert "Answer  here." in out and "<td>1</td>" in out
    assert "&lt;b&gt;bold&lt;/b&gt;" in out and "&lt;div&gt;block&lt;/div&gt;" in out
    assert "&lt;!-- inside --&gt;" in out  # inside an HTML block with other HTML: text
