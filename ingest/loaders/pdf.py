"""PDF: pages (pypdf), two-column pages read column by column and the outline as the heading path (else
lines in larger type; both in pdf_layout.py), running headers and footers kept out of passages, hyphenated
words whole, printed page labels, hard-wrapped lines unwrapped."""

from __future__ import annotations

import bisect
import contextlib
import dataclasses
import io
import logging
import re
import threading
import warnings
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from spanqa.errors import first_line
from spanqa.ingest.loaders.base import HEADING, RUNNING, TEXT, Block, LoadedText, LoadError, PageSpan
from spanqa.ingest.loaders.pdf_layout import Line, PageDrawing, column_text, heading_lines
from spanqa.ingest.loaders.text import _normalize_pages, unwrap_lines

logger = logging.getLogger(__name__)

_pypdf_quiet_lock = threading.Lock()
_pypdf_quiet_depth = 0
_pypdf_saved_level = logging.NOTSET


@contextlib.contextmanager
def _quiet_pypdf() -> Iterator[None]:
    """Silence pypdf's logging and warnings (broken files make it very chatty) for the duration."""
    global _pypdf_quiet_depth, _pypdf_saved_level
    pypdf_logger = logging.getLogger("pypdf")
    with _pypdf_quiet_lock:
        if _pypdf_quiet_depth == 0:
            _pypdf_saved_level = pypdf_logger.level
            pypdf_logger.setLevel(logging.CRITICAL + 1)
        _pypdf_quiet_depth += 1
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        with _pypdf_quiet_lock:
            _pypdf_quiet_depth -= 1
            if _pypdf_quiet_depth == 0:
                pypdf_logger.setLevel(_pypdf_saved_level)


def _pdf_pages(
    data: bytes,
) -> tuple[list[str], list[tuple[int, int, str]], list[str] | None, list[list[Line]]]:
    """The text of each page of a PDF, its outline as (page index, level, title) in page order, its printed
    page labels where it declares them, and each page's lines with their type size."""
    from pypdf import PdfReader
    from pypdf.errors import DependencyError, FileNotDecryptedError, WrongPasswordError

    with _quiet_pypdf():
        try:
            reader = PdfReader(io.BytesIO(data), strict=False)
            if reader.is_encrypted:
                try:
                    decrypted = reader.decrypt("")
                except DependencyError as exc:
                    raise LoadError(f"encrypted PDF (cannot decrypt: {first_line(exc)})") from exc
                except (FileNotDecryptedError, WrongPasswordError) as exc:
                    raise LoadError("encrypted PDF") from exc
                if not decrypted:  # PasswordType.NOT_DECRYPTED == 0
                    raise LoadError("encrypted PDF")
            pages = list(reader.pages)
        except LoadError:
            raise
        except (FileNotDecryptedError, WrongPasswordError) as exc:
            raise LoadError("encrypted PDF") from exc
        except Exception as exc:  # pypdf raises many types (and KeyError, ValueError...) on broken files
            raise LoadError(f"corrupt PDF: {first_line(exc)}") from exc
        if not pages:
            raise LoadError("corrupt PDF: no pages")
        outline = _pdf_outline(reader)
        texts: list[str] = []
        lines: list[list[Line]] = []
        failed = 0
        for number, page in enumerate(pages, start=1):
            drawing = PageDrawing()  # where each piece of text stands: a tuple a piece, cheap
            try:
                text = page.extract_text(visitor_text=drawing) or ""
                width = float(page.mediabox.width)
            except Exception as exc:
                failed += 1
                logger.warning("PDF page %d: text extraction failed: %s", number, first_line(exc))
                text, width = "", 0.0
            texts.append(column_text(drawing, width) or text)
            # Type sizes matter only for a PDF without bookmarks (its headings).
            lines.append(drawing.lines() if not outline else [])
        if failed == len(pages):
            raise LoadError("corrupt PDF: text extraction failed on every page")
        labels = _page_labels(reader)
    return texts, outline, labels, lines


