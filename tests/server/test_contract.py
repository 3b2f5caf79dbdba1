"""One ask contract: the options travel whole from the CLI, over HTTP and to a worker; the records printed
and served have one published shape (docs/schemas/), checked against the CLI's --json, the HTTP API and
what a worker's result becomes."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from spanqa import pipeline
from spanqa.cli import main
from spanqa.records import ask_record, search_record
from spanqa.runtime import Runtime
from spanqa.server.app import create_app
from spanqa.server.models import PUBLISHED, AskRequest, InternalAsk, InternalSearch, published_schema
from spanqa.settings import Settings
from spanqa.types import AskOptions, SearchOptions

SCHEMAS = Path(__file__).resolve().parents[2] / "docs" / "schemas"
TEXT = (
    "The Denver Broncos defeated the Carolina Panthers 24 to 10. "
    "The game was played at Levi's Stadium in Santa Clara.\n\n"
) * 4


def _schema(name: str) -> dict[str, Any]:
    return dict(json.loads((SCHEMAS / f"{name}.schema.json").read_text(encoding="utf-8")))


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_the_published_schemas_are_the_records(name: str) -> None:
    assert _schema(name) == published_schema(name), "run: python scripts/write_schemas.py"


def test_the_options_travel_whole() -> None:
    options = AskOptions(passages=4, answers=2, min_score=0.25, path_glob="*.md")
    assert AskOptions.from_dict(json.loads(json.dumps(options.to_dict()))) == options  # to a worker and back
    assert InternalAsk(question="q", **options.to_dict()).options() == options  # to a running server
    request = AskRequest(question="q", passages=4, answers=2, min_score=0.25, path="*.md")
    assert request.options() == options  # POST /ask
    # Every option of the contract is an option of POST /ask (there named ``path``).
    public = {"path_glob" if f == "path" else f for f in AskRequest.model_fields} - {"question"}
    assert public == {f.name for f in dataclasses.fields(AskOptions)}
    search = SearchOptions(top_k=3, path_glob="*.txt")
    assert InternalSearch(query="q", **search.to_dict()).options() == search
    assert SearchOptions.from_dict({}) == SearchOptions()  # None: the search_top_k setting


def test_cli_http_and_worker_records_follow_the_schema(
    settings: Settings, spanqa_env: dict[str, str], tmp_path: Path
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "game.txt").write_text(TEXT)
    runner = CliRunner()
    assert runner.invoke(main, ["ingest", str(docs)], env=spanqa_env).exit_code == 0
    ask_schema, search_schema = _schema("ask"), _schema("search")
    asked = runner.invoke(main, ["ask", "Who won the game?", "--json", "--min-score", "0"], env=spanqa_env)
    assert asked.exit_code == 0, asked.output
    jsonschema.validate(json.loads(asked.stdout), ask_schema)
    found = runner.invoke(main, ["search", "Broncos", "--json"], env=spanqa_env)
    jsonschema.validate(json.loads(found.stdout), search_schema)
    # The default number of passages has one owner: the search_top_k setting.
    assert len(json.loads(found.stdout)["passages"]) <= settings.search_top_k
    with Runtime(settings) as runtime:
        with TestClient(create_app(runtime), base_url="http://127.0.0.1") as client:
            response = client.post("/ask", json={"question": "Who won the game?", "min_score": 0})
            jsonschema.validate(response.json(), ask_schema)
            jsonschema.validate(client.get("/search", params={"q": "Broncos"}).json(), search_schema)
        # A worker sends AskResult.to_dict(); the asking process prints the same record from it.
        result = pipeline.ask(runtime, "Who won the game?", AskOptions(min_score=0.0))
        carried = pipeline.AskResult.from_dict(json.loads(json.dumps(result.to_dict())))
        assert carried == result
        jsonschema.validate(ask_record(carried), ask_schema)
        searched = pipeline.search(runtime, "Broncos")
        again = pipeline.SearchResult.from_dict(json.loads(json.dumps(searched.to_dict())))
        jsonschema.validate(search_record("Broncos", again), search_schema)
