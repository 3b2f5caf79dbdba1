"""No Docker engine runs here: check the compose file's structure and its wiring to real settings."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from spanqa.settings import setting_names

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    return data


def test_services_present(compose: dict[str, Any]) -> None:
    assert {"qdrant", "redis", "postgres", "worker", "beat"} <= set(compose["services"])


def test_images_are_pinned(compose: dict[str, Any]) -> None:
    for name, service in compose["services"].items():
        image = service.get("image")
        if image is None:
            assert "build" in service, name
            continue
        repository, _, tag = image.rpartition(":")
        assert repository and tag and tag != "latest", f"{name}: {image} is not pinned"


def test_every_spanqa_variable_is_a_real_setting(compose: dict[str, Any]) -> None:
    names = set(setting_names())
    seen = 0
    for service in compose["services"].values():
        for key in service.get("environment") or {}:
            if key.startswith("SPANQA_"):
                seen += 1
                assert key[len("SPANQA_") :].lower() in names, key
    assert seen >= 4


def test_stateful_services_keep_data_in_volumes(compose: dict[str, Any]) -> None:
    declared = set(compose.get("volumes") or {})
    for name in ("qdrant", "postgres", "redis"):
        mounts = compose["services"][name].get("volumes") or []
        named = {m.split(":", 1)[0] for m in mounts}
        assert named & declared, f"{name} has no named volume"


def test_workers_wait_for_healthy_services(compose: dict[str, Any]) -> None:
    for name in ("qdrant", "redis", "postgres"):
        assert "healthcheck" in compose["services"][name], name
    depends = compose["services"]["worker"]["depends_on"]
    assert all(depends[s]["condition"] == "service_healthy" for s in ("qdrant", "redis", "postgres"))
    assert compose["services"]["worker"]["command"][0] == "worker"


def test_dockerfile_installs_cpu_torch_first() -> None:
    lines = [
        line for line in (ROOT / "Dockerfile").read_text().splitlines() if line.startswith("RUN pip install")
    ]
    assert "torch==2.13.0" in lines[0] and "cpu" in lines[0]
