"""Generated requests against the OpenAPI schema (schemathesis): no 500s, every response as documented."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.specs.openapi.checks import positive_data_acceptance

from spanqa.runtime import Runtime
from spanqa.server.app import create_app
from spanqa.settings import Settings


@pytest.fixture
def api_schema(settings: Settings, tmp_path: Path) -> Iterator[Any]:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "broncos.txt").write_text("The Denver Broncos defeated the Carolina Panthers 24 to 10.\n")
    with Runtime(settings.replace(serve_roots=str(docs))) as runtime:
        runtime.ingest_job().run([docs])
        yield schemathesis.openapi.from_asgi("/openapi.json", _as_this_machine(create_app(runtime)))


def _as_this_machine(app: Any) -> Any:
    """The app behind a Host header of 127.0.0.1 (schemathesis sends "testserver", which a server without
    an API key refuses)."""

    async def wrapped(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = [(k, v) for k, v in scope["headers"] if k != b"host"] + [(b"host", b"127.0.0.1")]
            scope = {**scope, "headers": headers}
        await app(scope, receive, send)

    return wrapped


def test_generated_requests_never_fail_the_server(api_schema: Any) -> None:
    # Each operation's strategy run by hypothesis directly: schemathesis's pytest plugin does not load under
    # this pytest.
    operations = [result.ok() for result in api_schema.get_all_operations()]
    assert {op.path for op in operations} >= {"/ask", "/search", "/documents/{reference}", "/ingest"}
    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(max_examples=25, deadline=None, database=None, suppress_health_check=list(HealthCheck))
        def check(case: Any) -> None:
            # Requests valid by the schema may still be refused (a path outside the served roots, a relative
            # path, a blank question): that refusal is a documented 4xx, checked as such, not a failure.
            case.call_and_validate(base_url="http://127.0.0.1", excluded_checks=[positive_data_acceptance])

        check()
