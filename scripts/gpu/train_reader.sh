#!/usr/bin/env bash
# The reader's GPU recipe: the whole training (several epochs over SQuAD v1.1 train, its unanswerable pairs and
# spanqa-techqa train) in one device call of at most 10 minutes on one H100 (7 of training, about 1.5 more to
# read the data, score the last weights and export), weights back in files of at most 16 MB. Prepare here (no
# GPU needed), then run on the device, then join and evaluate here on the CPU:
#
#   bash scripts/gpu/prepare.sh reader      # techqa train/dev pairs and SQuAD, compressed, into gpu/ (git-ignored)
#   # device (carry: gpu):  bash scripts/gpu/train_reader.sh
#   bash scripts/gpu/join.sh $FILES_AT/reader runs/gpu-reader     # the split weights, joined and checked
#   spanqa reader average runs/gpu-reader reader/models/spanqa-reader-minilm runs/reader-avg --weight 0.7
#
# The last step gives back the SQuAD F1 that training on documentation costs (the model card has the numbers).
# On the device python3 already holds torch, transformers, click and rich: spanqa runs from the checkout with
# PYTHONPATH, nothing is installed. EPOCHS, LR, BATCH, SEED and MINUTES override the recipe; techqa train is read
# TECHQA_REPEAT times per epoch (default 4; SQuAD train is 15 times its size). To try the whole script here
# first: PATH=$PWD/.venv/bin:$PATH DEVICE=cpu MINUTES=0.5 OUT=/tmp/gpu-try bash scripts/gpu/train_reader.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-runs/gpu-out}
WORK=${WORK:-/tmp/reader-run}
source scripts/gpu/env.sh
techqa=()
for _ in $(seq "${TECHQA_REPEAT:-4}"); do techqa+=(--train "$INPUT/techqa-train.json"); done
python3 -m spanqa.cli reader train \
    --train "$INPUT/squad-v1.1-train.json" "${techqa[@]}" \
    --exclude-ids gpu/squad-v1.1-train.ambiguous-ids.txt \
    --init reader/models/spanqa-reader-minilm --out "$WORK/run" \
    --eval "$INPUT/techqa-dev.json" --eval-limit 2000 \
    --max-seq-length 384 --stride 128 --epochs "${EPOCHS:-3}" --batch-size "${BATCH:-64}" \
    --lr "${LR:-5e-5}" --warmup 0.06 --save-every 400 --negatives 0.2 --seed "${SEED:-45}" --device "${DEVICE:-cuda}" \
    --time-limit "${MINUTES:-7}"
python3 -m spanqa.cli reader export "$WORK/run/best" "$WORK/export"
mkdir -p "$OUT/reader"
bash scripts/gpu/split.sh "$WORK/export" "$OUT/reader"
cp "$WORK/run/history.jsonl" "$OUT/"
