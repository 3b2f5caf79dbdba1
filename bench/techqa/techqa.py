"""spanqa-techqa: build, check and assemble the documentation QA set (questions over Debian manuals).

Only questions are committed (bench/techqa/questions/*.jsonl); the documents come from the Debian packages
listed in bench/techqa/packages.json and are rebuilt on any machine:

    .venv/bin/python bench/techqa/techqa.py fetch              # apt-get download + dpkg -x into the cache
    .venv/bin/python bench/techqa/techqa.py extract            # spanqa's own extracted text of every file
    .venv/bin/python bench/techqa/techqa.py check              # every answer at its offset (fails loudly)
    .venv/bin/python bench/techqa/techqa.py assemble           # per-split files for `spanqa eval docs`

The cache (``--cache``, default ``$SPANQA_TECHQA_CACHE`` or ``~/.cache/spanqa-techqa``) holds ``debs/``,
``docs/PACKAGE/`` (the package's documentation folder, as ingested) and ``text/PACKAGE/FILE.txt`` (the text
spanqa's loader extracts from FILE: the text the catalog stores and answers' offsets index). ``fetch`` asks
for the exact version in packages.json and stops when the archive no longer has it; ``check`` stops when an
answer is not at its offset, so a package or loader that moved the text is never scored silently.

Question writers use ``locate`` to find an answer's offset in the extracted text:

    .venv/bin/python bench/techqa/techqa.py locate bash-doc bashref.html "HISTSIZE" --near "default value"
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

HERE = Path(__file__).resolve().parent
PACKAGES = HERE / "packages.json"
QUESTIONS = HERE / "questions"
SPLITS = ("train", "dev", "test")
MAX_ANSWER_WORDS = 8
#: At most this many questions whose answers lie within one window of this many characters ("one page").
PAGE_CHARS, PER_PAGE = 5000, 4
#: How far around an answer the copied-words check also reads (an entry's description beside its name).
NEAR_CHARS = 300
#: A question sharing this many consecutive words with the answer's sentence copies it.
COPIED_WORDS = 8
KINDS = ("answerable", "unanswerable")


def default_cache() -> Path:
    env = os.environ.get("SPANQA_TECHQA_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "spanqa-techqa"


@dataclass(frozen=True)
class Package:
    name: str
    version: str
    split: str
    root: str
    include: list[str]
    exclude: list[str] = field(default_factory=list)


def load_packages() -> dict[str, Package]:
    data = json.loads(PACKAGES.read_text(encoding="utf-8"))
    return {p["name"]: Package(**p) for p in data["packages"]}


def _selected(names: Sequence[str]) -> list[Package]:
    packages = load_packages()
    unknown = [n for n in names if n not in packages]
    if unknown:
        raise SystemExit(f"not in packages.json: {', '.join(unknown)}")
    return [packages[n] for n in names] if names else list(packages.values())


# --- fetch ------------------------------------------------------------------------------------------------


def fetch(cache: Path, packages: Sequence[Package]) -> None:
    """Download each package at its pinned version and unpack its documentation folder into docs/NAME."""
    debs = cache / "debs"
    debs.mkdir(parents=True, exist_ok=True)
    for package in packages:
        target = cache / "docs" / package.name
        if target.is_dir():
            print(f"{package.name}: already unpacked")
            continue
        found = [p for p in debs.glob(f"{package.name}_*.deb") if _deb_version(p) == package.version]
        if not found:
            result = subprocess.run(
                ["apt-get", "download", f"{package.name}={package.version}"],
                cwd=debs,
                capture_output=True,
                text=True,
                check=False,
            )
            if result.returncode != 0:
                raise SystemExit(
                    f"{package.name}={package.version}: cannot download ({result.stderr.strip()[:200]}); "
                    "the archive moved on: pick the new version, re-extract and re-check every question"
                )
            found = [p for p in debs.glob(f"{package.name}_*.deb") if _deb_version(p) == package.version]
        with tempfile.TemporaryDirectory(dir=cache) as tmp:
            subprocess.run(["dpkg", "-x", str(found[0]), tmp], check=True)
            source = Path(tmp) / package.root
            if not source.is_dir():
                raise SystemExit(f"{package.name}: {package.root} is not in the package")
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(source), target)
        print(f"{package.name}: unpacked into {target}")


def _deb_version(path: Path) -> str:
    out = subprocess.run(
        ["dpkg-deb", "-f", str(path), "Version"], capture_output=True, text=True, check=True
    ).stdout
    return out.strip()


# --- extract ----------------------------------------------------------------------------------------------


def package_files(cache: Path, package: Package) -> Iterator[tuple[str, Path]]:
    """(path relative to the package's folder, file) for every file spanqa ingests with its globs."""
    from spanqa.ingest.walk import walk

    root = cache / "docs" / package.name
    if not root.is_dir():
        raise SystemExit(f"{package.name}: not fetched (run `techqa.py fetch {package.name}`)")
    for found in walk(root, extensions=frozenset(), include=package.include, exclude=package.exclude):
        yield found.relative_path, found.path


def text_path(cache: Path, package: str, relative: str) -> Path:
    return cache / "text" / package / (relative + ".txt")


def extract(cache: Path, packages: Sequence[Package]) -> None:
    """Write spanqa's extracted text of every file, and FILES.tsv (file, format, characters, pages)."""
    from spanqa.ingest.loaders import LoadError, load_file

    for package in packages:
        out = cache / "text" / package.name
        if out.exists():
            shutil.rmtree(out)
        rows = []
        for relative, path in package_files(cache, package):
            try:
                loaded = load_file(path)
            except LoadError as exc:
                rows.append(f"{relative}\tfailed\t0\t0\t{exc}")
                continue
            target = text_path(cache, package.name, relative)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(loaded.text, encoding="utf-8")
            rows.append(f"{relative}\t{loaded.format}\t{len(loaded.text)}\t{len(loaded.pages)}\t")
        out.mkdir(parents=True, exist_ok=True)
        (out / "FILES.tsv").write_text("file\tformat\tchars\tpages\terror\n" + "\n".join(rows) + "\n")
        total = sum(int(r.split("\t")[2]) for r in rows)
        print(f"{package.name}: {len(rows)} files, {total:,} characters -> {out}")


class Texts:
    """Extracted texts read once each."""

    def __init__(self, cache: Path) -> None:
        self.cache = cache
        self._texts: dict[tuple[str, str], str | None] = {}
        self._packages: dict[str, dict[str, str]] = {}

    def get(self, package: str, relative: str) -> str | None:
        key = (package, relative)
        if key not in self._texts:
            path = text_path(self.cache, package, relative)
            self._texts[key] = path.read_text(encoding="utf-8") if path.is_file() else None
        return self._texts[key]

    def package(self, package: str) -> dict[str, str]:
        """Every extracted text of a package, by file."""
        if package not in self._packages:
            root = self.cache / "text" / package
            texts = {}
            for path in sorted(root.rglob("*.txt")):
                relative = path.relative_to(root).as_posix()[: -len(".txt")]
                texts[relative] = self.get(package, relative) or ""
            self._packages[package] = texts
        return self._packages[package]


# --- locate -----------------------------------------------------------------------------------------------


def locate(cache: Path, package: str, relative: str, answer: str, near: str | None, width: int = 80) -> None:
    text = Texts(cache).get(package, relative)
    if text is None:
        raise SystemExit(f"no extracted text for {package}/{relative} (see text/{package}/FILES.tsv)")
    starts = [m.start() for m in re.finditer(re.escape(answer), text)]
    if near:
        words = near.lower().split()
        starts.sort(key=lambda s: -sum(w in text[max(0, s - 300) : s + 300].lower() for w in words))
    if not starts:
        print("not found (the answer must be copied from the extracted text, character for character)")
    for start in starts[:10]:
        before = text[max(0, start - width) : start].replace("\n", " ")
        after = text[start + len(answer) : start + len(answer) + width].replace("\n", " ")
        print(f"offset {start}: ...{before}[[{answer}]]{after}...")
    if len(starts) > 10:
        print(f"({len(starts) - 10} more)")


# --- remap ------------------------------------------------------------------------------------------------

#: Characters that must agree for two texts to be taken as back in step after a difference.
_SYNC = 8
#: How far (characters in both texts together) a difference may reach before the alignment searches ahead.
_REACH = 96
_FOLD = str.maketrans({"\n": " "})


def align(old: str, new: str) -> list[int]:
    """For each offset of ``old`` (and its end), the offset in ``new`` of the same character; -1 where the
    character is gone. ``new`` is ``old`` after a loader change of local edits (a hyphen dropped, a ligature
    spelled out, a line break moved): the texts are walked together, a line break matching a space, and put
    back in step after each edit on the nearest ``_SYNC`` characters they share."""
    old, new = old.translate(_FOLD), new.translate(_FOLD)
    where = [-1] * (len(old) + 1)
    i = j = 0
    while i < len(old) and j < len(new):
        if old[i] == new[j]:
            where[i] = j
            i += 1
            j += 1
            continue
        step = _resync(old, new, i, j)
        if step is None:
            break
        i, j = i + step[0], j + step[1]
    if i >= len(old):
        where[len(old)] = len(new) if j >= len(new) else j
    return where


def _resync(old: str, new: str, i: int, j: int) -> tuple[int, int] | None:
    for reach in range(1, _REACH):
        for skip_old in range(reach + 1):
            a, b = i + skip_old, j + reach - skip_old
            if a < len(old) and old[a : a + _SYNC] == new[b : b + _SYNC]:
                return skip_old, reach - skip_old
    found = new.find(old[i : i + _SYNC * 4], j)
    return (0, found - j) if found >= 0 else None


def moved_span(where: list[int], start: int, end: int) -> tuple[int, int] | None:
    """Where ``old[start:end]`` lies in the new text; a character gone at either edge (a ligature spelled
    out) takes its neighbour's place. None when the span did not survive."""
    first = (
        where[start]
        if where[start] >= 0
        else (where[start - 1] + 1 if start and where[start - 1] >= 0 else -1)
    )
    last = where[end - 1] + 1 if where[end - 1] >= 0 else where[end]
    return (first, last) if 0 <= first < last else None


def remap(cache: Path, old_texts: Path, files: Sequence[Path]) -> int:
    """Point every answer whose file's text changed (a loader change) at the same place in the new text.

    Args:
        cache: the cache whose ``text/`` was extracted by the new loaders.
        old_texts: a ``text/`` folder extracted by the old ones (the one the offsets index).
        files: question files, rewritten in place.

    Returns:
        How many answers could not be followed (printed; they need a writer's look).
    """
    texts = Texts(cache)
    lost = 0
    for path in files:
        rows = read_jsonl(path)
        changed = 0
        for q in rows:
            if q.get("kind") != "answerable":
                continue
            old_path = old_texts / q["package"] / f"{q['file']}.txt"
            new = texts.get(q["package"], q["file"])
            if not old_path.is_file() or new is None:
                continue
            old = old_path.read_text(encoding="utf-8")
            if old == new:
                continue
            first, offset = q["answers"][0], q["offset"]
            if old[offset : offset + len(first)] != first:
                print(f"{q['id']}: not at its offset in the old text either: left as is")
                lost += 1
                continue
            span = moved_span(_alignment(old, new, q["package"], q["file"]), offset, offset + len(first))
            if span is None:
                print(f"{q['id']}: {first!r} did not survive the change: left as is")
                lost += 1
                continue
            start, end = span
            moved = new[start:end]
            if moved != first:
                print(f"{q['id']}: {first!r} now reads {moved!r}")
                q["answers"] = [moved, *(a.translate(_PLAIN_LETTERS) for a in q["answers"][1:])]
            if start != offset or moved != first:
                q["offset"] = start
                changed += 1
        if changed:
            with path.open("w", encoding="utf-8") as handle:
                for q in rows:
                    q.pop("_where", None)
                    handle.write(json.dumps(q, ensure_ascii=False) + "\n")
            print(f"{path.name}: {changed} answers re-pointed")
    return lost


_ALIGNMENTS: dict[tuple[str, str], list[int]] = {}
_PLAIN_LETTERS = str.maketrans(
    {"\ufb00": "ff", "\ufb01": "fi", "\ufb02": "fl", "\ufb03": "ffi", "\ufb04": "ffl"}
)


def _alignment(old: str, new: str, package: str, file: str) -> list[int]:
    key = (package, file)
    if key not in _ALIGNMENTS:
        _ALIGNMENTS[key] = align(old, new)
    return _ALIGNMENTS[key]


# --- check ------------------------------------------------------------------------------------------------

REQUIRED = ("id", "package", "file", "question", "answers", "kind")
_WORD = re.compile(r"[a-z0-9]+")
_IDENTIFIER = re.compile(
    r"(?:--?[A-Za-z][\w-]*|\b\w+(?:[._:/]\w+)+\b|\b[a-z]+_[a-z_]+\b|\b[A-Z][A-Z0-9_]{2,}\b)"
)


@dataclass
class Report:
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except ValueError as exc:
            raise SystemExit(f"{path}:{number}: not JSON ({exc})") from exc
        rows[-1]["_where"] = f"{path.name}:{number}"
    return rows


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def _longest_shared_run(a: list[str], b: list[str]) -> int:
    best = 0
    previous = [0] * (len(b) + 1)
    for x in a:
        current = [0] * (len(b) + 1)
        for j, y in enumerate(b, 1):
            if x == y:
                current[j] = previous[j - 1] + 1
                best = max(best, current[j])
        previous = current
    return best


def _sentence_around(text: str, start: int, end: int) -> str:
    left = max(text.rfind(". ", 0, start), text.rfind("\n", 0, start))
    right_candidates = [i for i in (text.find(". ", end), text.find("\n", end)) if i != -1]
    right = min(right_candidates) if right_candidates else len(text)
    return text[left + 1 : right]


def check_questions(cache: Path, rows: list[dict[str, Any]]) -> Report:
    """Every rule of the writing brief that a script can check (see the module docstring)."""
    packages = load_packages()
    texts = Texts(cache)
    report = Report()
    seen_ids: set[str] = set()
    offsets: dict[tuple[str, str], list[int]] = defaultdict(list)
    by_answer: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for q in rows:
        where = f"{q.get('_where', '?')} {q.get('id', '?')}"
        missing = [k for k in REQUIRED if k not in q]
        if missing:
            report.errors.append(f"{where}: missing {', '.join(missing)}")
            continue
        if q["id"] in seen_ids:
            report.errors.append(f"{where}: duplicate id")
        seen_ids.add(q["id"])
        package = packages.get(q["package"])
        if package is None:
            report.errors.append(f"{where}: package {q['package']} is not in packages.json")
            continue
        if q["kind"] not in KINDS:
            report.errors.append(f"{where}: kind must be one of {KINDS}")
            continue
        question = q["question"].strip()
        if not question.endswith("?") or len(question.split()) < 4:
            report.errors.append(f"{where}: not a question ({question!r})")
        # An unanswerable question's file too: it is where a user would look the question up, and scoring
        # reports it by that file's format.
        text = texts.get(q["package"], q["file"])
        if text is None:
            report.errors.append(f"{where}: no extracted text for {q['package']}/{q['file']}")
        if q["kind"] == "unanswerable":
            _check_unanswerable(q, where, texts, report)
            report.counts["unanswerable"] += 1
            continue
        if text is None:
            continue
        answers = q["answers"]
        if not answers or not all(isinstance(a, str) and a.strip() for a in answers) or len(answers) > 3:
            report.errors.append(f"{where}: answers must be 1-3 non-empty strings")
            continue
        offset = q.get("offset")
        first = answers[0]
        if not isinstance(offset, int) or text[offset : offset + len(first)] != first:
            found = text.find(first)
            hint = f" (first occurrence at {found})" if found >= 0 else " (not in the extracted text at all)"
            report.errors.append(f"{where}: {first!r} is not at offset {offset} of {q['file']}{hint}")
            continue
        if len(first.split()) > MAX_ANSWER_WORDS:
            report.errors.append(f"{where}: the answer has more than {MAX_ANSWER_WORDS} words")
        sentence = _sentence_around(text, offset, offset + len(first))
        question_words = _words(question)
        run = _longest_shared_run(question_words, _words(sentence))
        if run >= COPIED_WORDS:
            report.errors.append(f"{where}: the question copies {run} words of the answer's sentence")
        else:
            # An entry's name as the answer, its description on the next line: the sentence around the
            # answer is the name alone, so the text near it is read too (a warning: older questions have it).
            near = text[max(0, offset - NEAR_CHARS) : offset + len(first) + NEAR_CHARS]
            run = _longest_shared_run(question_words, _words(near))
            if run >= COPIED_WORDS:
                report.warnings.append(f"{where}: the question copies {run} words of the text by its answer")
        offsets[(q["package"], q["file"])].append(offset)
        by_answer[(q["package"], first.lower())].append(q)
        _warn_ambiguous(q, where, texts, report)
        report.counts["answerable"] += 1
        report.counts["hard"] += bool(q.get("hard"))
    for (package, file), starts in offsets.items():
        report.warnings += _crowded(package, file, sorted(starts))
    for group in by_answer.values():
        for i, a in enumerate(group):
            for b in group[i + 1 :]:
                wa, wb = set(_words(a["question"])), set(_words(b["question"]))
                if len(wa & wb) / max(1, len(wa | wb)) > 0.6:
                    report.errors.append(f"{a['id']} and {b['id']}: the same answer, nearly the same words")
                elif (a["file"], a["offset"]) == (b["file"], b["offset"]):
                    # Worded apart, the same fact still counts twice in training and scoring.
                    report.warnings.append(f"{a['id']} and {b['id']}: the same answer at the same place")
    return report


def _crowded(package: str, file: str, starts: list[int]) -> list[str]:
    """A warning for each stretch of a file where more than ``PER_PAGE`` answers lie within ``PAGE_CHARS``
    characters, wherever the stretch begins (fixed blocks would miss a cluster across a block's edge)."""
    warnings = []
    index = 0
    while index + PER_PAGE < len(starts):
        last = index + PER_PAGE
        if starts[last] - starts[index] < PAGE_CHARS:
            while last + 1 < len(starts) and starts[last + 1] - starts[index] < PAGE_CHARS:
                last += 1
            warnings.append(
                f"{package}/{file}: {last - index + 1} questions within characters {starts[index]}-"
                f"{starts[last]} (at most {PER_PAGE} in any {PAGE_CHARS})"
            )
            index = last + 1
        else:
            index += 1
    return warnings


def _check_unanswerable(q: dict[str, Any], where: str, texts: Texts, report: Report) -> None:
    if q["answers"]:
        report.errors.append(f"{where}: an unanswerable question has answers")
    terms = q.get("checked_terms") or []
    if not terms:
        report.errors.append(f"{where}: an unanswerable question lists no checked_terms")
        return
    corpus = texts.package(q["package"])
    for term in terms:
        hits = [f for f, t in corpus.items() if term.lower() in t.lower()]
        if hits:
            report.errors.append(
                f"{where}: checked term {term!r} occurs in {hits[0]} (+{len(hits) - 1} more)"
            )


def _warn_ambiguous(q: dict[str, Any], where: str, texts: Texts, report: Report) -> None:
    """A question's identifier stated in another file too: the reviewer reads whether the value agrees."""
    identifiers = {m.group(0) for m in _IDENTIFIER.finditer(q["question"]) if len(m.group(0)) > 3}
    if not identifiers:
        return
    corpus = texts.package(q["package"])
    answer = q["answers"][0].lower()
    for identifier in identifiers:
        others = [
            f for f, t in corpus.items() if f != q["file"] and identifier in t and answer not in t.lower()
        ]
        if len(others) >= 1:
            report.warnings.append(
                f"{where}: {identifier!r} is also in {len(others)} other file(s) without the answer, "
                f"e.g. {others[0]}"
            )


# --- review sample ------------------------------------------------------------------------------------------

SAMPLE_SHARE, SAMPLE_MIN = 0.10, 8


def review_sample(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The reviewer's 10% (at least 8): the questions whose SHA-1 of the id sorts first."""
    import hashlib

    count = max(SAMPLE_MIN, round(SAMPLE_SHARE * len(rows)))
    ranked = sorted(rows, key=lambda q: hashlib.sha1(q["id"].encode()).hexdigest())
    return ranked[:count]


# --- reader training pairs ----------------------------------------------------------------------------------


class Passages:
    """Each file's passages as the reader reads them at answer time (spanqa's loader, chunker at the default
    sizes and heading prefix): the same ``reader_input`` the pipeline builds."""

    def __init__(self, cache: Path) -> None:
        from spanqa.retriever.encoder import SentenceEncoder
        from spanqa.settings import Settings

        self.cache = cache
        self.tokenizer = SentenceEncoder(model=Settings.retriever_model).tokenizer
        self._read: dict[tuple[str, str], list[Any]] = {}

    def of(self, package: str, relative: str) -> list[Any]:
        from spanqa.docqa import _passage
        from spanqa.ingest.chunker import chunk_blocks
        from spanqa.ingest.loaders import load_file
        from spanqa.reader.answers import reader_input
        from spanqa.settings import Settings

        key = (package, relative)
        if key not in self._read:
            loaded = load_file(self.cache / "docs" / package / relative)
            spans = chunk_blocks(
                loaded.text,
                loaded.blocks,
                self.tokenizer,
                chunk_tokens=Settings.chunk_tokens,
                overlap_tokens=Settings.chunk_overlap,
            )
            self._read[key] = [reader_input(_passage(loaded.text, span)) for span in spans]
        return self._read[key]


def _overlap(question: str, text: str) -> int:
    words = {w for w in _words(question) if len(w) > 2}
    return len(words & set(_words(text)))


def training_pairs(
    cache: Path, rows: list[dict[str, Any]], *, negatives: int, seed: int
) -> list[dict[str, Any]]:
    """SQuAD 2.0-format articles (one per package) of the questions' passages, as the reader reads them.

    An answerable question is asked of the passage that holds its answer at its offset (the answer's place in
    the reader's input, never in the heading path), and of up to ``negatives`` passages of the same file that
    share the most words with it but lack every acceptable answer (unanswerable pairs: the neighbouring entry
    a prose-trained reader answers from). An unanswerable question is asked of its file's ``negatives + 1``
    most similar passages.
    """
    import random

    rng = random.Random(seed)
    passages = Passages(cache)
    by_package: dict[str, dict[str, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for q in rows:
        try:
            read = passages.of(q["package"], q["file"])
        except Exception as exc:  # a file spanqa cannot load: say which, keep going
            print(f"skipped {q['id']}: {exc}", file=sys.stderr)
            continue
        contexts = by_package[q["package"]]
        base = {"question": q["question"]}
        answers = [a.lower() for a in q["answers"]]
        ranked = sorted(
            range(len(read)), key=lambda i: (-_overlap(q["question"], read[i].text), rng.random())
        )
        if q["kind"] == "answerable":
            start, end = q["offset"], q["offset"] + len(q["answers"][0])
            holders = [i for i, r in enumerate(read) if r.answer_offset(start, end) is not None]
            if not holders:
                print(f"skipped {q['id']}: its answer is in no passage the reader reads", file=sys.stderr)
                continue
            at = read[holders[0]].answer_offset(start, end)
            contexts[read[holders[0]].text].append(
                {"id": q["id"], **base, "answers": [{"text": q["answers"][0], "answer_start": at}]}
            )
            others = [i for i in ranked if not any(a in read[i].text.lower() for a in answers)]
        else:
            others = ranked[: negatives + 1]
        for n, i in enumerate(others[: negatives if q["kind"] == "answerable" else negatives + 1]):
            contexts[read[i].text].append(
                {"id": f"{q['id']}-none{n}", **base, "answers": [], "is_impossible": True}
            )
    data = []
    for package, contexts in sorted(by_package.items()):
        paragraphs = [{"context": c, "qas": qas} for c, qas in contexts.items()]
        rng.shuffle(paragraphs)
        data.append({"title": f"techqa/{package}", "paragraphs": paragraphs})
    return data


def mixed_with_squad(
    data: list[dict[str, Any]], squad: Path, questions: int, seed: int
) -> list[dict[str, Any]]:
    """``data`` plus about ``questions`` SQuAD questions (whole paragraphs), so the reader keeps its prose."""
    import random

    rng = random.Random(seed)
    articles = json.loads(squad.read_text(encoding="utf-8"))["data"]
    pool = [(a["title"], p) for a in articles for p in a["paragraphs"]]
    rng.shuffle(pool)
    taken = 0
    by_title: dict[str, list[Any]] = defaultdict(list)
    for title, paragraph in pool:
        if taken >= questions:
            break
        by_title[title].append(paragraph)
        taken += len(paragraph["qas"])
    return data + [{"title": t, "paragraphs": ps} for t, ps in by_title.items()]


# --- stats ------------------------------------------------------------------------------------------------


def file_formats(cache: Path, package: str) -> dict[str, str]:
    """File -> the format spanqa's loader gave it (FILES.tsv of ``extract``)."""
    table = cache / "text" / package / "FILES.tsv"
    rows = table.read_text(encoding="utf-8").splitlines()[1:] if table.is_file() else []
    return {r.split("\t")[0]: r.split("\t")[1] for r in rows if r}


def stats(cache: Path, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Questions per split, per file format and per package (answerable, hard, unanswerable)."""
    packages = load_packages()
    formats = {name: file_formats(cache, name) for name in {q["package"] for q in rows}}
    table: dict[str, dict[str, Counter[str]]] = {
        "split": defaultdict(Counter),
        "format": defaultdict(Counter),
    }
    table["package"] = defaultdict(Counter)
    for q in rows:
        keys = {
            "split": packages[q["package"]].split,
            "format": formats[q["package"]].get(q["file"], "?"),
            "package": q["package"],
        }
        for name, key in keys.items():
            counter = table[name][key]
            counter[q["kind"]] += 1
            counter["hard"] += bool(q.get("hard")) and q["kind"] == "answerable"
    return {name: {k: dict(v) for k, v in sorted(groups.items())} for name, groups in table.items()}


# --- ingest -----------------------------------------------------------------------------------------------


def ingest(cache: Path, split: str, data_dir: Path, only: Sequence[str] = ()) -> None:
    """Ingest a split's packages (``only`` these, when given) into ``data_dir`` with each package's globs
    (as a user would)."""
    for package in load_packages().values():
        if package.split != split or (only and package.name not in only):
            continue
        command = [sys.executable, "-m", "spanqa.cli", "--data-dir", str(data_dir), "ingest", "--no-prune"]
        for pattern in package.include:
            command += ["--include", pattern]
        for pattern in package.exclude:
            command += ["--exclude", pattern]
        command.append(str(cache / "docs" / package.name))
        print(f"{package.name}: {' '.join(command[3:])}", flush=True)
        subprocess.run(command, check=True)


# --- assemble ---------------------------------------------------------------------------------------------


REVIEWS = HERE / "reviews"


def review_verdicts() -> dict[str, dict[str, str]]:
    """Every review line by question id (``verdict``, ``reason``)."""
    verdicts: dict[str, dict[str, str]] = {}
    for path in sorted(REVIEWS.glob("*.jsonl")):
        for row in read_jsonl(path):
            verdicts[row["id"]] = row
    return verdicts


def all_questions() -> list[dict[str, Any]]:
    """Every committed question less those a reviewer rejected."""
    rejected = {qid for qid, v in review_verdicts().items() if v.get("verdict") == "reject"}
    rows = []
    for path in sorted(QUESTIONS.glob("*.jsonl")):
        rows.extend(q for q in read_jsonl(path) if q.get("id") not in rejected)
    return rows


def review_report() -> dict[str, dict[str, Any]]:
    """Per package: questions sampled by the reviewer, rejected, and the rejection rate."""
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    for qid, verdict in review_verdicts().items():
        package = qid.rsplit("-", 1)[0]
        counts[package]["sampled"] += 1
        counts[package]["rejected"] += verdict.get("verdict") == "reject"
    return {p: {**c, "rate": round(100 * c["rejected"] / c["sampled"], 1)} for p, c in sorted(counts.items())}


def assemble(rows: list[dict[str, Any]], out_dir: Path, only: Sequence[str] = ()) -> dict[str, int]:
    """Write techqa-SPLIT.json in the shape `spanqa eval docs` reads, files named PACKAGE/FILE; with ``only``,
    techqa-SPLIT<N>.json for the split's questions on those N packages (what `ingest SPLIT PACKAGES` took)."""
    packages = load_packages()
    if only:
        rows = [q for q in rows if q["package"] in only]
        if len({packages[name].split for name in only}) != 1:
            raise SystemExit("the packages given to assemble must be of one split")
    splits: dict[str, list[dict[str, Any]]] = {s: [] for s in SPLITS}
    for q in rows:
        package = packages[q["package"]]
        record: dict[str, Any] = {
            "id": q["id"],
            "question": q["question"],
            "answers": q["answers"] if q["kind"] == "answerable" else [],
            "file": f"{q['package']}/{q['file']}",
        }
        if q["kind"] == "answerable":
            record["offset"] = q["offset"]
            record["hard"] = bool(q.get("hard"))
        splits[package.split].append(record)
    out_dir.mkdir(parents=True, exist_ok=True)
    for split, records in splits.items():
        names = sorted(
            {p.name for p in packages.values() if p.split == split and (not only or p.name in only)}
        )
        if not names:
            continue
        stem = f"techqa-{split}{len(names) if only else ''}"
        data = {
            "name": f"spanqa-techqa {split}",
            "about": "Questions over Debian documentation packages (bench/techqa); files are PACKAGE/FILE "
            "under the cache's docs/ folder; the documents are not included.",
            "packages": names,
            "questions": records,
        }
        (out_dir / f"{stem}.json").write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    return {split: len(records) for split, records in splits.items() if records}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cache", type=Path, default=default_cache())
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("fetch", "extract"):
        p = sub.add_parser(name)
        p.add_argument("packages", nargs="*")
    p = sub.add_parser("locate")
    p.add_argument("package")
    p.add_argument("file")
    p.add_argument("answer")
    p.add_argument("--near")
    p = sub.add_parser("remap", help="re-point answers after a loader change moved the extracted text")
    p.add_argument("old_texts", type=Path, help="a text/ folder extracted before the change")
    p.add_argument("files", nargs="*", type=Path, help="JSONL question files (default: all committed ones)")
    p = sub.add_parser("check")
    p.add_argument("files", nargs="*", type=Path, help="JSONL question files (default: all committed ones)")
    p.add_argument("--quiet-warnings", action="store_true")
    sub.add_parser("reviews", help="rejection rates of the reviews")
    sub.add_parser("stats", help="questions per split, format and package")
    p = sub.add_parser("sample")
    p.add_argument("package")
    p = sub.add_parser("trainset", help="SQuAD 2.0-format reader training pairs from one split")
    p.add_argument("--split", choices=SPLITS, default="train")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--negatives", type=int, default=2, help="unanswerable pairs per answerable question")
    p.add_argument("--squad", type=Path, help="a SQuAD file to mix in")
    p.add_argument("--squad-questions", type=int, default=0)
    p.add_argument("--seed", type=int, default=13)
    p = sub.add_parser("ingest")
    p.add_argument("split", choices=SPLITS)
    p.add_argument("packages", nargs="*", help="only these packages of the split (default: all)")
    p.add_argument("--data-dir", type=Path, required=True)
    p = sub.add_parser("assemble")
    p.add_argument("packages", nargs="*", help="only these packages of one split (techqa-SPLIT<N>.json)")
    p.add_argument("--out", type=Path, default=None, help="default: CACHE/sets")
    args = parser.parse_args(argv)

    if args.command == "fetch":
        fetch(args.cache, _selected(args.packages))
    elif args.command == "extract":
        extract(args.cache, _selected(args.packages))
    elif args.command == "locate":
        locate(args.cache, args.package, args.file, args.answer, args.near)
    elif args.command == "remap":
        lost = remap(args.cache, args.old_texts, args.files or sorted(QUESTIONS.glob("*.jsonl")))
        print(f"{lost} answers could not be followed")
        return 1 if lost else 0
    elif args.command == "check":
        rows = []
        for path in args.files or sorted(QUESTIONS.glob("*.jsonl")):
            rows.extend(read_jsonl(path))
        report = check_questions(args.cache, rows)
        if not args.quiet_warnings:
            for line in report.warnings:
                print("warning:", line)
        for line in report.errors:
            print("ERROR:", line)
        total = len(rows)
        print(
            f"{total} questions: {report.counts['answerable']} answerable ({report.counts['hard']} hard), "
            f"{report.counts['unanswerable']} unanswerable; {len(report.errors)} errors, "
            f"{len(report.warnings)} warnings"
        )
        return 1 if report.errors else 0
    elif args.command == "stats":
        print(json.dumps(stats(args.cache, all_questions()), indent=1))
    elif args.command == "reviews":
        report = review_report()
        for package, row in report.items():
            print(
                f"{package:24} sampled {row['sampled']:3}  rejected {row['rejected']:2}  {row['rate']:5.1f}%"
            )
        sampled = sum(r["sampled"] for r in report.values())
        rejected = sum(r["rejected"] for r in report.values())
        print(
            f"{'all':24} sampled {sampled:3}  rejected {rejected:2}  {100 * rejected / max(sampled, 1):5.1f}%"
        )
    elif args.command == "sample":
        for q in review_sample(read_jsonl(QUESTIONS / f"{args.package}.jsonl")):
            q.pop("_where", None)
            print(json.dumps(q, ensure_ascii=False))
    elif args.command == "trainset":
        packages = load_packages()
        rows = [q for q in all_questions() if packages[q["package"]].split == args.split]
        report = check_questions(args.cache, rows)
        if report.errors:
            raise SystemExit(f"{len(report.errors)} questions fail the check (run `check`): no training file")
        data = training_pairs(args.cache, rows, negatives=args.negatives, seed=args.seed)
        if args.squad:
            data = mixed_with_squad(data, args.squad, args.squad_questions, args.seed)
        counts: Counter[str] = Counter()
        for article in data:
            for paragraph in article["paragraphs"]:
                for qa in paragraph["qas"]:
                    source = "techqa" if article["title"].startswith("techqa/") else "squad"
                    counts[source + ("-none" if qa.get("is_impossible") else "")] += 1
        args.out.write_text(
            json.dumps({"version": "v2.0", "data": data}, ensure_ascii=False), encoding="utf-8"
        )
        print(json.dumps({"out": str(args.out), **counts}))
    elif args.command == "ingest":
        ingest(args.cache, args.split, args.data_dir, args.packages)
    elif args.command == "assemble":
        rows = all_questions()
        if args.packages:  # only these packages' text need be extracted
            rows = [q for q in rows if q["package"] in args.packages]
        report = check_questions(args.cache, rows)
        if report.errors:
            print("\n".join(report.errors[:20]))
            raise SystemExit(f"{len(report.errors)} questions fail the check: nothing assembled")
        counts = assemble(rows, args.out or args.cache / "sets", args.packages)
        print(json.dumps(counts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
