"""The written answers as one PDF per student, laid out for Gradescope's manual grading.

    python -m course.grading.written SUBMISSIONS_DIR --out written_pdfs/

Instructors only. SUBMISSIONS_DIR is what `python -m course.grading.grade SUBMISSIONS_DIR
--csv scores.csv` takes: a folder of submission folders, one per student (the root of a
submission found as the grader finds it, course.grading.intake.find_root: a repository
unpacked one level down is found). For each it writes OUT/<submission>.pdf: the three
problemN/REPORT.md rendered (markdown-it-py, CommonMark with tables) with the figures they
reference embedded, and OUT/outline.csv, the pages of each question.

Every PDF has the same pages: page 1 the cover (the submission's name, the questions'
pages, what is missing), then per problem one page for what its report says before its
first question (title, "How many seeds") and then each of its written questions, the 26 of
course/grading/RUBRIC.md's tables in the order of the templates problemN/REPORT.md, on
exactly --pages pages (default 2) that start with the question's heading. A question's
section is found by its heading's number ("## 3. ..."; the title alone also matches); what
follows a heading that is no question stays with the question before it. A longer answer
is shrunk to fit its pages (the page says by how much), a shorter one is followed by blank
pages: so one outline (Gradescope's "Exam / Quiz" assignment, any one PDF as template)
matches every student's pages by itself. A missing report or question is a page marked
NO ANSWER (a section the template left as it was is marked too), a missing or refused figure
a marked box in its place; none stops the others.

Nothing outside a submission's folder is read: a figure is a path relative to the report's
problemN/ folder and must resolve (links followed) inside it; a URL, an absolute path, a
path out of the folder, a link, a FIFO, a file over 20 MiB or anything but a PNG or JPEG
image is refused and marked. Raw HTML in a report is shown as text, never interpreted (an
HTML comment is dropped, as a browser hides it), and
a link shows its text and address; the PDF engine (PyMuPDF's Story) reads images only from
the bytes this module hands it, so nothing is fetched.

Bad input is one line naming it (error:, exit 2): SUBMISSIONS_DIR missing or not a folder,
--out a file or inside SUBMISSIONS_DIR, the renderer not installed.
"""

import argparse
import csv
import html
import io
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlsplit

from course.grading.intake import find_root, read_regular
from course.grading.rubric import points_phrase
from course.grading.sheet import Question, shown, written_questions
from provided.common import REPO_ROOT, ArgumentParser, fail, script
from provided.results import atomic_write_bytes, atomic_write_text
from provided.submission import SUBMISSION_FILE_BYTES

try:
    import pymupdf
    from markdown_it import MarkdownIt
except ImportError as err:  # the instructors' extras
    pymupdf = MarkdownIt = None
    MISSING_RENDERER = err.name

PROBLEMS = ("problem1", "problem2", "problem3")
REPORT = "REPORT.md"
OUTLINE = "outline.csv"
PAGES = 2  # pages per question, default of --pages
WIDTH, HEIGHT = 612.0, 792.0  # US Letter, in points (what Gradescope shows at its width)
MARGIN, FOOTER = 54.0, 24.0
CONTENT_WIDTH = WIDTH - 2 * MARGIN
FIGURE_HEIGHT = 0.42 * (HEIGHT - 2 * MARGIN - FOOTER)  # at most: two figures and text a page
REPORT_BYTES = 2**20  # a report longer than this is not a report
IMAGE_PIXELS = 40_000_000  # a larger figure is refused (a decompression bomb, say)
MAX_SCALE = 64.0  # the most a section is shrunk (1/64), so a runaway report still ends
HEADING = re.compile(r"\s*(?:question\s*)?(\d+)\s*[.):]\s*(.*)", re.IGNORECASE)

