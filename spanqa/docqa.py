"""Reader training pairs from reference documentation: questions written from a manual's own structure.

A reader trained on SQuAD's Wikipedia prose picks the wrong span in reference pages: another entry's value
when a passage holds several entries, the start of a description instead of an option's name. This module
writes SQuAD-format pairs from a manual's definition entries (``<dt>`` term, ``<dd>`` description), on the
passages spanqa itself cuts (the same loader, chunker at the default chunk sizes, and heading prefix the
reader reads at answer time):

- **default**: "What is the default value of shared_buffers?" -> the value after "The default is" in the
  entry's description;
- **which**: "Which configuration parameter sets the amount of memory ...?", "Which option dumps only the
  data?" -> the entry's name, from the description's first sentence when it opens with a verb ("Sets ...",
  imperative "Dump ...");
- **does**: "What does --data-only do?" -> a command-line option's short first sentence;
- **returns**: "What does os.getcwd() return?" -> what a function's description says it returns.

Only the questions' wording comes from templates; every answer is a span of the page, and every passage
holds the entries around it (the distractors the reader must learn to pass over). Usage, with Debian's
``postgresql-doc-15`` installed (never git's manual: that is the real-documents dev set):

    .venv/bin/python -m spanqa.docqa --root /usr/share/doc/postgresql-doc-15/html \
        --root /usr/share/doc/apache2-doc/manual/en --out /tmp/docqa.json \
        --mix ../shared/datasets/squad-v1.1-train.json --mix-questions 2000
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import re
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spanqa.ingest.chunker import ChunkSpan, chunk_blocks
from spanqa.ingest.loaders import ROW, TERM, TEXT, Block, LoadError, load_file
from spanqa.reader.answers import reader_input
from spanqa.settings import Settings
from spanqa.types import Passage

# Verbs a description opens with ("Sets ...", or imperative "Dump ...", "Return ..."), turned into "Which
# parameter sets ...?" / "Which option dumps ...?": the third-person forms.
WHICH_VERBS = frozenset(
    [
        "sets",
        "specifies",
        "controls",
        "enables",
        "disables",
        "determines",
        "causes",
        "selects",
        "reports",
        "shows",
        "makes",
        "limits",
        "allows",
        "turns",
        "forces",
        "prevents",
        "defines",
        "chooses",
        "gives",
        "indicates",
        "returns",
        "adjusts",
        "dumps",
        "outputs",
        "prints",
        "uses",
        "gets",
        "adds",
        "removes",
        "deletes",
        "writes",
        "reads",
        "opens",
        "closes",
        "converts",
        "computes",
        "runs",
        "starts",
        "stops",
        "includes",
        "excludes",
        "exits",
        "ignores",
        "keeps",
        "lists",
        "skips",
        "suppresses",
        "treats",
        "updates",
        "waits",
        "checks",
        "cleans",
        "copies",
        "moves",
        "builds",
        "searches",
        "sends",
        "stores",
        "changes",
        "applies",
        "raises",
        "creates",
        "displays",
        "sorts",
        "limits",
        "overrides",
        "disables",
        "emits",
        "passes",
        "generates",
        "tells",
        "marks",
        "records",
        "shows",
        "accepts",
        "omits",
        "assumes",
        "avoids",
        "enforces",
    ]
)
DEFAULT_VALUE = re.compile(
    r"(?:[Tt]he default(?: value)?(?: setting)? is|[Dd]efaults to|[Tt]he default is set to)\s+"
    r"(?P<value>[^\s.,;:()][^.;:()]{0,40}?)(?=[.,;(]\s|[.,;]?$|\s\()"
)
SENTENCE_END = re.compile(r"(?<=[a-z0-9)\]])\.(?:\s|$)")
IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*[A-Za-z0-9_]$")
# Words before a Python API entry's name ("exception os.error", "class dict(...)").
KEYWORDS = frozenset(
    {"exception", "class", "async", "abstractmethod", "classmethod", "staticmethod", "await"}
)
OPTION = re.compile(r"^--?[A-Za-z]")
# A directive's reference table (Apache's manual): "Description:", "Syntax:", "Default:" rows.
DIRECTIVE_SECTION = re.compile(r"^(?P<name>[A-Za-z][A-Za-z0-9]+) Directive$")
MAX_WHICH_WORDS = 28
MAX_DOES_WORDS = 14


@dataclass(frozen=True)
class Entry:
    """A definition entry: its term block, the entry's name within it, and its description blocks."""

    term: Block
    name_start: int
    name_end: int
    descriptions: tuple[Block, ...]


