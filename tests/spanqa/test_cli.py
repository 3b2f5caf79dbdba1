from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from spanqa.cli import main
from spanqa.settings import setting_names

DOCS = {
    "broncos.txt": "The Denver Broncos defeated the Carolina Panthers 24 to 10. "
    "The game was played at Levi's Stadium in Santa Clara.\n\n" * 4,
    "warsaw.md": "# Warsaw\n\nWarsaw is the capital and largest city of Poland. It lies on the Vistula.\n"
    * 4,
}


@pytest.fixture
def cli(spanqa_env: dict[str, str], tmp_path: Path) -> tuple[CliRunner, dict[str, str], Path]:
    env = spanqa_env
    docs = tmp_path / "docs"
    docs.mkdir()
    for name, text in DOCS.items():
        (docs / name).write_text(text)
    return CliRunner(), env, docs


def invoke(cli: tuple[CliRunner, dict[str, str], Path], *args: str, input: str | None = None):  # type: ignore[no-untyped-def]
    runner, env, _ = cli
    return runner.invoke(main, list(args), env=env, input=input, catch_exceptions=False)


def test_ingest_search_status_docs(cli: tuple[CliRunner, dict[str, str], Path]) -> None:
    docs = cli[2]
    result = invoke(cli, "ingest", str(docs), "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["summary"]["new"] == 2 and report["chunks_embedded"] > 0

    result = invoke(cli, "ingest", str(docs))
    assert result.exit_code == 0 and "2 unchanged" in result.output

    result = invoke(cli, "search", "Who won the game?", "-k", "3", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert 1 <= len(data["passages"]) <= 3
    scores = [p["score"] for p in data["passages"]]
    assert scores == sorted(scores, reverse=True)
    for p in data["passages"]:
        assert Path(p["path"]).name in DOCS and p["char_end"] > p["char_start"]
    result = invoke(cli, "search", "Poland", "--path", "*.md", "--json")
    assert {Path(p["path"]).name for p in json.loads(result.stdout)["passages"]} == {"warsaw.md"}
    # For people, each passage's score says what it is (hybrid retrieval: the fused score).
    shown = invoke(cli, "search", "Who won the game?", "-k", "2").output
    assert re.search(r"^1\. fused \d\.\d{3}  ", shown, re.MULTILINE), shown

    status = json.loads(invoke(cli, "status", "--json").output)
    assert status["documents"]["indexed"] == 2 and status["chunks"] == report["chunks_embedded"]
    assert status["index"]["dimension"] == 32

    listed = json.loads(invoke(cli, "docs", "list", "--json").output)
    assert {Path(d["path"]).name for d in listed} == set(DOCS)
    shown = json.loads(invoke(cli, "docs", "show", listed[0]["id"][:8], "--json", "--text").output)
    for chunk in shown["chunks"]:
        assert shown["text"][chunk["char_start"] : chunk["char_end"]]
    result = invoke(cli, "docs", "remove", str(docs / "warsaw.md"))
    assert result.exit_code == 0 and "removed" in result.output
    status = json.loads(invoke(cli, "status", "--json").output)
    assert status["documents"] == {"indexed": 1, "failed": 0, "deleted": 1}


def test_ask_prints_answers_with_exact_offsets(cli: tuple[CliRunner, dict[str, str], Path]) -> None:
    invoke(cli, "ingest", str(cli[2]))
    result = invoke(cli, "ask", "Who won the game?", "--json", "-k", "2", "--passages", "3")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert set(data["timings_ms"]) >= {"encode", "search", "read"}
    assert len(data["passages"]) <= 3
    for answer in data["answers"]:
        # The indexed text, not the raw file: loading turns a markdown heading "# Warsaw" into "Warsaw".
        shown = invoke(cli, "docs", "show", answer["document_id"], "--json", "--text")
        document_text = json.loads(shown.stdout)["text"]
        assert answer["text"] and document_text[answer["char_start"] : answer["char_end"]] == answer["text"]
        assert Path(json.loads(shown.stdout)["path"]).name == Path(answer["path"]).name
        assert 0 <= answer["score"] <= 1 and 0 <= answer["relative_score"] <= 1
        assert isinstance(answer["reader_score"], float)
    # --min-score hides answers less likely than it: at 1.0 (no answer is certain) nothing is left.
    none = json.loads(invoke(cli, "ask", "Who won the game?", "--json", "--min-score", "1").output)
    assert none["answers"] == [] and none["abstained"] and none["passages"]
    refused = invoke(cli, "ask", "Who won the game?", "--min-score", "2")
    assert refused.exit_code == 2
    text = invoke(cli, "ask", "Who won the game?")
    assert text.exit_code == 0
    assert ("no answer found" in text.output) or ("chars" in text.output)


def test_ask_reads_questions_from_stdin(cli: tuple[CliRunner, dict[str, str], Path]) -> None:
    invoke(cli, "ingest", str(cli[2]))
    result = invoke(cli, "ask", "-", "--json", input="Who won?\n\nWhere is Warsaw?\n")
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in result.output.splitlines() if line.strip()]
    assert [line["question"] for line in lines] == ["Who won?", "Where is Warsaw?"]


def test_user_mistakes_are_one_line_errors(
    cli: tuple[CliRunner, dict[str, str], Path], tmp_path: Path
) -> None:
    result = invoke(cli, "search", "anything")
    assert result.exit_code == 2 and result.output.strip().startswith("error: nothing is indexed")
    result = invoke(cli, "ingest", str(tmp_path / "missing"))
    assert (
        result.exit_code == 2
        and result.output.strip() == f"error: no such file or folder: {tmp_path / 'missing'}"
    )
    result = invoke(cli, "docs", "show", "nope")
    assert result.exit_code == 2 and "no document matches" in result.output
    for output in (result.output,):
        assert "Traceback" not in output and len(output.strip().splitlines()) == 1


#: Mistakes a user makes, each with the words its one-line error must hold ({tmp} is the test's folder).
MISTAKES = [
    (("search", "anything"), "nothing is indexed"),
    (("ask", ""), "the question is empty"),
    (("ask",), "Missing argument 'QUESTION'"),
    (("ask", "--passages", "x", "q"), "'x' is not a valid integer"),
    (("ingest", "{tmp}/missing"), "no such file or folder"),
    (("docs", "show", "nope"), "nothing is indexed"),  # test_document_references_get_precise_messages
    (("docs", "remove", "nope"), "nothing is indexed"),
    (("jobs", "nope"), "no job nope"),
    (("watch", "--remove", "{tmp}"), "not watched"),
    (("eval", "docs", "{tmp}/missing.json"), "does not exist"),
    (("eval", "squad", "{tmp}/missing.json"), "does not exist"),
    (("reader", "train", "--out", "{tmp}/run"), "give the training data with --train"),
    (("reader", "train", "--resume", "--out", "{tmp}/run"), "no checkpoint to resume"),
    (("reader", "calibrate", "{tmp}/no-run"), "does not exist"),
    (("--bogus",), "No such option '--bogus'"),
    (("nosuchcommand",), "No such command 'nosuchcommand'"),
]


@pytest.mark.parametrize(("args", "words"), MISTAKES, ids=[" ".join(a) for a, _ in MISTAKES])
def test_every_user_mistake_is_one_line(
    cli: tuple[CliRunner, dict[str, str], Path], tmp_path: Path, args: tuple[str, ...], words: str
) -> None:
    result = invoke(cli, *(a.replace("{tmp}", str(tmp_path)) for a in args))
    assert result.exit_code == 2, result.output
    assert len(result.output.strip().splitlines()) == 1, result.output
    assert result.output.startswith("error: ") and words in result.output
    assert "unexpected" not in result.output and "Traceback" not in result.output


def test_failed_files_give_exit_code_1(cli: tuple[CliRunner, dict[str, str], Path]) -> None:
    (cli[2] / "broken.pdf").write_bytes(b"%PDF-1.4 garbage")
    result = invoke(cli, "ingest", str(cli[2]))
    assert result.exit_code == 1
    assert "1 failed" in result.output and "broken.pdf" in result.output
    status = json.loads(invoke(cli, "status", "--json").output)
    assert [Path(f["path"]).name for f in status["failed_files"]] == ["broken.pdf"]


def test_missing_reader_is_a_one_line_error(
    cli: tuple[CliRunner, dict[str, str], Path], tmp_path: Path
) -> None:
    invoke(cli, "ingest", str(cli[2]))
    runner, env, _ = cli
    env = dict(env, SPANQA_READER_MODEL=str(tmp_path / "no-reader"))
    result = runner.invoke(main, ["ask", "Who won?"], env=env)
    assert result.exit_code == 2
    assert result.output.startswith("error: cannot load reader") and "SPANQA_READER_MODEL" in result.output


def test_status_never_prints_secrets(cli: tuple[CliRunner, dict[str, str], Path]) -> None:
    runner, env, _ = cli
    env = dict(
        env, SPANQA_QDRANT_URL="https://user:hunter2@qdrant.example:6333", SPANQA_QDRANT_API_KEY="s3cr3t"
    )
    result = runner.invoke(main, ["status", "--json"], env=env)
    assert result.exit_code == 0, result.output
    assert "hunter2" not in result.output and "s3cr3t" not in result.output
    assert "qdrant.example" in json.loads(result.stdout)["vector_store"]


def test_bad_setting_is_a_one_line_error(cli: tuple[CliRunner, dict[str, str], Path]) -> None:
    runner, env, _ = cli
    result = runner.invoke(main, ["status"], env=dict(env, SPANQA_PASSAGES="lots"))
    assert result.exit_code == 2 and result.output.startswith("error: setting passages")


def test_db_upgrade_and_doctor(cli: tuple[CliRunner, dict[str, str], Path]) -> None:
    result = invoke(cli, "db", "upgrade", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["from"] is None and data["to"] == data["head"]
    assert "up to date" in invoke(cli, "db", "upgrade").output
    invoke(cli, "ingest", str(cli[2]))
    result = invoke(cli, "doctor", "--json")
    assert result.exit_code == 0 and json.loads(result.stdout) == {
        "orphans_removed": 0,
        "missing_restored": 0,
    }


def test_the_index_mirrors_the_folder(cli: tuple[CliRunner, dict[str, str], Path]) -> None:
    docs = cli[2]
    invoke(cli, "ingest", str(docs))
    (docs / "warsaw.md").rename(docs.parent / "warsaw.md")  # moved out of the folder
    kept = invoke(cli, "ingest", str(docs), "--no-prune")
    assert "1 vanished (kept: --no-prune)" in kept.output
    dropped = invoke(cli, "ingest", str(docs))
    assert "1 vanished (dropped)" in dropped.output and dropped.exit_code == 0
    (docs / "broncos.txt").write_text("")  # emptied: skipped (no failure); its old text stops answering
    emptied = invoke(cli, "ingest", str(docs))
    assert emptied.exit_code == 0 and "1 empty file" in emptied.output
    status = json.loads(invoke(cli, "status", "--json").output)
    assert status["documents"] == {"indexed": 0, "failed": 0, "deleted": 2} and status["chunks"] == 0
    found = json.loads(invoke(cli, "search", "Broncos Warsaw", "--json").output)
    assert found["passages"] == []
    asked = json.loads(invoke(cli, "ask", "Who won the game?", "--json", "--min-score", "0").output)
    assert asked["answers"] == [] and asked["passages"] == []


def test_reading_commands_never_create_a_data_folder(cli: tuple[CliRunner, dict[str, str], Path]) -> None:
    runner, env, docs = cli
    missing = docs.parent / "nowhere" / ".spanqa"
    for args in (["ask", "Who won?"], ["search", "Broncos"], ["docs", "list"], ["doctor"]):
        result = runner.invoke(main, ["--data-dir", str(missing), *args], env=env)
        assert (
            result.exit_code == 2
            and "nothing is indexed yet" in result.output
            and str(missing) in result.output
        )
    status = runner.invoke(main, ["--data-dir", str(missing), "status", "--json"], env=env)
    assert status.exit_code == 0 and json.loads(status.stdout)["chunks"] == 0
    assert not missing.exists() and not missing.parent.exists()


def test_config_shows_every_setting_and_where_it_came_from(
    cli: tuple[CliRunner, dict[str, str], Path],
) -> None:
    runner, env, _ = cli
    result = runner.invoke(main, ["config", "--json"], env={**env, "SPANQA_QDRANT_API_KEY": "s3cret"})
    assert result.exit_code == 0, result.output
    shown = json.loads(result.stdout)
    assert set(shown) == set(setting_names())
    assert shown["passages"] == {"value": 10, "source": "default"}
    assert shown["data_dir"]["source"] == "env SPANQA_DATA_DIR"
    assert shown["qdrant_api_key"]["value"] == "***" and "s3cret" not in result.output
    flagged = runner.invoke(main, ["--data-dir", "/tmp/x", "config", "--json"], env=env)
    assert json.loads(flagged.stdout)["data_dir"] == {"value": "/tmp/x", "source": "option"}
    # Unset values show what is in use; a URL's password never shows.
    unset: dict[str, str | None] = {**env, "SPANQA_DATABASE_URL": None, "SPANQA_MODEL_CACHE_DIR": None}
    in_use = json.loads(runner.invoke(main, ["--data-dir", "/tmp/x", "config", "--json"], env=unset).output)
    assert in_use["database_url"] == {"value": "sqlite:////tmp/x/catalog.sqlite3", "source": "default"}
    assert in_use["model_cache_dir"]["value"] and in_use["model_cache_dir"]["source"] == "default"
    url = "postgresql+psycopg://spanqa:pa55word@db.example/spanqa"
    masked = runner.invoke(main, ["config", "--json"], env={**env, "SPANQA_DATABASE_URL": url})
    assert "pa55word" not in masked.output
    assert (
        json.loads(masked.stdout)["database_url"]["value"]
        == "postgresql+psycopg://spanqa:***@db.example/spanqa"
    )


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_scripts(cli: tuple[CliRunner, dict[str, str], Path], shell: str) -> None:
    result = invoke(cli, "completion", shell)
    assert result.exit_code == 0 and "_SPANQA_COMPLETE" in result.output


def test_document_references_get_precise_messages(cli: tuple[CliRunner, dict[str, str], Path]) -> None:
    docs = cli[2]
    invoke(cli, "ingest", str(docs))
    listed = json.loads(invoke(cli, "docs", "list", "--json").output)
    short = invoke(cli, "docs", "show", listed[0]["id"][:4])
    assert short.exit_code == 2 and "too short for an id prefix" in short.output
    target = listed[0]["path"]
    assert invoke(cli, "docs", "remove", target).exit_code == 0
    again = invoke(cli, "docs", "remove", target)
    assert again.exit_code == 1 and "already removed" in again.output


def test_ask_from_stdin_echoes_questions_and_stops_at_quit(
    cli: tuple[CliRunner, dict[str, str], Path],
) -> None:
    invoke(cli, "ingest", str(cli[2]))
    result = invoke(cli, "ask", "-", "--min-score", "0", input="Who won?\nquit\nWhere is Warsaw?\n")
    assert result.exit_code == 0
    assert "? Who won?" in result.output and "Where is Warsaw?" not in result.output


def test_ask_context_and_long_question_warning(cli: tuple[CliRunner, dict[str, str], Path]) -> None:
    invoke(cli, "ingest", str(cli[2]))
    long_question = "Who won the game played at the stadium " * 20
    data = json.loads(invoke(cli, "ask", long_question, "--json", "--min-score", "0").output)
    assert data["warnings"] and "longer than the reader reads" in data["warnings"][0]
    short = json.loads(invoke(cli, "ask", "Who won?", "--json").output)
    assert short["warnings"] == []
    # The shown context (the last line is the timings): the wider one holds the narrower one.
    narrow = invoke(cli, "ask", "Who won the game?", "--min-score", "0", "-k", "1").output.splitlines()[:-1]
    wide = invoke(cli, "ask", "Who won the game?", "--min-score", "0", "-k", "1", "--context", "50")
    assert narrow[-1].strip() in wide.output


def test_answer_surroundings_by_hand() -> None:
    from spanqa.cli.ask import answer_surroundings
    from spanqa.types import Answer, Passage

    text = "First one. The Broncos won. Last one. After that."
    passage = Passage("c", "d", "d.txt", text, 100, 100 + len(text), 0.5)
    start = 100 + text.index("Broncos")
    answer = Answer(
        "Broncos", 0.9, "d.txt", "d", start, start + 7, None, passage, 5.0, 0.5, "The Broncos won.", 111
    )
    assert answer_surroundings(answer, 0) == ("The Broncos won.", 111)
    around, offset = answer_surroundings(answer, 1)
    assert around == "First one. The Broncos won. Last one." and offset == 100
    assert answer_surroundings(answer, 99) == (text, 100)


def test_ask_vimgrep_points_into_the_file(cli: tuple[CliRunner, dict[str, str], Path]) -> None:
    docs = cli[2]
    invoke(cli, "ingest", str(docs))
    result = invoke(cli, "ask", "Who won the game?", "--vimgrep", "--min-score", "0", "-k", "3")
    assert result.exit_code == 0, result.output
    answers = json.loads(
        invoke(cli, "ask", "Who won the game?", "--json", "--min-score", "0", "-k", "3").output
    )
    lines = result.output.splitlines()
    assert len(lines) == len(answers["answers"]) > 0
    for line, answer in zip(lines, answers["answers"], strict=True):
        path, row, column, text = line.split(":", 3)
        assert path == answer["path"] and text == " ".join(answer["text"].split())
        # --json gives the same place beside the offsets into the extracted text.
        assert (answer["line"], answer["column"]) == (int(row), int(column))
        # The line and (byte) column of the file itself: the answer starts there. A random model's
        # span may end mid-word, so the file's text from that point must start with the answer.
        lines_from_row = "".join(Path(path).read_text().splitlines(keepends=True)[int(row) - 1 :])
        rest = lines_from_row.encode()[int(column) - 1 :].decode()
        assert " ".join(rest.split()).startswith(text)
    refused = invoke(cli, "ask", "Who won?", "--vimgrep", "--json")
    assert refused.exit_code == 2 and "choose one" in refused.output
    # The default output names the same places, as compilers print them, beside the text's offsets.
    shown = invoke(cli, "ask", "Who won the game?", "--min-score", "0", "-k", "3").output
    for line in lines:
        path, row, column, _ = line.split(":", 3)
        assert f"{path}:{row}:{column}  text chars " in shown, shown


def test_skipped_files_are_named_in_json_and_with_v(cli: tuple[CliRunner, dict[str, str], Path]) -> None:
    docs = cli[2]
    (docs / "photo.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(200))
    (docs / ".draft.txt").write_text("hidden words")
    (docs / "empty.txt").write_text("")
    report = json.loads(invoke(cli, "ingest", str(docs), "--json").stdout)
    named = {Path(f["path"]).name: f for f in report["skipped_files"]}
    assert named["photo.png"]["reason"] == "not text" and ".png" in named["photo.png"]["hint"]
    assert named[".draft.txt"]["reason"] == "hidden"
    assert named["empty.txt"]["reason"] == "empty file"
    assert report["summary"]["failed"] == 0  # an empty file is not a failure
    quiet = invoke(cli, "ingest", str(docs))
    assert quiet.exit_code == 0 and "photo.png" not in quiet.output and "-v names them" in quiet.output
    loud = invoke(cli, "-v", "ingest", str(docs))
    assert "skipped" in loud.output and "photo.png: not text" in loud.output


def test_json_output_reports_progress_as_json_lines_on_stderr(
    cli: tuple[CliRunner, dict[str, str], Path],
) -> None:
    _, _, docs = cli
    result = invoke(cli, "ingest", str(docs), "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)  # stdout holds the report alone
    lines = [json.loads(line) for line in result.stderr.splitlines() if line.startswith("{")]
    assert lines and all(line["progress"] == "ingest" for line in lines)
    last = lines[-1]
    assert last["done"] == last["total"] == report["summary"]["new"] and last["eta_s"] == 0.0
    assert {"elapsed_s", "chunks", "chunks_per_s"} <= set(last)


def test_status_says_how_the_vectors_are_searched(cli: tuple[CliRunner, dict[str, str], Path]) -> None:
    _, _, docs = cli
    assert invoke(cli, "ingest", str(docs)).exit_code == 0
    status = json.loads(invoke(cli, "status", "--json").stdout)
    search = status["index"]["search"]
    assert search["vectors"] == status["chunks"] > 0 and 0 <= search["indexed"] <= search["vectors"]
    assert search["state"] in {"indexed", "partly indexed", "not indexed"}
    assert invoke(cli, "status").stdout.count("search ") == 1


def test_every_command_loads_under_its_name() -> None:
    from spanqa.cli.root import COMMANDS

    runner = CliRunner()
    listed = runner.invoke(main, ["--help"]).output
    for name in COMMANDS:
        command = main.get_command(None, name)  # type: ignore[arg-type]
        assert command is not None and command.name == name
        assert re.search(rf"^  {name}\b", listed, re.MULTILINE), name
    assert main.get_command(None, "no-such-command") is None  # type: ignore[arg-type]
    unknown = runner.invoke(main, ["no-such-command"])
    assert unknown.exit_code != 0 and "No such command" in unknown.output


@pytest.mark.parametrize(
    "argv", [["reader", "train", "--help"], ["reader", "export", "--help"], ["retriever", "train", "--help"]]
)
def test_training_commands_need_no_store_or_service_library(argv: list[str]) -> None:
    """The GPU recipes run these where torch and transformers are installed but not spanqa's stores."""
    import subprocess
    import sys

    script = (
        "import sys\n"
        "from spanqa.cli import main\n"
        f"main({argv!r}, standalone_mode=False)\n"
        "import spanqa.reader.training, spanqa.retriever.training, spanqa.retriever.encoder\n"
        "banned = {'sqlalchemy', 'alembic', 'qdrant_client', 'qdrant_edge', 'celery', 'redis', 'fastapi'}\n"
        "print(sorted({name.split('.')[0] for name in sys.modules} & banned))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert done.stdout.strip().splitlines()[-1] == "[]", done.stdout