CSS = """
body { font-family: sans-serif; font-size: 10pt; line-height: 1.25; }
h1 { font-size: 15pt; margin: 0 0 6pt 0; }
h2 { font-size: 13pt; margin: 10pt 0 4pt 0; }
h3, h4, h5, h6 { font-size: 11pt; margin: 8pt 0 3pt 0; }
p { margin: 0 0 5pt 0; }
table { border-collapse: collapse; margin: 4pt 0 6pt 0; font-size: 8.5pt; }
th, td { border: 0.5pt solid #777; padding: 1.5pt 3pt; }
th { background-color: #eee; }
pre { font-family: monospace; font-size: 8pt; white-space: pre-wrap; background-color: #f4f4f4; }
code { font-family: monospace; font-size: 9pt; }
blockquote { margin-left: 12pt; color: #444; }
.question { font-size: 14pt; font-weight: bold; border-bottom: 1pt solid #000;
            margin: 0 0 8pt 0; padding-bottom: 3pt; }
.points { font-weight: normal; font-size: 11pt; }
.theirs { font-size: 8.5pt; color: #555; margin: 0 0 6pt 0; }
.noanswer { font-size: 22pt; font-weight: bold; color: #b00000; margin: 40pt 0 10pt 0; }
.reason { font-size: 11pt; color: #b00000; }
.marked { color: #b00000; font-weight: bold; background-color: #fde8e8; }
.caption { font-size: 8pt; color: #555; }
.cover { font-size: 20pt; font-weight: bold; margin: 0 0 10pt 0; }
"""


@dataclass
class Figures:
    """The figures of one problem's report: each embedded once, from inside its folder."""
    folder: Path  # the submission's problemN/, resolved
    archive: object  # the pymupdf.Archive every section of the submission draws from
    names: dict = field(default_factory=dict)  # resolved path -> (archive name, width, height)

    def embed(self, src: str) -> tuple[tuple[str, int, int] | None, str]:
        """((the archive name of the figure at src, its width, its height), "") or (None,
        why it is not embedded)."""
        relative = unquote(src)
        parts = urlsplit(relative)
        if parts.scheme or parts.netloc or relative.startswith(("/", "\\")) or not relative:
            return None, "refused: not a relative path inside the problem's folder"
        path = Path(os.path.normpath(self.folder / parts.path))
        try:
            resolved = path.resolve()
        except (OSError, RuntimeError):
            return None, "refused: the path cannot be resolved"
        if not resolved.is_relative_to(self.folder):
            return None, "refused: outside the problem's folder"
        if resolved in self.names:
            return self.names[resolved], ""
        if not resolved.exists():
            return None, "missing: no such file"
        data = read_regular(resolved, SUBMISSION_FILE_BYTES)
        if data is None:
            return None, "refused: not a regular file of at most 20 MiB"
        size = image_size(data)
        if size is None:
            return None, "refused: not a PNG or JPEG image"
        if size[0] * size[1] > IMAGE_PIXELS:
            return None, f"refused: {size[0]} x {size[1]} pixels, over {IMAGE_PIXELS:,}"
        name = f"figure{len(self.names) + 1}_{self.folder.name}.{size[2]}"
        self.archive.add(data, name)
        self.names[resolved] = (name, *size[:2])
        return self.names[resolved], ""


def image_size(data: bytes) -> tuple[int, int, str] | None:
    """(width, height, "png" or "jpg") of a PNG or JPEG image from its header, else None."""
    if data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR" and len(data) >= 24:
        width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
        return (width, height, "png") if width and height else None
    if data[:2] != b"\xff\xd8":
        return None
    at = 2
    while at + 9 < len(data):  # the JPEG markers up to the frame header (SOFn)
        if data[at] != 0xFF:
            return None
        marker, length = data[at + 1], int.from_bytes(data[at + 2:at + 4], "big")
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            height = int.from_bytes(data[at + 5:at + 7], "big")
            width = int.from_bytes(data[at + 7:at + 9], "big")
            return (width, height, "jpg") if width and height else None
        at += 2 + length
    return None