@dataclass(frozen=True)
class Pair:
    """One question with its answer, as offsets into the document text."""

    kind: str
    question: str
    answer_start: int
    answer_end: int
    needs: tuple[int, int]
    """Document span the passage must hold besides the answer (the entry's name, or the description a
    "which" question paraphrases), so the question is fair."""


def entry_name(text: str, term: Block) -> tuple[int, int] | None:
    """Where the entry's name lies in its term: a long option (``--data-only``), else the first word (the
    name of ``os.getcwd()``, less its arguments, after any ``class``/``exception`` keyword)."""
    raw = text[term.char_start : term.char_end]
    words = [(m.start(), m.group()) for m in re.finditer(r"[^\s,]+", raw)]
    while len(words) > 1 and words[0][1] in KEYWORDS:
        words = words[1:]
    if not words:
        return None
    longs = [(start, word) for start, word in words if word.startswith("--")]
    start, word = longs[0] if longs else words[0]
    word = re.split(r"[=\[(¶]", word, maxsplit=1)[0].rstrip(".:")
    if len(word) < 2:
        return None
    return term.char_start + start, term.char_start + start + len(word)


def entries(text: str, blocks: Sequence[Block]) -> Iterator[Entry]:
    """The definition entries of a document, each with the text blocks under its terms.

    Terms in a row name one entry ("-a", "--data-only"): the loader gives them one heading, the entry's;
    its name is taken from the long option among them, else from the first.
    """
    index = 0
    while index < len(blocks):
        block = blocks[index]
        index += 1
        if block.kind != TERM or not block.heading:
            continue
        entry = block.heading[-1]
        terms = [block]
        while index < len(blocks) and blocks[index].kind == TERM and blocks[index].heading == block.heading:
            terms.append(blocks[index])
            index += 1
        descriptions = []
        for later in blocks[index:]:
            if later.kind != TEXT or not later.heading or later.heading[-1] != entry:
                break
            descriptions.append(later)
        term = next((t for t in terms if text.startswith("--", t.char_start)), terms[0])
        name = entry_name(text, term)
        if name is not None and descriptions:
            yield Entry(term, name[0], name[1], tuple(descriptions))


def first_sentence(text: str, block: Block) -> tuple[int, int]:
    """The first sentence of a block, without its full stop."""
    body = text[block.char_start : block.char_end]
    end = SENTENCE_END.search(body)
    return block.char_start, block.char_start + (end.start() if end else len(body))


def third_person(word: str) -> str | None:
    """``sets`` for "Sets" or imperative "Set"; None for a word that is not a known opening verb."""
    lower = word.lower()
    if lower in WHICH_VERBS:
        return lower
    if lower.endswith(("s", "sh", "ch", "x", "z")):
        third = lower + "es"
    elif lower.endswith("y") and lower[-2:-1] not in "aeiou":
        third = lower[:-1] + "ies"
    else:
        third = lower + "s"
    return third if third in WHICH_VERBS else None


def pairs_of(text: str, entry: Entry, rng: random.Random) -> Iterator[Pair]:
    """The questions one entry answers."""
    name = text[entry.name_start : entry.name_end]
    term = text[entry.term.char_start : entry.term.char_end]
    option = bool(OPTION.match(name))
    if not option and not IDENTIFIER.match(name):
        return
    if option:
        noun = "option"
    elif text[entry.name_end : entry.name_end + 1] == "(":
        noun = "function"
    elif term.startswith(("exception", "class")):
        noun = term.split()[0]
    else:
        noun = rng.choice(["configuration parameter", "parameter", "setting"])
    where = (entry.name_start, entry.name_end)
    for block in entry.descriptions:
        body = text[block.char_start : block.char_end]
        for match in DEFAULT_VALUE.finditer(body):
            value = match.group("value").strip().strip("“”\"'")
            if not value or len(value.split()) > 6:
                continue
            start = block.char_start + body.index(value, match.start("value"))
            question = rng.choice(
                [
                    f"What is the default value of {name}?",
                    f"What is the default of {name}?",
                    f"What is {name} set to by default?",
                    f"By default, what is {name}?",
                ]
            )
            yield Pair("default", question, start, start + len(value), where)
            break
    start, end = first_sentence(text, entry.descriptions[0])
    words = text[start:end].split()
    if len(words) < 2 or not words[0][:1].isupper():
        return
    verb = third_person(words[0])
    if verb is not None and 4 <= len(words) <= MAX_WHICH_WORDS:
        # The passage must hold the description the question paraphrases, not only the name.
        yield Pair("which", f"Which {noun} {verb} {' '.join(words[1:])}?", *where, (start, end))
    if option and len(words) <= MAX_DOES_WORDS:
        yield Pair("does", f"What does {name} do?", start, end, where)
    if noun == "function" and words[0] in ("Return", "Returns") and 2 <= len(words) <= MAX_DOES_WORDS + 1:
        value = start + text[start:end].index(words[1])
        yield Pair("returns", f"What does {name}() return?", value, end, where)