def _page_labels(reader: Any) -> list[str] | None:
    """The printed page labels a PDF declares ("xii", "42", "A-3"), one per page; None when it declares none
    (pypdf would then give the physical numbers) or they cannot be read."""
    try:
        if "/PageLabels" not in reader.root_object:
            return None
        labels = [str(label) for label in reader.page_labels]
    except Exception as exc:
        logger.debug("PDF page labels unreadable: %s", first_line(exc))
        return None
    return labels if len(labels) == len(reader.pages) else None


def _pdf_outline(reader: Any) -> list[tuple[int, int, str]]:
    """The bookmarks of a PDF as (page index, level, title), sorted by page; [] when it has none or they
    cannot be read (a broken outline costs the headings, never the file)."""
    entries: list[tuple[int, int, str]] = []
    try:
        stack: list[tuple[Any, int]] = [(reader.outline, 1)]
        while stack and len(entries) < 10_000:
            items, level = stack.pop()
            for item in reversed(items):
                if isinstance(item, list):
                    stack.append((item, level + 1))
                    continue
                page = reader.get_destination_page_number(item)
                title = " ".join(str(item.title or "").split())
                if page is not None and page >= 0 and title:
                    entries.append((page, level, title))
    except Exception as exc:
        logger.debug("PDF outline unreadable: %s", first_line(exc))
        return []
    return sorted(entries, key=lambda entry: entry[0])


#: What text extraction gives for what a reader sees as plain letters: ligatures as their letters, a
#: no-break space as a space; a soft hyphen (a place a word may break, printed only where it does) is dropped.
_PLAIN = str.maketrans(
    {
        "\ufb00": "ff",
        "\ufb01": "fi",
        "\ufb02": "fl",
        "\ufb03": "ffi",
        "\ufb04": "ffl",
        "\ufb05": "st",
        "\ufb06": "st",
        "\u00a0": " ",
        "\u00ad": "",
    }
)
#: A word broken at a line end: its head, the hyphen, the break, its tail (and the spaces after the tail).
_BROKEN_WORD = re.compile(r"(\w+)([-\u00ad])[^\S\n]*\n[^\S\n]*([^\W\d_]\S*)[^\S\n]*(\n?)")
_WORD_START = re.compile(r"\w+")
_WORDS = re.compile(r"\w+(?:-\w+)*")


def plain_page_texts(pages: list[str]) -> list[str]:
    """Pages as a person reads them: a word hyphenated at a line end whole, ligatures and no-break spaces as
    plain characters.

    A hyphen at a line end joins the word's halves ("configu-" + "ration") unless the tail starts with a
    capital or the document writes the hyphenated form ("command-line") more often than the joined one; a
    soft hyphen always joins. The line break moves after the joined word, so lines stay lines. Answers and
    offsets point into the text this returns.
    """
    vocabulary = Counter(w.lower() for page in pages for w in _WORDS.findall(page))

    def join(match: re.Match[str]) -> str:
        head, hyphen, tail, _ = match.groups()  # the tail runs to the next space: "ration," moves whole
        word = _WORD_START.match(tail)
        rest = word.group(0) if word else tail
        keep = hyphen == "-" and (
            tail[0].isupper()
            or head[-1].isdigit()
            or vocabulary[f"{head}-{rest}".lower()] > vocabulary[f"{head}{rest}".lower()]
        )
        return f"{head}{'-' if keep else ''}{tail}\n"

    return [_BROKEN_WORD.sub(join, page).translate(_PLAIN) for page in pages]


#: A running header or footer is a short line.
RUNNING_LINE_CHARS = 100
#: A line recurring at the top or bottom of at least this many pages (digits aside) runs through the document.
RUNNING_LINE_PAGES = 3
_NUMBER = re.compile(r"\d+")
_PAGE_NUMBER = re.compile(r"^\s*(\d{1,4})\b|\b(\d{1,4})\s*$")
_TRAILING_NUMBER = re.compile(r"(?!)()|\b(\d{1,4})\s*$")
_ROMAN = re.compile(r"^[ivxlc]{1,7}$", re.IGNORECASE)


