"""`spanqa eval docs`: the questions file's shape, the scoring rules by hand, and a run with tiny models."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from spanqa.cli import main
from spanqa.docs_eval import DocumentFinder, read_doc_questions, reliability_svg, summarize
from spanqa.evaluation import EvaluationError
from spanqa.reader.squad import answer_matches
from spanqa.types import Document


def write(path: Path, data: object) -> Path:
    path.write_text(json.dumps(data))
    return path


def test_questions_are_read_from_an_object_a_list_or_json_lines(tmp_path: Path) -> None:
    items = [
        {"id": "a", "question": "What is the default?", "answers": ["8"], "file": "x.txt", "offset": 3},
        {"question": "Which port?", "unanswerable": True},
        {"question": "Which port again?", "answers": []},
    ]
    as_object = read_doc_questions(write(tmp_path / "o.json", {"questions": items}))
    as_list = read_doc_questions(write(tmp_path / "l.json", items))
    lines = tmp_path / "q.jsonl"
    lines.write_text("\n".join(json.dumps(i) for i in items) + "\n")
    as_lines = read_doc_questions(lines)
    assert as_object == as_list == as_lines
    first, second, third = as_object
    assert first.answerable and first.offset == 3 and first.file == "x.txt"
    assert not second.answerable and second.id == "2" and second.file is None
    assert not third.answerable


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ({"answers": ["x"]}, "needs a 'question'"),
        ({"question": "What?", "answers": "x", "offset": -1}, "offset"),
        ({"question": "What?", "answers": [3]}, "list of strings"),
        ({"question": "What?", "answers": ["x"], "unanswerable": True}, "'unanswerable' with answers"),
    ],
)
def test_a_malformed_question_is_named_in_one_line(
    tmp_path: Path, item: dict[str, object], message: str
) -> None:
    with pytest.raises(EvaluationError, match=message) as caught:
        read_doc_questions(write(tmp_path / "q.json", [{"question": "Fine?", "answers": ["y"]}, item]))
    assert "question 2" in str(caught.value) and "\n" not in str(caught.value)


def test_a_file_that_is_not_json_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "q.json"
    bad.write_text("{not json")
    with pytest.raises(EvaluationError, match="neither JSON nor JSON lines"):
        read_doc_questions(bad)


def test_answer_rule_accepts_containment_with_half_the_words_only() -> None:
    assert answer_matches("--force-with-lease", ["force-with-lease"])
    assert answer_matches("The Denver Broncos", ["denver broncos"])
    assert not answer_matches("hourly", ["on an hourly basis"])
    assert not answer_matches("", ["x"]) and not answer_matches("x", [])


def test_answers_of_punctuation_alone_are_compared_as_written() -> None:
    # SQuAD's normalization erases "-a" (punctuation, then the article "a"): such answers could never match.
    assert answer_matches("-A", ["-A"]) and answer_matches("'~'", ["~"]) and answer_matches("“*”", ["*"])
    assert not answer_matches("-a", ["-A"])  # another option
    assert answer_matches("-a, --all", ["-a"]) and not answer_matches("--all", ["-a"])
    assert not answer_matches("a tilde, then a dash", ["~"]) and not answer_matches("", ["~"])
    assert answer_matches("a tilde", ["a tilde", "~"])  # the words of the other gold answer still count


def doc(path: str, relative: str, fmt: str = "html") -> Document:
    return Document(id=path, path=path, relative_path=relative, sha256="", size=0, mtime=0.0, format=fmt)


def test_document_finder_takes_relative_absolute_and_unique_tails() -> None:
    a = doc("/d/pkg-a/conf.html", "conf.html")
    b = doc("/d/pkg-b/conf.html", "conf.html")
    c = doc("/d/pkg-b/sub/intro.html", "sub/intro.html")
    finder = DocumentFinder([a, b, c])
    assert finder.find("/d/pkg-b/conf.html") is b
    assert finder.find("pkg-a/conf.html") is a
    assert finder.find("sub/intro.html") is c and finder.find("intro.html") is c
    assert finder.find("missing.html") is None


def record(**values: object) -> dict[str, object]:
    base: dict[str, object] = {
        "answerable": True,
        "score": 0.5,
        "right": False,
        "right_shown": False,
        "declined": False,
        "passage_rank": None,
    }
    return {**base, **values}


def test_summary_counts_by_hand() -> None:
    records = [
        record(score=0.9, right=True, right_shown=True, passage_rank=1),
        record(score=0.2, right=True, declined=True, passage_rank=4),
        record(score=0.6, right_shown=True, passage_rank=12),
        record(answerable=False, score=0.1, declined=True),
        record(answerable=False, score=0.7),
    ]
    s = summarize(records)
    assert (s["answerable"], s["unanswerable"]) == (3, 2)
    assert s["top_right"] == pytest.approx(200 / 3, abs=0.01)
    assert s["top_right_shown"] == pytest.approx(100 / 3, abs=0.01)
    assert s["right_among_shown"] == pytest.approx(200 / 3, abs=0.01)
    assert s["answerable_declined"] == pytest.approx(100 / 3, abs=0.01)
    assert s["unanswerable_declined"] == 50.0
    assert (s["passage_at_1"], s["passage_at_5"]) == (
        pytest.approx(100 / 3, abs=0.01),
        pytest.approx(200 / 3, abs=0.01),
    )
    assert s["passage_at_10"] == s["passage_at_5"]
    assert s["right_kept"] == 50.0
    assert 0 <= s["ece"] <= 1 and 0 < s["ece_floor"] < 1
    empty = summarize([])
    assert empty["top_right"] is None and empty["ece"] is None and empty["ece_floor"] is None


def test_reliability_svg_is_well_formed_xml() -> None:
    import xml.etree.ElementTree as ET

    svg = reliability_svg([record(score=p / 10, right=p > 4) for p in range(11)], "set & <title>")
    root = ET.fromstring(svg)
    assert root.tag.endswith("svg") and len(root) > 5


def test_eval_docs_end_to_end_with_tiny_models(spanqa_env: dict[str, str], tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    (docs / "sub").mkdir(parents=True)
    (docs / "sub" / "limits.txt").write_text(
        "Limits\n\nThe server accepts at most 256 connections by default. Its timeout is 30 seconds.\n"
    )
    (docs / "intro.md").write_text("# Intro\n\nThe tool was first released in 2019 by the core team.\n")
    runner = CliRunner()
    assert runner.invoke(main, ["ingest", str(docs)], env=spanqa_env).exit_code == 0
    text = (docs / "sub" / "limits.txt").read_text()
    questions = write(
        tmp_path / "q.json",
        {
            "questions": [
                {
                    "question": "How many connections?",
                    "answers": ["256"],
                    "file": "sub/limits.txt",
                    "offset": text.index("256") - 0,
                },
                {"question": "When was it released?", "answers": ["2019"], "file": "intro.md"},
                {"question": "Who maintains the Windows port?", "answers": [], "file": "nowhere.txt"},
            ]
        },
    )
    out = tmp_path / "out"
    result = runner.invoke(
        main, ["eval", "docs", str(questions), "--out", str(out), "--json"], env=spanqa_env
    )
    assert result.exit_code == 0, result.output
    metrics = json.loads(result.stdout)
    assert metrics == json.loads((out / "report.json").read_text())
    assert (metrics["questions"], metrics["answerable"], metrics["unanswerable"]) == (3, 2, 1)
    assert metrics["files_not_indexed"] == ["nowhere.txt"]
    ranks = [metrics[f"passage_at_{k}"] for k in (1, 5, 10)]
    assert ranks == sorted(ranks)
    # Two small files: the answer's passage is always among the first five.
    assert metrics["passage_at_5"] == 100.0
    assert set(metrics["by_kind"]) == {"txt", "md"}
    assert (
        metrics["top_right_shown"] <= metrics["top_right"]
        and metrics["top_right_shown"] <= metrics["right_among_shown"]
    )
    lines = [json.loads(line) for line in (out / "questions.jsonl").read_text().splitlines()]
    assert [r["passage_rank"] is not None for r in lines] == [True, True, False]
    for r in lines:
        assert r["declined"] == (r["shown"] == [])
    assert (out / "reliability.svg").read_text().startswith("<svg")


def test_eval_docs_on_an_empty_folder_says_what_to_do(spanqa_env: dict[str, str], tmp_path: Path) -> None:
    questions = write(tmp_path / "q.json", [{"question": "What?", "answers": ["x"]}])
    result = CliRunner().invoke(main, ["eval", "docs", str(questions)], env=spanqa_env)
    assert result.exit_code == 2 and "ingest" in result.output and "Traceback" not in result.output
