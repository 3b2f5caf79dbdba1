"""Reader training pairs written from a manual's definition entries and directive tables."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from spanqa.docqa import build, main, squad_paragraphs
from spanqa.retriever.encoder import SentenceEncoder
from spanqa.settings import Settings

PAGE = """<html><body><h1>Server Configuration</h1><h2>Memory</h2><dl>
<dt>shared_buffers (integer)</dt>
<dd><p>Sets the amount of memory the database server uses for shared memory buffers. The default is
typically 128 megabytes (128MB), but might be less.</p></dd>
<dt>work_mem (integer)</dt>
<dd><p>Sets the base maximum amount of memory to be used by a query operation. The default value is four
megabytes (4MB).</p></dd>
<dt>huge_pages (enum)</dt>
<dd><p>Controls whether huge pages are requested for the main shared memory area. Defaults to try.</p></dd>
</dl><h2>Options</h2><dl>
<dt>-a<br>--data-only</dt><dd><p>Dump only the data, not the schema. This is the opposite.</p></dd>
<dt>-239</dt><dd><p>Duplicate key error.</p></dd>
</dl>
<h2>KeepAlive Directive</h2><table>
<tr><td>Description:</td><td>Enables HTTP persistent connections</td></tr>
<tr><td>Syntax:</td><td>KeepAlive On|Off</td></tr>
<tr><td>Default:</td><td>KeepAlive On</td></tr>
</table></body></html>"""


def _paragraphs(settings: Settings, tmp_path: Path, negatives: float = 0.0) -> list[dict[str, Any]]:
    page = tmp_path / "manual" / "config.html"
    page.parent.mkdir(exist_ok=True)
    page.write_text(PAGE, encoding="utf-8")
    tokenizer = SentenceEncoder(model=settings.retriever_model).tokenizer
    return list(squad_paragraphs(page, tokenizer, random.Random(0), negatives=negatives))


def test_questions_come_from_entries_and_answers_are_spans_of_the_passage(
    settings: Settings, tmp_path: Path
) -> None:
    pairs = []
    for paragraph in _paragraphs(settings, tmp_path):
        context = paragraph["context"]
        for qa in paragraph["qas"]:
            (answer,) = qa["answers"]
            # The answer is a span of what the reader reads, never of the heading path in front of it.
            assert context[answer["answer_start"] :].startswith(answer["text"])
            assert answer["answer_start"] > context.index("\n")
            pairs.append((qa["kind"], qa["question"], answer["text"]))
    defaults = {text: question for kind, question, text in pairs if kind == "default"}
    named = {"typically 128 megabytes": "shared_buffers", "four megabytes": "work_mem", "try": "huge_pages"}
    assert set(defaults) == {*named, "On"}
    assert all(name in defaults[value] for value, name in named.items())
    assert "KeepAlive" in defaults["On"]
    which = {text: question for kind, question, text in pairs if kind == "which"}
    assert set(which) == {"shared_buffers", "work_mem", "huge_pages", "--data-only"}
    assert which["--data-only"] == "Which option dumps only the data, not the schema?"
    assert which["huge_pages"].split()[1] != "function"  # "(enum)" is the type, not arguments
    does = [(question, text) for kind, question, text in pairs if kind == "does"]
    assert does == [("What does --data-only do?", "Dump only the data, not the schema")]
    assert not any("-239" in question for _, question, _ in pairs)  # an error code is not an option


def test_unanswerable_pairs_ask_a_neighbouring_entry(settings: Settings, tmp_path: Path) -> None:
    paragraphs = _paragraphs(settings, tmp_path, negatives=1.0)
    asked = {qa["question"] for p in paragraphs for qa in p["qas"] if qa["answers"]}
    unanswerable = [(p["context"], qa) for p in paragraphs for qa in p["qas"] if not qa["answers"]]
    assert unanswerable and all(qa["is_impossible"] for _, qa in unanswerable)
    assert {qa["question"] for _, qa in unanswerable} <= asked
    answers = {
        qa["question"]: qa["answers"][0]["text"] for p in paragraphs for qa in p["qas"] if qa["answers"]
    }
    for context, qa in unanswerable:
        assert answers[qa["question"]].lower() not in context.lower()


def test_the_training_file_mixes_squad_paragraphs_in(settings: Settings, tmp_path: Path) -> None:
    _paragraphs(settings, tmp_path)
    squad = tmp_path / "squad.json"
    squad.write_text(
        json.dumps(
            {
                "data": [
                    {
                        "title": f"A{i}",
                        "paragraphs": [
                            {
                                "context": "Warsaw is the capital of Poland.",
                                "qas": [
                                    {
                                        "id": f"q{i}",
                                        "question": "What is the capital of Poland?",
                                        "answers": [{"text": "Warsaw", "answer_start": 0}],
                                    }
                                ],
                            }
                        ],
                    }
                    for i in range(10)
                ]
            }
        )
    )
    data = build(
        [tmp_path / "manual"], mix=squad, mix_questions=4, per_page=40, seed=1, model=settings.retriever_model
    )
    titles = [article["title"] for article in data["data"]]
    assert titles[0] == "manual/config.html"
    assert len(titles) == 1 + 4
    out = tmp_path / "out.json"
    assert (
        main(["--root", str(tmp_path / "manual"), "--out", str(out), "--model", settings.retriever_model])
        == 0
    )
    assert json.loads(out.read_text())["data"][0]["title"] == "manual/config.html"
