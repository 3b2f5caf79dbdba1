#!/usr/bin/env bash
# Two runs of the reader's recipe (train_reader.sh) side by side on one GPU in one device call, and the one whose
# best checkpoint scored higher on spanqa-techqa dev (F1 over the pairs) comes back: only one exported reader
# fits the files a call returns (8 files, 64 MiB). A and B take the recipe's variables as A_LR, B_SEED and so on
# (defaults: A is the recipe; B lr 5e-5, seed 46, techqa read 6 times over 2.5 epochs). Both histories come back.
#   # device (carry: gpu):  OUT=$OUT bash scripts/gpu/train_reader_pair.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-runs/gpu-out}
MINUTES=${MINUTES:-6}
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
