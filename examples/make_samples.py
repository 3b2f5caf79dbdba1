"""Regenerate the sample documents in ``examples/docs/`` from the SQuAD v1.1 dev set, deterministically.

Texts: the Stanford Question Answering Dataset (SQuAD v1.1, Rajpurkar et al., 2016), licensed CC BY-SA 4.0;
the passages come from Wikipedia articles (CC BY-SA). Needs reportlab (a dev dependency) for the PDF.

Usage (from the repository root):
    python examples/make_samples.py [path/to/squad-v1.1-dev-public.json]
"""

from __future__ import annotations

import argparse
import html
import io
import json
import re
import zipfile
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATASET = REPO_ROOT / ".." / "shared" / "datasets" / "squad-v1.1-dev-public.json"
OUT_DIR = Path(__file__).resolve().parent / "docs"
FIXED_TIME = datetime(
    2016, 6, 16, tzinfo=UTC
)  # SQuAD v1.1's release year; any fixed date keeps builds identical

# (SQuAD article title, output format, number of leading paragraphs)
SAMPLES: list[tuple[str, str, int]] = [
    ("Super_Bowl_50", "txt", 10),
    ("Apollo_program", "md", 8),
    ("Amazon_rainforest", "html", 8),
    ("Black_Death", "pdf", 10),
    ("Oxygen", "docx", 8),
]


def display_title(title: str) -> str:
    """SQuAD's article title (Wikipedia's URL form) as text: ``Super_Bowl_50`` -> ``Super Bowl 50``."""
    return title.replace("_", " ")


def slug(title: str) -> str:
    """A file-name stem for an article title: ``Super_Bowl_50`` -> ``super_bowl_50``."""
    return re.sub(r"[^a-z0-9]+", "_", title.lower()).strip("_")


def write_txt(path: Path, title: str, paragraphs: list[str]) -> None:
    path.write_text("\n\n".join([title, *paragraphs]) + "\n", encoding="utf-8")


def _escape_markdown(text: str) -> str:
    """Backslash-escape what Markdown would read as markup, so the rendered text is the paragraph verbatim."""
    text = re.sub(r"([\\`*_\[\]<>&|~])", r"\\\1", text)
    return re.sub(r"^([#+\-=>]|\d+[.)])", r"\\\1", text)


def write_md(path: Path, title: str, paragraphs: list[str]) -> None:
    blocks = [f"# {_escape_markdown(title)}", *(_escape_markdown(p) for p in paragraphs)]
    path.write_text("\n\n".join(blocks) + "\n", encoding="utf-8")


def write_html(path: Path, title: str, paragraphs: list[str]) -> None:
    body = "\n".join(f"  <p>{html.escape(p, quote=False)}</p>" for p in paragraphs)
    page = (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n'
        "<head>\n"
        '  <meta charset="utf-8">\n'
        f"  <title>{html.escape(title)}</title>\n"
        "</head>\n"
        "<body>\n"
        f"  <h1>{html.escape(title)}</h1>\n"
        f"{body}\n"
        "</body>\n"
        "</html>\n"
    )
    path.write_text(page, encoding="utf-8")


def write_pdf(path: Path, title: str, paragraphs: list[str]) -> None:
    from reportlab.lib.pagesizes import A4
    from reportlab.lib.styles import getSampleStyleSheet
    from reportlab.lib.units import cm
    from reportlab.platypus import Paragraph, SimpleDocTemplate, Spacer

    styles = getSampleStyleSheet()
    body = styles["BodyText"]
    body.fontSize = 11
    body.leading = 15
    story: list[object] = [Paragraph(html.escape(title), styles["Title"]), Spacer(1, 0.3 * cm)]
    for paragraph in paragraphs:
        story += [Paragraph(html.escape(paragraph, quote=False), body), Spacer(1, 0.2 * cm)]
    document = SimpleDocTemplate(
        str(path),
        pagesize=A4,
        leftMargin=2.5 * cm,
        rightMargin=2.5 * cm,
        topMargin=2.5 * cm,
        bottomMargin=2.5 * cm,
        title=title,
        author="Wikipedia contributors, via SQuAD v1.1 (CC BY-SA 4.0)",
        invariant=True,  # no timestamps or random document ids: identical bytes on every run
    )
    document.build(story)


def write_docx(path: Path, title: str, paragraphs: list[str]) -> None:
    import docx

    document = docx.Document()
    properties = document.core_properties
    properties.title = title
    properties.author = "Wikipedia contributors, via SQuAD v1.1 (CC BY-SA 4.0)"
    properties.last_modified_by = ""
    properties.created = FIXED_TIME
    properties.modified = FIXED_TIME
    properties.revision = 1
    document.add_heading(title, level=1)
    for paragraph in paragraphs:
        document.add_paragraph(paragraph)
    buffer = io.BytesIO()
    document.save(buffer)
    path.write_bytes(_fixed_zip_times(buffer.getvalue()))


def _fixed_zip_times(data: bytes) -> bytes:
    """Rewrite a zip with a fixed timestamp on every member (python-docx stamps the current time)."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as source, zipfile.ZipFile(out, "w") as target:
        for info in source.infolist():
            member = zipfile.ZipInfo(info.filename, date_time=(1980, 1, 1, 0, 0, 0))
            member.compress_type = zipfile.ZIP_DEFLATED
            member.external_attr = 0o644 << 16
            target.writestr(member, source.read(info.filename))
    return out.getvalue()


WRITERS: dict[str, Callable[[Path, str, list[str]], None]] = {
    "txt": write_txt,
    "md": write_md,
    "html": write_html,
    "pdf": write_pdf,
    "docx": write_docx,
}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("dataset", nargs="?", type=Path, default=DEFAULT_DATASET, help="SQuAD v1.1 JSON file")
    parser.add_argument("--out", type=Path, default=OUT_DIR, help="output folder (default: examples/docs)")
    args = parser.parse_args(argv)

    articles = {a["title"]: a for a in json.loads(args.dataset.read_text(encoding="utf-8"))["data"]}
    args.out.mkdir(parents=True, exist_ok=True)
    for title, fmt, count in SAMPLES:
        paragraphs = [p["context"] for p in articles[title]["paragraphs"][:count]]
        path = args.out / f"{slug(title)}.{fmt}"
        WRITERS[fmt](path, display_title(title), paragraphs)
        shown = path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path
        print(f"{shown}  ({path.stat().st_size:,} bytes, {count} paragraphs of {title})")


if __name__ == "__main__":
    main()