def running_lines(text: str, pages: list[PageSpan]) -> list[tuple[int, int]]:
    """The running headers and footers of a PDF's pages, as (start, end) spans of ``text``.

    A page's first or last line is running when it is short and either carries the page's printed number (a
    number at its start or end that follows the page order, as most pages' do: "Chapter 3: Basic Shell
    Features 42", "17", "xii") or recurs, digits aside, at the same end of at least ``RUNNING_LINE_PAGES``
    pages (a manual's title in every footer).
    """
    short = _end_lines(text, pages)
    numbers, shift = _numbering(text, short, len(pages))
    recurring: dict[tuple[str, str], int] = {}
    for _, where, start, end in short:
        key = (where, _NUMBER.sub("#", text[start:end].strip().lower()))
        recurring[key] = recurring.get(key, 0) + 1
    spans = []
    for index, where, start, end in short:
        line = text[start:end].strip()
        by_number = shift is not None and numbers.get((index, where)) == index - shift
        last_word = line.split()[-1] if line else ""
        by_roman = shift is not None and index < shift and bool(_ROMAN.match(last_word))
        key = (where, _NUMBER.sub("#", line.lower()))
        if by_number or by_roman or recurring[key] >= RUNNING_LINE_PAGES:
            spans.append((start, end))
    return sorted(spans)


def printed_page_numbers(text: str, pages: list[PageSpan]) -> list[str | None] | None:
    """The number printed on each page, where the running lines number the pages in order (page index minus a
    fixed shift); None for a page before the first numbered one; None when the pages are not numbered."""
    _, shift = _numbering(text, _end_lines(text, pages), len(pages))
    if shift is None:
        return None
    return [str(index - shift) if index - shift >= 1 else None for index in range(len(pages))]


def _end_lines(text: str, pages: list[PageSpan]) -> list[tuple[int, str, int, int]]:
    """The short first and last lines of the pages, as (page index, "top"/"bottom", start, end)."""
    ends: list[tuple[int, str, int, int]] = []
    for index, page in enumerate(pages):
        body = text[page.char_start : page.char_end]
        if "\n" not in body:
            continue  # a page of one line is its content, whatever it looks like
        first_end = body.index("\n")
        last_start = body.rindex("\n") + 1
        ends.append((index, "top", page.char_start, page.char_start + first_end))
        ends.append((index, "bottom", page.char_start + last_start, page.char_end))
    return [e for e in ends if 0 < e[3] - e[2] <= RUNNING_LINE_CHARS]


