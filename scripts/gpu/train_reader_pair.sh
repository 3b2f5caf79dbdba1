#!/usr/bin/env bash
# Two runs of the reader's recipe (train_reader.sh) side by side on one GPU in one device call, and the one whose
# best checkpoint scored higher on spanqa-techqa dev (F1 over the pairs) comes back: only one exported reader
# fits the files a call returns (8 files, 64 MiB). A and B take the recipe's variables as A_LR, B_SEED and so on
# (defaults: A is the recipe; B lr 5e-5, seed 46, techqa read 6 times over 2.5 epochs). Both histories come back.
# Then each run is averaged with the reader it started from at the weights SOUPS (`spanqa reader soups`, on the
# GPU: SQuAD v1.1 public dev and techqa dev pairs, never abstaining; soups-A.json, soups-B.json come back), and
# the run kept is the one whose best average keeps SQuAD F1 >= SQUAD_FLOOR (fp32; the int8 reader loses about
# 0.2) at the highest techqa-dev F1: what is shipped is an average, and SQuAD's floor is what limits its weight.
# Scoring the averages takes at most SOUPS_SECONDS (100); the raw best is kept when they cannot be scored.
#   # device (carry: gpu):  OUT=$OUT bash scripts/gpu/train_reader_pair.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-runs/gpu-out}
# Training and the averages' scoring within one call of 10 minutes: 5 of training each (side by side), about
# 1.5 to read the data and export, at most SOUPS_SECONDS to score.
MINUTES=${MINUTES:-5}
mkdir -p "$OUT"
run() {
    local name=$1 lr=$2 seed=$3 repeat=$4 epochs=$5
    OUT=/tmp/out$name WORK=/tmp/run$name LR=$lr SEED=$seed TECHQA_REPEAT=$repeat EPOCHS=$epochs \
        MINUTES=$MINUTES bash scripts/gpu/train_reader.sh >"$OUT/log-$name.txt" 2>&1
}
run A "${A_LR:-5e-5}" "${A_SEED:-45}" "${A_REPEAT:-4}" "${A_EPOCHS:-3}" &
run B "${B_LR:-5e-5}" "${B_SEED:-46}" "${B_REPEAT:-6}" "${B_EPOCHS:-2.5}" &
wait
python3 - "$OUT" <<'EOF'
import json
import shutil
import sys
from pathlib import Path

out = Path(sys.argv[1])
best = {}
for name in ("A", "B"):
    history = Path(f"/tmp/out{name}/history.jsonl")
    if not history.exists():
        print(f"run {name} left no history (see log-{name}.txt)")
        continue
    shutil.copy(history, out / f"history-{name}.jsonl")
    scores = [json.loads(line).get("f1") for line in history.read_text().splitlines() if line.strip()]
    scores = [s for s in scores if s is not None]
    if scores:
        best[name] = max(scores)
print("best techqa-dev pair F1:", best)
if best:
    kept = max(best, key=best.get)
    shutil.copytree(f"/tmp/out{kept}/reader", out / "reader")
    print("kept", kept)
EOF
SOUPS=${SOUPS:-0.4,0.5,0.6,0.7}
if [ -n "$SOUPS" ]; then
    export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
    for name in A B; do
        input=/tmp/run$name/input
        if [ -d "/tmp/run$name/export" ] && [ -f "$input/squad-v1.1-dev-public.json" ]; then
            timeout "${SOUPS_SECONDS:-100}" python3 -m spanqa.cli reader soups "/tmp/run$name/export" \
                reader/models/spanqa-reader-minilm --weights "$SOUPS" --device "${DEVICE:-cuda}" --json \
                --data "squad=$input/squad-v1.1-dev-public.json" --data "techqa-dev=$input/techqa-dev.json" \
                >"$OUT/soups-$name.json" 2>"$OUT/soups-$name.log" &
        fi
    done
    wait || true
    python3 - "$OUT" "${SQUAD_FLOOR:-81.7}" <<'EOF'
import json
import shutil
import sys
from pathlib import Path

out, floor = Path(sys.argv[1]), float(sys.argv[2])
best = {}
for name in ("A", "B"):
    try:
        rows = json.loads((out / f"soups-{name}.json").read_text())
    except (OSError, ValueError):
        print(f"run {name}: its averages were not scored (see soups-{name}.log)")
        continue
    kept = [row for row in rows if row["squad"]["f1"] >= floor]
    if kept:
        best[name] = max(kept, key=lambda row: row["techqa-dev"]["f1"])
        print(f"run {name}: the best average with SQuAD F1 >= {floor}: {best[name]}")
    else:
        print(f"run {name}: no average keeps SQuAD F1 >= {floor}")
if best:
    kept = max(best, key=lambda name: best[name]["techqa-dev"]["f1"])
    print("kept after averaging:", kept)
    if Path(f"/tmp/out{kept}/reader").is_dir():
        shutil.rmtree(out / "reader", ignore_errors=True)
        shutil.copytree(f"/tmp/out{kept}/reader", out / "reader")
        (out / "kept.txt").write_text(f"{kept} {json.dumps(best[kept])}\n")
EOF
fi