# ------------------------------------------------------------------------------ markdown
def markdown() -> "MarkdownIt":
    """CommonMark with tables and strikethrough; raw HTML parsed but shown as text, never
    interpreted, except an HTML comment, which is dropped as a browser hides it (a
    template's hint, a generator's `<!-- table: ... -->` marker); images only through
    Figures.embed, links as their text and address."""
    md = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])
    md.add_render_rule("image", render_image)
    md.add_render_rule("link_open", lambda self, tokens, idx, options, env: "")
    md.add_render_rule("link_close", render_link_close)
    md.add_render_rule("html_block", lambda self, tokens, idx, options, env:
                       "" if is_comment(tokens[idx].content) else
                       f"<pre>{html.escape(tokens[idx].content)}</pre>")
    md.add_render_rule("html_inline", lambda self, tokens, idx, options, env:
                       "" if is_comment(tokens[idx].content) else
                       html.escape(tokens[idx].content))
    return md


def is_comment(raw: str) -> bool:
    """Whether raw HTML is comments alone (and the white space between them)."""
    return not re.sub(r"<!--.*?-->", "", raw, flags=re.S).strip() and "<!--" in raw


def render_image(self, tokens, idx, options, env) -> str:
    token = tokens[idx]
    src = str(token.attrGet("src") or "")
    alt = self.renderInlineAsText(token.children or [], options, env)
    figures: Figures = env["figures"]
    embedded, reason = figures.embed(src)
    shown = html.escape(unquote(src))
    if embedded is None:
        env["notes"].append(f"figure {unquote(src)}: {reason}")
        return (f'<span class="marked">[FIGURE {html.escape(reason.split(":")[0].upper())}: '
                f"{shown} ({html.escape(reason)})]</span>")
    name, width, height = embedded
    shown_width = min(CONTENT_WIDTH, FIGURE_HEIGHT * width / height)
    return (f'<img src="{name}" width="{shown_width:.0f}" '
            f'height="{shown_width * height / width:.0f}"/>'
            f'<br/><span class="caption">{html.escape(alt)} ({shown})</span>')


def render_link_close(self, tokens, idx, options, env) -> str:
    opening = next(t for t in reversed(tokens[:idx]) if t.type == "link_open")
    href = str(opening.attrGet("href") or "")
    return f' <span class="caption">({html.escape(unquote(href))})</span>' if href else ""


@dataclass
class Report:
    preamble: str  # the markdown before the first question's heading
    sections: dict  # question number -> its markdown, without its heading
    headings: dict  # question number -> the report's own heading text


def split_report(text: str, questions: list[Question]) -> Report:
    """A report's markdown cut at its questions' headings (level 1 or 2, "K. title" or the
    title alone); what follows a heading that is no question stays with the section before."""
    lines = text.splitlines(keepends=True)
    by_title = {normal(q.title): q.number for q in questions}
    numbers = {q.number for q in questions}
    cuts = []  # (line of the heading, the line after it, question number)
    tokens = MarkdownIt("commonmark").enable("table").parse(text)
    for token, inline in zip(tokens, tokens[1:]):
        if token.type != "heading_open" or token.tag not in ("h1", "h2") or not token.map:
            continue
        match = HEADING.match(inline.content)
        number = int(match.group(1)) if match and int(match.group(1)) in numbers else \
            by_title.get(normal(match.group(2) if match else inline.content))
        if number is not None:
            cuts.append((token.map[0], token.map[1], number, inline.content.strip()))
    preamble = "".join(lines[:cuts[0][0]] if cuts else lines)
    sections, headings = {}, {}
    for i, (_, end, number, heading) in enumerate(cuts):
        stop = cuts[i + 1][0] if i + 1 < len(cuts) else len(lines)
        sections[number] = sections.get(number, "") + "".join(lines[end:stop])
        headings.setdefault(number, heading)
    return Report(preamble, sections, headings)