def _numbering(
    text: str, short: list[tuple[int, str, int, int]], page_count: int
) -> tuple[dict[tuple[int, str], int], int | None]:
    """The number at the start or end of each short end line, and the shift from page index to printed
    number that most numbered pages follow (None when too few do for the pages to count as numbered)."""
    shifts: dict[int, int] = {}
    numbers: dict[tuple[int, str], int] = {}
    for index, where, start, end in short:
        line = text[start:end]
        # A footnote opens with its number: at the bottom, only a number at the end is a page's.
        match = (_PAGE_NUMBER if where == "top" else _TRAILING_NUMBER).search(line)
        if match:
            number = int(match.group(1) or match.group(2))
            numbers[(index, where)] = number
            shifts[index - number] = shifts.get(index - number, 0) + 1
    shift, count = max(shifts.items(), key=lambda kv: kv[1], default=(0, 0))
    numbered = count >= max(RUNNING_LINE_PAGES, page_count // 4)
    return numbers, shift if numbered else None


@dataclass(frozen=True)
class InlineHeading:
    """A heading found inside a page (a line in larger type): ``text[char_start:char_end]`` at ``level``."""

    char_start: int
    char_end: int
    level: int
    title: str


def _page_blocks(
    text: str,
    pages: list[PageSpan],
    outline: list[tuple[int, int, str]],
    running: Sequence[tuple[int, int]] = (),
    inline: Sequence[InlineHeading] = (),
) -> list[Block]:
    """Blocks of each non-empty page, titled by the PDF bookmarks at or before it (or by the ``inline``
    headings above them); its ``running`` lines (headers and footers) are blocks of their own that no
    passage holds, and an inline heading is a heading block."""
    cuts: list[tuple[int, int, InlineHeading | None]] = sorted(
        [(a, b, None) for a, b in running] + [(h.char_start, h.char_end, h) for h in inline],
        key=lambda cut: (cut[0], cut[1]),
    )
    blocks: list[Block] = []
    headings: list[tuple[int, str]] = []

    def enter(level: int, title: str) -> None:
        while headings and headings[-1][0] >= level:
            headings.pop()
        headings.append((level, title))

    entry = 0
    for index, page in enumerate(pages):
        while entry < len(outline) and outline[entry][0] <= index:
            enter(outline[entry][1], outline[entry][2])
            entry += 1
        if page.char_end <= page.char_start:
            continue
        start = page.char_start
        for cut_start, cut_end, found in cuts[bisect.bisect_left(cuts, (page.char_start, 0)) :]:
            if cut_start >= page.char_end:
                break
            if cut_start < start:
                continue  # inside a cut already taken (a heading line that also runs through the document)
            heading = tuple(t for _, t in headings)
            body_end = len(text[start:cut_start].rstrip()) + start
            if body_end > start:
                blocks.append(Block(start, body_end, TEXT, heading))
            blocks.append(Block(cut_start, cut_end, RUNNING if found is None else HEADING, heading))
            if found is not None:
                enter(found.level, found.title)
            start = cut_end
            while start < page.char_end and text[start].isspace():
                start += 1
        if page.char_end > start:
            blocks.append(Block(start, page.char_end, TEXT, tuple(t for _, t in headings)))
    return blocks


def _inline_headings(
    text: str, pages: list[PageSpan], lines: list[list[Line]], running: Sequence[tuple[int, int]]
) -> list[InlineHeading]:
    """The lines set in larger type, found in the pages' text (a line not found, or one that runs through
    the document as a header, is left out)."""
    found: list[InlineHeading] = []
    taken = sorted(running)
    for page, page_headings in zip(pages, heading_lines(lines), strict=True):
        at = page.char_start
        for level, title in page_headings:
            pattern = r"\s+".join(re.escape(word) for word in title.split())
            match = re.compile(pattern).search(text, at, page.char_end)
            if match is None:
                continue
            start, end = match.span()
            where = bisect.bisect_right(taken, (start, len(text))) - 1
            if where >= 0 and taken[where][0] <= start < taken[where][1]:
                continue
            found.append(InlineHeading(start, end, level, title))
            at = end
    return found


def load(data: bytes) -> LoadedText:
    """A PDF's pages as a person reads them (see ``plain_page_texts``), titled by its outline, its running
    lines set apart, its hard-wrapped lines unwrapped; each page labelled as printed where that is known (the
    labels the PDF declares, else the numbers its running lines print)."""
    page_texts, outline, labels, page_lines = _pdf_pages(data)
    text, pages = _normalize_pages(plain_page_texts(page_texts))
    printed: Sequence[str | None] | None = labels or printed_page_numbers(text, pages)
    if printed is not None:
        pages = [dataclasses.replace(page, label=label) for page, label in zip(pages, printed, strict=True)]
    running = running_lines(text, pages)
    # Without bookmarks, the lines set in larger type are the headings.
    inline = [] if outline else _inline_headings(text, pages, page_lines, running)
    blocks = _page_blocks(text, pages, outline, running, inline)
    return LoadedText(unwrap_lines(text, blocks), "pdf", pages, blocks=blocks)
