#!/usr/bin/env bash
# The inverse of split.sh: join model.tar.part-* into model.tar, check its SHA-256 and unpack it into DEST.
set -euo pipefail
src=$1 dst=$2
tmp=$(mktemp -d)
cat "$src"/model.tar.part-* > "$tmp/model.tar"
( cd "$tmp" && sha256sum -c --quiet "$src/SHA256SUMS" )
mkdir -p "$dst"
tar -xf "$tmp/model.tar" -C "$dst"
rm -rf "$tmp"
echo "joined into $dst, checksum matches"
