"""The wheel installs one name, spanqa, with the shipped reader inside it, and answers from there."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow


def _run(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, env=env, cwd=cwd, capture_output=True, text=True, timeout=600, check=False)


def test_the_wheel_installs_one_name_and_answers_from_it(tmp_path: Path) -> None:
    wheels, site = tmp_path / "wheels", tmp_path / "site"
    leftover = not (ROOT / "build").exists()  # setuptools builds in the checkout: leave it as it was
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPANQA_") and k != "PYTHONPATH"}
    built = _run(
        sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", str(ROOT),
        "-w", str(wheels), env=env, cwd=tmp_path,
    )  # fmt: skip
    if leftover:
        shutil.rmtree(ROOT / "build", ignore_errors=True)
    assert built.returncode == 0, built.stderr
    (wheel,) = wheels.glob("spanqa-*.whl")
    installed = _run(
        sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(site), str(wheel),
        env=env, cwd=tmp_path,
    )  # fmt: skip
    assert installed.returncode == 0, installed.stderr
    names = {path.name for path in site.iterdir()} - {"bin"}
    assert {name for name in names if not name.endswith(".dist-info")} == {"spanqa"}, names
    assert (site / "spanqa" / "reader" / "models").is_dir()  # the shipped reader installs under spanqa

    # The installed copy, not this checkout (which is not on the path from another folder): its models, its
    # migrations, its CLI.
    env = {
        **env,
        "PYTHONPATH": str(site),
        "HF_HUB_OFFLINE": "1",
        "SPANQA_CONFIG": "",
        "SPANQA_READER_BACKEND": "torch",
        "SPANQA_DATA_DIR": str(tmp_path / "data"),
        "SPANQA_MODEL_CACHE_DIR": str(tmp_path / "cache"),
    }
    where = _run(
        sys.executable, "-c", "import spanqa.reader; print(spanqa.reader.__file__)", env=env, cwd=tmp_path
    )
    assert where.stdout.startswith(str(site)), where.stdout + where.stderr
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "game.txt").write_text(
        "Super Bowl 50 was an American football game. The Denver Broncos defeated the Carolina Panthers "
        "24 to 10 to earn their third Super Bowl title. The game was played at Levi's Stadium.\n"
    )
    ingested = _run(sys.executable, "-m", "spanqa.cli", "ingest", str(docs), env=env, cwd=tmp_path)
    assert ingested.returncode == 0, ingested.stderr
    asked = _run(
        sys.executable, "-m", "spanqa.cli", "ask", "Who won Super Bowl 50?", "--json", "--min-score", "0",
        env=env, cwd=tmp_path,
    )  # fmt: skip
    assert asked.returncode == 0, asked.stderr
    answers = json.loads(asked.stdout)["answers"]
    assert answers and "Broncos" in answers[0]["text"]