def directive_pairs(text: str, blocks: Sequence[Block], rng: random.Random) -> Iterator[Pair]:
    """The questions a directive's reference table answers: its default, and which directive does what."""
    rows: dict[str, dict[str, Block]] = {}
    for block in blocks:
        if block.kind != ROW or not block.heading:
            continue
        section = DIRECTIVE_SECTION.match(block.heading[-1])
        label = text[block.char_start : block.char_end].split("\n", 1)[0].rstrip(":")
        if section:
            rows.setdefault(section.group("name"), {}).setdefault(label, block)
    for name, table in rows.items():
        syntax = table.get("Syntax")
        if syntax is None:
            continue
        body = text[syntax.char_start : syntax.char_end]
        at = body.find("\n" + name)
        if at < 0:
            continue
        where = (syntax.char_start + at + 1, syntax.char_start + at + 1 + len(name))
        default = table.get("Default")
        if default is not None:
            row = text[default.char_start : default.char_end]
            head = "Default:\n" + name + " "
            value = row[len(head) :].strip()
            if row.startswith(head) and value and len(value.split()) <= 4:
                start = default.char_start + row.index(value, len(head))
                question = rng.choice(
                    [f"What is the default value of {name}?", f"What is the default of the {name} directive?"]
                )
                named = default.char_start + len("Default:\n")  # the row names its directive
                yield Pair("default", question, start, start + len(value), (named, named + len(name)))
        description = table.get("Description")
        if description is not None:
            words = text[description.char_start : description.char_end].split("\n", 1)[-1].split()
            if 3 <= len(words) <= MAX_WHICH_WORDS and words[0].lower() in WHICH_VERBS:
                rest = " ".join([words[0].lower(), *words[1:]]).rstrip(".")
                said = (description.char_start, description.char_end)
                yield Pair("which", f"Which directive {rest}?", *where, said)


def squad_paragraphs(
    path: Path, tokenizer: Any, rng: random.Random, *, negatives: float = 0.0
) -> Iterator[dict[str, Any]]:
    """SQuAD-format paragraphs (context and questions) for one page, one per chunk that answers any.

    With ``negatives`` > 0, about that many questions per answerable one are also asked of a nearby passage
    of the same page that lacks the answer (SQuAD 2.0's ``is_impossible``): the neighbouring entry whose
    value a reader trained on prose gives instead.
    """
    try:
        loaded = load_file(path)
    except LoadError:
        return
    text = loaded.text
    spans = chunk_blocks(
        text,
        loaded.blocks,
        tokenizer,
        chunk_tokens=Settings.chunk_tokens,
        overlap_tokens=Settings.chunk_overlap,
    )
    pairs = [pair for entry in entries(text, loaded.blocks) for pair in pairs_of(text, entry, rng)]
    pairs.extend(directive_pairs(text, loaded.blocks, rng))
    # What the reader reads of each passage, as it reads it at answer time: one owner for where an answer
    # may lie (the title and the blocks, never the heading path).
    read = [reader_input(_passage(text, span)) for span in spans]
    qas: dict[int, list[dict[str, Any]]] = {}
    for pair in pairs:
        for number, passage in enumerate(read):
            at = passage.answer_offset(pair.answer_start, pair.answer_end)
            if at is None or passage.answer_offset(*pair.needs) is None:
                continue
            answer = text[pair.answer_start : pair.answer_end]
            key = f"{path.name}:{number}:{pair.kind}:{pair.question}"
            qa = {"question": pair.question, "kind": pair.kind}
            qas.setdefault(number, []).append(
                {"id": _qid(key), **qa, "answers": [{"text": answer, "answer_start": at}]}
            )
            if rng.random() < negatives:
                near = [n for n in (number - 2, number - 1, number + 1, number + 2) if 0 <= n < len(read)]
                rng.shuffle(near)
                for other in near:
                    if answer.lower() not in read[other].text.lower():
                        qas.setdefault(other, []).append(
                            {"id": _qid(key + ":none"), **qa, "answers": [], "is_impossible": True}
                        )
                        break
            break
    for number in sorted(qas):
        yield {"context": read[number].text, "qas": qas[number]}


