#!/usr/bin/env bash
# The retriever's GPU recipe: the bi-encoder fine-tuned with the Sentence-BERT objective (multiple-negatives
# ranking with BM25 hard negatives, mean pooling kept) on SQuAD v1.1 train and spanqa-techqa train questions,
# in one device call, weights back in files of at most 16 MB. Prepare here:
#
#   .venv/bin/python bench/techqa/techqa.py trainset --negatives 0 --squad ../shared/datasets/squad-v1.1-train.json \
#       --squad-questions 90000 --out gpu/retriever-train.json
#   cp ../shared/datasets/squad-v1.1-dev-public.json gpu/
#   # device (carry: gpu):  bash scripts/gpu/train_retriever.sh
#   bash scripts/gpu/join.sh $FILES_AT/retriever runs/gpu-retriever
#
# Ship it only when it beats the packaged model on techqa test passage@5 and SQuAD recall@1; an index made with
# the old one is re-embedded with `spanqa reindex --retriever-model PATH` (never mixed).
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-runs/gpu-out}
WORK=${WORK:-/tmp/retriever-run}
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
python3 -m spanqa.cli retriever train --train gpu/retriever-train.json --out "$WORK" \
    --eval gpu/squad-v1.1-dev-public.json --eval-limit 2000 --loss mnr --hard-negatives 1 \
    --epochs "${EPOCHS:-1}" --batch-size "${BATCH:-128}" --lr "${LR:-3e-5}" --max-seq-length 256 \
    --save-every 1000 --device cuda --time-limit "${MINUTES:-8}"
mkdir -p "$OUT/retriever"
bash scripts/gpu/split.sh "$WORK/final" "$OUT/retriever"
