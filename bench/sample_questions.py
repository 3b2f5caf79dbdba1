"""The sample folder, asked everything SQuAD asks of it: end-to-end EM/F1 of the top answer.

    .venv/bin/python bench/sample_questions.py --out bench/results/sample-questions.json
    .venv/bin/python bench/sample_questions.py --reader path/to/another/reader

examples/docs/ holds the leading paragraphs of five SQuAD v1.1 dev articles (CC BY-SA 4.0; see
examples/README.md). This ingests the folder into a temporary index with the default settings and asks every
question of "$SPANQA_DATASETS/squad-v1.1-dev-public.json" about those paragraphs, as a user would (the whole
folder searched, not the gold paragraph), scoring the top answer with the official SQuAD EM/F1 (an
abstention scores 0). It is the quick check of a reader on the documents the README demonstrates with; the
misses are listed in --out.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import SQUAD_DEV, emit_results, machine
from examples.make_samples import OUT_DIR as SAMPLE_DIR
from examples.make_samples import SAMPLES
from spanqa import pipeline
from spanqa.reader.squad import SquadExample, load_squad, score_prediction
from spanqa.runtime import Runtime
from spanqa.settings import DEFAULT_READER_MODEL, Settings


def sample_questions(data: Path) -> list[SquadExample]:
    """Every question about a paragraph in the sample folder, in file order."""
    leading = {title: paragraphs for title, _, paragraphs in SAMPLES}
    return [ex for ex in load_squad(data) if ex.paragraph_index < leading.get(ex.title, 0)]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, default=SQUAD_DEV, help="SQuAD v1.1 dev JSON (public half).")
    parser.add_argument(
        "--reader", default=DEFAULT_READER_MODEL, help="Reader name or path (default: shipped)."
    )
    parser.add_argument("--out", type=Path, help="Write the results (and every miss) as JSON here.")
    args = parser.parse_args()

    questions = sample_questions(args.data)
    if not questions:
        raise SystemExit(f"{args.data}: no question is about the sample folder's paragraphs")
    with tempfile.TemporaryDirectory(prefix="spanqa-samples-") as work:
        settings = Settings.load(data_dir=Path(work) / "data").replace(reader_model=args.reader)
        with Runtime(settings) as runtime:
            runtime.ingest_job().run([SAMPLE_DIR])
            exact = f1 = 0.0
            misses = []
            started = time.perf_counter()
            for example in questions:
                question, gold = example.question.strip(), [a.text for a in example.answers]
                result = pipeline.ask(runtime, question)
                text = result.answers[0].text if result.answers else ""
                em_one, f1_one = score_prediction(text, gold)
                exact, f1 = exact + em_one, f1 + f1_one
                if not em_one:
                    misses.append({"question": question, "answer": text, "gold": gold})
            seconds = time.perf_counter() - started
    emit_results(
        {
            "bench": "sample_questions",
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "machine": machine(),
            "reader_model": args.reader,
            "reader_precision": settings.reader_precision,
            "questions": len(questions),
            "exact_match": round(100 * exact / len(questions), 2),
            "f1": round(100 * f1 / len(questions), 2),
            "seconds": round(seconds, 1),
            "misses": misses,
        },
        args.out,
    )


if __name__ == "__main__":
    main()