def _passage(text: str, span: ChunkSpan) -> Passage:
    """The passage ingest would make of ``span`` (its segments relative to its start, as Chunk keeps them)."""
    title = text[span.title[0] : span.title[1]] if span.title else ""
    return Passage(
        chunk_id="",
        document_id="",
        path="",
        text=text[span.char_start : span.char_end],
        char_start=span.char_start,
        char_end=span.char_end,
        score=0.0,
        heading=span.heading,
        segments=tuple((a - span.char_start, b - span.char_start) for a, b in span.segments),
        title=title,
        title_start=span.title[0] if span.title else None,
    )


def _qid(key: str) -> str:
    return "docqa-" + hashlib.sha1(key.encode()).hexdigest()[:16]


def build(
    roots: Sequence[Path],
    *,
    mix: Path | None,
    mix_questions: int,
    per_page: int,
    seed: int,
    negatives: float = 0.0,
    model: str = Settings.retriever_model,
) -> dict[str, Any]:
    """The training file: documentation pairs, and SQuAD paragraphs mixed in so the reader keeps its prose.

    Args:
        roots: folders of HTML manuals.
        mix: a SQuAD-format file whose paragraphs are mixed in (None: none).
        mix_questions: about how many of its questions.
        per_page: at most this many questions per page (no manual page dominates).
        seed: for the templates' wording and the sample.
        negatives: unanswerable pairs per question, on a nearby passage of the same page.
        model: the retriever whose tokenizer cuts the passages (as ingest does).

    Returns:
        SQuAD-format data with ``version`` "spanqa-docqa".
    """
    from spanqa.retriever.encoder import SentenceEncoder

    rng = random.Random(seed)
    tokenizer = SentenceEncoder(model=model).tokenizer
    data = []
    for root in roots:
        for path in sorted(root.rglob("*.htm*")):
            paragraphs = list(squad_paragraphs(path, tokenizer, rng, negatives=negatives))
            rng.shuffle(paragraphs)
            kept, count = [], 0
            for paragraph in paragraphs:
                if count + len(paragraph["qas"]) > per_page:
                    continue
                kept.append(paragraph)
                count += len(paragraph["qas"])
            if kept:
                data.append({"title": f"{root.name}/{path.relative_to(root)}", "paragraphs": kept})
    if mix is not None:
        squad = json.loads(mix.read_text(encoding="utf-8"))["data"]
        pool = [(article["title"], p) for article in squad for p in article["paragraphs"]]
        rng.shuffle(pool)
        taken = 0
        by_title: dict[str, list[Any]] = {}
        for title, paragraph in pool:
            if taken >= mix_questions:
                break
            by_title.setdefault(title, []).append(paragraph)
            taken += len(paragraph["qas"])
        data.extend({"title": title, "paragraphs": paragraphs} for title, paragraphs in by_title.items())
    return {"version": "spanqa-docqa", "data": data}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--root", type=Path, action="append", required=True, help="A folder of HTML pages.")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--mix", type=Path, help="SQuAD-format file to mix in.")
    parser.add_argument("--mix-questions", type=int, default=0)
    parser.add_argument("--per-page", type=int, default=40)
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--negatives", type=float, default=0.0, help="Unanswerable pairs per question.")
    parser.add_argument("--model", default=Settings.retriever_model, help="Retriever whose tokenizer cuts.")
    args = parser.parse_args(argv)
    data = build(
        args.root,
        mix=args.mix,
        mix_questions=args.mix_questions,
        per_page=args.per_page,
        seed=args.seed,
        negatives=args.negatives,
        model=args.model,
    )
    kinds: dict[str, int] = {}
    for article in data["data"]:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                kind = qa.get("kind", "squad") + ("-none" if qa.get("is_impossible") else "")
                kinds[kind] = kinds.get(kind, 0) + 1
    args.out.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    print(json.dumps({"out": str(args.out), "questions": kinds}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
