"""The GPU recipe's weight transport: a model folder cut into parts of at most 16 MB comes back whole."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts" / "gpu"


def test_split_and_join_round_trip_a_model_folder(tmp_path: Path) -> None:
    model = tmp_path / "model"
    (model / "1_Pooling").mkdir(parents=True)
    weights = os.urandom(40_000_000)
    (model / "model.safetensors").write_bytes(weights)
    (model / "1_Pooling" / "config.json").write_text('{"pooling_mode_mean_tokens": true}')
    subprocess.run(["bash", str(SCRIPTS / "split.sh"), str(model), str(tmp_path / "parts")], check=True)
    parts = sorted((tmp_path / "parts").glob("model.tar.part-*"))
    assert len(parts) == 3 and all(p.stat().st_size <= 16_000_000 for p in parts)
    subprocess.run(
        ["bash", str(SCRIPTS / "join.sh"), str(tmp_path / "parts"), str(tmp_path / "back")], check=True
    )
    assert (tmp_path / "back" / "model.safetensors").read_bytes() == weights
    assert (
        tmp_path / "back" / "1_Pooling" / "config.json"
    ).read_text() == '{"pooling_mode_mean_tokens": true}'
    # A damaged part is caught by the checksum, never unpacked.
    parts[1].write_bytes(parts[1].read_bytes()[:-1] + b"\0")
    broken = subprocess.run(
        ["bash", str(SCRIPTS / "join.sh"), str(tmp_path / "parts"), str(tmp_path / "again")],
        capture_output=True,
        check=False,
    )
    assert broken.returncode != 0 and not (tmp_path / "again").exists()


def test_the_recipes_unpack_inputs_packed_with_gzip_or_xz(tmp_path: Path) -> None:
    import gzip
    import lzma

    (tmp_path / "gpu").mkdir()
    (tmp_path / "gpu" / "squad.json.gz").write_bytes(gzip.compress(b'{"data": "gzip"}'))
    (tmp_path / "gpu" / "techqa.json.xz").write_bytes(lzma.compress(b'{"data": "xz"}'))
    script = f'WORK="{tmp_path}/work"; source "{SCRIPTS / "env.sh"}"; ls "$INPUT"'
    listed = subprocess.run(["bash", "-c", script], cwd=tmp_path, capture_output=True, text=True, check=True)
    assert sorted(listed.stdout.split()) == ["squad.json", "techqa.json"]
    assert (tmp_path / "work" / "input" / "techqa.json").read_text() == '{"data": "xz"}'
    assert (tmp_path / "work" / "input" / "squad.json").read_text() == '{"data": "gzip"}'
