#!/usr/bin/env bash
# Prepare gpu/ here (no GPU needed) so that one device call runs a whole recipe, and check that what travels
# fits: the device takes the tracked files plus the carried gpu/, 64 MiB in all.
#   bash scripts/gpu/prepare.sh reader       # then, on the device (carry: gpu): bash scripts/gpu/train_reader.sh
#   bash scripts/gpu/prepare.sh retriever    # then, on the device (carry: gpu): bash scripts/gpu/train_retriever.sh
#   bash scripts/gpu/prepare.sh check        # only the size check, after changing what travels
# The big inputs travel compressed (gzip, or xz for the reader's; the recipes unpack them there); wheels of what the device lacks come from
# scripts/gpu/wheels.sh. SQUAD (default ../shared/datasets) is the folder of the SQuAD files.
set -euo pipefail
cd "$(dirname "$0")/../.."
recipe=${1:?usage: prepare.sh reader|retriever}
SQUAD=${SQUAD:-../shared/datasets}
LIMIT=$((64 * 1024 * 1024))
TECHQA="bench/techqa/techqa.py"
# Each recipe fills gpu/ from empty: what another recipe left there would travel too.
case "$recipe" in
reader | retriever) rm -rf gpu && mkdir gpu ;;
*) mkdir -p gpu ;;
esac
case "$recipe" in
reader)
    .venv/bin/python "$TECHQA" trainset --split train --negatives 1 --out gpu/techqa-train.json
    .venv/bin/python "$TECHQA" trainset --split dev --negatives 1 --out gpu/techqa-dev.json
    # SQuAD dev too: train_reader_pair.sh scores each run's averages on it (what limits the weight shipped).
    cp "$SQUAD/squad-v1.1-train.json" "$SQUAD/squad-v1.1-train.ambiguous-ids.txt" "$SQUAD/squad-v1.1-dev-public.json" gpu/
    # xz, not gzip: with the reader's weights in the tree, gzip's 15 MB of inputs no longer fit the 64 MiB
    # (xz: 11 MB).
    xz -9 -T0 -f gpu/squad-v1.1-train.json gpu/squad-v1.1-dev-public.json gpu/techqa-train.json gpu/techqa-dev.json
    ;;
retriever)
    .venv/bin/python "$TECHQA" trainset --negatives 0 --squad "$SQUAD/squad-v1.1-train.json" \
        --squad-questions 90000 --out gpu/retriever-train.json
    cp "$SQUAD/squad-v1.1-dev-public.json" gpu/
    gzip -f gpu/retriever-train.json gpu/squad-v1.1-dev-public.json
    # The starting model: the packaged all-MiniLM-L6-v2 (the device has no such package), in float16 to
    # travel (training loads it as float32).
    .venv/bin/python - <<'EOF'
from spanqa.retriever.training import load_bi_encoder
model = load_bi_encoder("sentence-transformers/all-MiniLM-L6-v2")
model.half().save("gpu/base-encoder")
EOF
    bash scripts/gpu/wheels.sh
    ;;
check) ;;
*)
    echo "prepare.sh: no recipe '$recipe' (reader, retriever or check)" >&2
    exit 2
    ;;
esac
weights=reader/models/spanqa-reader-minilm/model.safetensors
restore="git reset -q $weights && sed -i \"\\|^/$weights\$|d\" .git/info/exclude"
if [ "$recipe" = reader ] && ! git ls-files --error-unmatch "$weights" >/dev/null 2>&1; then
    echo "the reader's weights ($weights) are left out of git's index: they are the recipe's starting point;" >&2
    echo "put them back with '$restore'" >&2
    exit 1
fi
# What travels: the files git tracks and the untracked ones it does not ignore, and gpu/.
tree=$( (git ls-files -co --exclude-standard -z | du -cb --files0-from=- 2>/dev/null || true) | tail -1 | cut -f1)
carried=$(du -sb gpu | cut -f1)
total=$((tree + carried))
echo "travels: $((tree / 1048576)) MiB of the tree + $((carried / 1048576)) MiB of gpu/ = $((total / 1048576)) MiB (limit 64)"
if [ "$total" -gt "$LIMIT" ]; then
    echo "too big for one call." >&2
    if [ "$recipe" != reader ]; then
        echo "The retriever recipe does not read the reader's weights: leave them out of the call with" >&2
        echo "'git rm --cached -q $weights && echo /$weights >> .git/info/exclude', then run" >&2
        echo "'bash scripts/gpu/prepare.sh check'; after the call put them back with '$restore'." >&2
    fi
    exit 1
fi
