"""Faults injected into a real `spanqa ingest` process: killed (SIGKILL) or interrupted (SIGINT) in the
middle of a folder. The end state is checked: every point has its chunk and every chunk its point once the
next run (or `spanqa doctor`) has repaired, no document is half indexed, and what was indexed before still
answers."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ingest.catalog import Catalog
from retriever.index.edge import EdgeVectorIndex
from spanqa.settings import Settings
from spanqa.types import DocumentStatus

pytestmark = pytest.mark.slow

SENTENCE = "The Denver Broncos defeated the Carolina Panthers at Levi's Stadium in Santa Clara. "


def _spanqa(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "spanqa.cli", *args]
    return subprocess.run(command, env={**os.environ, **env}, capture_output=True, text=True, timeout=300)


def _consistent(settings: Settings) -> None:
    with Catalog(settings.catalog_url) as catalog:
        active = catalog.active_index()
        assert active is not None
        chunk_ids = catalog.chunk_ids()
        for document in catalog.list_documents(status=DocumentStatus.INDEXED):
            full = catalog.get_document(document.id)
            assert full is not None
            chunks = catalog.chunks_of(document.id)
            assert len(chunks) == full.num_chunks > 0  # never half indexed
            assert all(full.text[c.char_start : c.char_end] == c.text for c in chunks)
    with EdgeVectorIndex(settings.qdrant_path) as index:
        assert index.point_ids(active.collection) == chunk_ids


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT], ids=["SIGKILL", "SIGINT"])
def test_an_ingest_stopped_mid_folder_is_repaired(
    settings: Settings, spanqa_env: dict[str, str], tmp_path: Path, sig: int
) -> None:
    before = tmp_path / "before"
    before.mkdir()
    (before / "kept.txt").write_text("Warsaw is the capital of Poland. It lies on the Vistula river.")
    assert _spanqa(spanqa_env, "ingest", str(before)).returncode == 0
    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(30):
        (docs / f"part{i:02d}.txt").write_text(f"Part {i}. " + SENTENCE * 60)
    process = subprocess.Popen(
        [sys.executable, "-m", "spanqa.cli", "ingest", str(docs)],
        env={**os.environ, **spanqa_env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.time() + 120
        while True:  # stop it once it has indexed some of the folder, in the middle of the rest
            assert process.poll() is None, "the ingest finished before it could be stopped"
            with Catalog(settings.catalog_url) as catalog:
                if catalog.counts()[DocumentStatus.INDEXED.value] >= 3:
                    break
            assert time.time() < deadline
            time.sleep(0.05)
        process.send_signal(sig)
        code = process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert code != 0  # a stopped run never claims success
    doctor = _spanqa(spanqa_env, "doctor", "--json")
    assert doctor.returncode == 0, doctor.stderr
    assert set(json.loads(doctor.stdout)) == {"orphans_removed", "missing_restored"}
    _consistent(settings)  # the doctor's repair leaves index and catalog in step
    found = json.loads(_spanqa(spanqa_env, "search", "capital of Poland", "--json").stdout)
    assert any(Path(p["path"]).name == "kept.txt" for p in found["passages"])  # indexed before: still there
    again = _spanqa(spanqa_env, "ingest", str(docs), "--json")  # the next run finishes the folder
    assert again.returncode == 0, again.stderr
    summary = json.loads(again.stdout)["summary"]
    assert summary["new"] + summary["unchanged"] == 30 and summary["failed"] == 0
    _consistent(settings)


def test_an_unreachable_database_is_a_one_line_error_with_the_password_masked(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from spanqa.cli import main

    env = {"SPANQA_DATABASE_URL": "postgresql+psycopg://app:hunter2@127.0.0.1:1/spanqa", "SPANQA_CONFIG": ""}
    for args in (["status"], ["ingest", str(tmp_path)], ["ask", "Who won?"]):
        result = CliRunner().invoke(main, args, env=env)
        assert result.exit_code == 2, result.output
        message = result.output.strip()
        assert message.startswith("error: cannot open the catalog") and "\n" not in message
        assert "hunter2" not in result.output and "app:***@" in message
