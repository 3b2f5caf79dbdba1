"""Write the JSON Schemas of the records spanqa prints and serves into docs/schemas/ (a test checks that the
committed files are what this writes)."""

from __future__ import annotations

import json
from pathlib import Path

from spanqa.server.models import PUBLISHED, published_schema

OUT = Path(__file__).resolve().parents[1] / "docs" / "schemas"


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for name in PUBLISHED:
        path = OUT / f"{name}.schema.json"
        path.write_text(json.dumps(published_schema(name), indent=2, sort_keys=True) + "\n", encoding="utf-8")
        print(path)


if __name__ == "__main__":
    main()