def normal(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", text.lower()).split())


def templates(questions: list[Question]) -> dict[str, Report]:
    """The report templates problemN/REPORT.md of this repository, cut into sections."""
    out = {}
    for problem in PROBLEMS:
        path = REPO_ROOT / problem / REPORT
        text = path.read_text() if path.is_file() else ""
        out[problem] = split_report(text, [q for q in questions if q.problem == problem])
    return out


def unchanged(answer: str, template: str | None) -> bool:
    """Whether a section is empty or the template's own, up to spaces and blank lines."""
    def lines(text):
        return [" ".join(line.split()) for line in text.splitlines() if line.strip()]
    return not lines(answer) or (template is not None and lines(answer) == lines(template))


# ------------------------------------------------------------------------------- layout
@dataclass
class Unit:
    """What starts on a new page: the cover, a problem's preamble, or a question."""
    key: str  # "cover", "problem1", "problem1_q3"
    label: str  # the footer's and bookmark's text
    html: str
    pages: int
    notes: list = field(default_factory=list)


def layout(html_text: str, archive, scale: float, most: int) -> tuple[bytes, int, bool]:
    """(the PDF, its pages, whether it all fit) of html on pages scale times the real size,
    stopping after most pages."""
    rect = pymupdf.Rect(0, 0, WIDTH * scale, HEIGHT * scale)
    where = pymupdf.Rect(MARGIN, MARGIN, WIDTH - MARGIN, HEIGHT - MARGIN - FOOTER) * scale
    story = pymupdf.Story(html_text, user_css=CSS, archive=archive)
    buffer = io.BytesIO()
    writer = pymupdf.DocumentWriter(buffer)
    more, count = 1, 0
    while more and count < most:
        device = writer.begin_page(rect)
        more, _ = story.place(where)
        story.draw(device)
        writer.end_page()
        count += 1
    writer.close()
    return buffer.getvalue(), count, not more


def fixed_pages(unit: Unit, archive) -> tuple[bytes, float]:
    """(a PDF of unit on exactly unit.pages pages or fewer, the scale it was drawn at): its
    content at full size where it fits, else the least scale (found by halving) at which it
    fits, drawn on larger pages that are shrunk onto the real ones."""
    pdf, _, fits = layout(unit.html, archive, 1.0, unit.pages)
    if fits:
        return pdf, 1.0
    low, high = 1.0, 2.0
    while high < MAX_SCALE and not layout(unit.html, archive, high, unit.pages)[2]:
        low, high = high, min(2 * high, MAX_SCALE)
    for _ in range(7):
        middle = (low + high) / 2
        low, high = (low, middle) if layout(unit.html, archive, middle, unit.pages)[2] \
            else (middle, high)
    pdf, _, fits = layout(unit.html, archive, high, unit.pages)
    if not fits:
        unit.notes.append(f"CUT: longer than {unit.pages} pages even at 1/{MAX_SCALE:g}")
    return pdf, high


def assemble(units: list[Unit], archive) -> "pymupdf.Document":
    """The PDF: each unit on its fixed pages, a footer on each page, a bookmark per unit."""
    doc, toc = pymupdf.open(), []
    for unit in units:
        pdf, scale = fixed_pages(unit, archive)
        part = pymupdf.open("pdf", pdf)
        first = doc.page_count
        toc.append([1, unit.label, first + 1])
        for i in range(unit.pages):
            page = doc.new_page(width=WIDTH, height=HEIGHT)
            if i < part.page_count:
                page.show_pdf_page(page.rect, part, i)
            footer = f"{unit.label}: page {i + 1} of {unit.pages}"
            if scale > 1:
                footer += f" (shrunk to {100 / scale:.0f}% to fit its pages)"
            elif i >= part.page_count:
                footer += " (nothing more for this question)"
            page.insert_text((MARGIN, HEIGHT - MARGIN / 2), ascii_text(footer), fontsize=8,
                             color=(0.3, 0.3, 0.3))
        if scale > 1:
            unit.notes.append(f"shrunk to {100 / scale:.0f}% to fit its {unit.pages} pages")
    doc.set_toc(toc)
    return doc


def ascii_text(text: str) -> str:
    return text.encode("ascii", "replace").decode()


# ------------------------------------------------------------------------- a submission
def question_label(question: Question) -> str:
    return f"Problem {question.problem[-1]}, question {question.number}"


def no_answer(why: str) -> str:
    return f'<p class="noanswer">NO ANSWER</p><p class="reason">{html.escape(why)}</p>'


def submission_units(submission: Path, questions: list[Question], pages: int,
                     blank: dict[str, Report], md) -> tuple[list[Unit], object]:
    """The units of one submission folder (the cover last: it lists what the others noted),
    and the archive of its figures."""
    archive = pymupdf.Archive()
    folder = submission.resolve()
    root = find_root(folder)
    if root is not None and not root.resolve().is_relative_to(folder):
        root = None  # a link out of the submission
    units = []
    for problem in PROBLEMS:
        mine = [q for q in questions if q.problem == problem]
        number = problem[-1]
        report, why = read_report(folder, root, problem)
        if report is None:
            units.append(Unit(problem, f"Problem {number}, before question 1",
                              f"<h1>Problem {number}: report</h1>" + no_answer(why), 1,
                              [f"{problem}/{REPORT}: {why}"]))
            units += [Unit(q.key, question_label(q), heading_html(q) + no_answer(why), pages)
                      for q in mine]
            continue
        text, figures = report
        figures.archive = archive
        parsed = split_report(text, mine)
        env = {"figures": figures, "notes": []}
        units.append(Unit(problem, f"Problem {number}, before question 1",
                          md.render(parsed.preamble, env) or no_answer("nothing before "
                                                                       "question 1"),
                          1, env["notes"]))
        for q in mine:
            env = {"figures": figures, "notes": []}
            if q.number not in parsed.sections:
                body = no_answer(f"{problem}/{REPORT} has no section "
                                 f"\"## {q.number}. {q.title}\"")
                env["notes"].append("no section: NO ANSWER")
            else:
                answer = parsed.sections[q.number]
                body = md.render(answer, env)
                if normal(parsed.headings[q.number]) != normal(f"{q.number}. {q.title}"):
                    body = (f'<p class="theirs">The report\'s heading: '
                            f'{html.escape(parsed.headings[q.number])}</p>' + body)
                if unchanged(answer, blank[problem].sections.get(q.number)):
                    body = no_answer("the section is empty or as the template left it") + body
                    env["notes"].append("empty or the template's: NO ANSWER")
            units.append(Unit(q.key, question_label(q), heading_html(q) + body, pages,
                              env["notes"]))
    return units, archive


def heading_html(question: Question) -> str:
    return (f'<p class="question">{question_label(question)}: {html.escape(question.title)} '
            f'<span class="points">({points_phrase(shown(question.points))})</span></p>')


def read_report(folder: Path, root: Path | None, problem: str):
    """((the report's text, its Figures), "") or (None, why there is none)."""
    if root is None:
        return None, "no problem1/, problem2/ or problem3/ folder in the submission"
    directory = root / problem
    try:
        resolved = directory.resolve()
    except (OSError, RuntimeError):
        return None, f"{problem}/ cannot be resolved"
    if not directory.is_dir() or not resolved.is_relative_to(folder):
        return None, f"{problem}/ is missing"
    path = resolved / REPORT
    if not path.exists() and not path.is_symlink():
        return None, f"{problem}/{REPORT} is missing"
    data = read_regular(path, REPORT_BYTES)
    if data is None:
        return None, (f"{problem}/{REPORT} is not a regular file of at most "
                      f"{REPORT_BYTES // 2**20} MiB (a link is not read)")
    return (data.decode("utf-8", errors="replace"), Figures(resolved, None)), ""


def cover_html(name: str, units: list[Unit]) -> str:
    rows, page = [], 2
    for unit in units:
        notes = "; ".join(unit.notes)
        rows.append(f"<tr><td>{html.escape(unit.label)}</td><td>{page}"
                    f"{'-' + str(page + unit.pages - 1) if unit.pages > 1 else ''}</td>"
                    f"<td>{html.escape(notes)}</td></tr>")
        page += unit.pages
    return (f'<p class="cover">Written answers: {html.escape(name)}</p>'
            "<p>The three problemN/REPORT.md of the submission; every question on its own "
            "pages, the same pages in every student's PDF.</p>"
            "<table><tr><th>section</th><th>pages</th><th>noted</th></tr>"
            + "".join(rows) + "</table>")


def write_pdf(submission: Path, out: Path, questions: list[Question], pages: int,
              blank: dict[str, Report], md) -> tuple[int, list[Unit]]:
    units, archive = submission_units(submission, questions, pages, blank, md)
    doc = assemble(units, archive)  # first: it notes what was shrunk, for the cover
    cover = Unit("cover", f"Cover: {submission.name}", cover_html(submission.name, units), 1)
    cover_doc = assemble([cover], archive)
    cover_doc.insert_pdf(doc)
    toc = [[1, cover.label, 1]] + [[level, label, page + 1]
                                   for level, label, page in doc.get_toc()]
    cover_doc.set_toc(toc)
    cover_doc.set_metadata({"title": f"Written answers: {submission.name}",
                            "creator": "course.grading.written"})
    atomic_write_bytes(out / f"{submission.name}.pdf", cover_doc.tobytes(garbage=3,
                                                                         deflate=True))
    return cover_doc.page_count, units


def outline_rows(questions: list[Question], pages: int) -> list[dict]:
    """The pages of each unit, the same in every PDF (1-based)."""
    rows, page = [{"section": "cover", "title": "the submission's name", "points": "",
                   "first_page": 1, "last_page": 1}], 2
    for problem in PROBLEMS:
        rows.append({"section": problem, "title": "before question 1", "points": "",
                     "first_page": page, "last_page": page})
        page += 1
        for q in (q for q in questions if q.problem == problem):
            rows.append({"section": q.key, "title": q.title, "points": shown(q.points),
                         "first_page": page, "last_page": page + pages - 1})
            page += pages
    return rows


def pages_a_question(text: str) -> int:
    value = int(text) if text.isdigit() else 0
    if not 1 <= value <= 20:
        raise argparse.ArgumentTypeError(f"{text!r}: give 1 to 20 pages a question")
    return value


@script
def main(argv=None) -> int:
    parser = ArgumentParser(__doc__)
    parser.add_argument("submissions", type=Path,
                        help="a folder of submission folders, as grade --csv takes")
    parser.add_argument("--out", type=Path, required=True,
                        help="the folder of the PDFs (made if missing)")
    parser.add_argument("--pages", type=pages_a_question, default=PAGES,
                        help=f"pages per question, 1-20 (default {PAGES})")
    args = parser.parse_args(argv)
    if pymupdf is None:
        fail(f"the renderer is not installed ({MISSING_RENDERER}): "
             "pip install -r course/requirements.txt")
    if not args.submissions.exists():
        fail(f"{args.submissions}: no such folder: give the folder of submission folders")
    if not args.submissions.is_dir():
        fail(f"{args.submissions} is not a folder: give the folder of submission folders")
    if args.out.exists() and not args.out.is_dir():
        fail(f"--out {args.out} is a file: give a folder for the PDFs")
    if args.out.resolve().is_relative_to(args.submissions.resolve()):
        fail(f"--out {args.out} is inside {args.submissions}: it would be read as a "
             "submission; give a folder elsewhere")
    submissions = sorted(p for p in args.submissions.iterdir() if p.is_dir())  # as --csv
    if not submissions:
        fail(f"{args.submissions} has no submission folders")
    questions = written_questions()
    blank, md = templates(questions), markdown()
    args.out.mkdir(parents=True, exist_ok=True)
    for submission in submissions:
        count, units = write_pdf(submission, args.out, questions, args.pages, blank, md)
        noted = sum(1 for unit in units if unit.notes)
        print(f"{submission.name}: {count} pages" + (f", {noted} sections with notes (see "
                                                      "its cover)" if noted else ""),
              flush=True)
    rows = outline_rows(questions, args.pages)
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    atomic_write_text(args.out / OUTLINE, text.getvalue())
    print(f"wrote {len(submissions)} PDFs of {rows[-1]['last_page']} pages each in {args.out} "
          f"and {args.out / OUTLINE} (each question's pages, the same in every PDF)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
