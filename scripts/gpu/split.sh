#!/usr/bin/env bash
# Pack a model folder (subfolders too) into model.tar cut into parts of 16,000,000 bytes (the device returns
# files of at most 16 MiB, 8 of them: a float32 MiniLM is 6 parts), with the tar's SHA-256, so join.sh can put
# it back together and check it.
set -euo pipefail
src=$1 dst=$2
mkdir -p "$dst"
tar -cf "$dst/model.tar" -C "$src" .
( cd "$dst" && sha256sum model.tar > SHA256SUMS )
split -b 16000000 -a 2 "$dst/model.tar" "$dst/model.tar.part-"
rm "$dst/model.tar"
