#!/usr/bin/env bash
# Keeps the shared build directory from filling the disk.
#
# .ci/run builds every fresh clone into one target directory outside the clone (so dependencies
# are compiled once). Cargo names the workspace's artifacts after the clone's path, so each clone
# leaves its own copy of the library, the binary and every test binary (gigabytes in debug
# builds). This removes this crate's artifacts that were not touched for six hours; dependencies
# and anything else stay. A removed artifact is simply rebuilt.
#
# Usage: scripts/prune-target.sh [TARGET_DIR]   (default: $CARGO_TARGET_DIR)
set -euo pipefail
cd "$(dirname "$0")/.."
target=${1:-${CARGO_TARGET_DIR:-}}
if [ -z "$target" ] || [ ! -d "$target" ]; then
  exit 0
fi
# Only a directory that holds this crate's builds: never prune someone else's target directory.
if ! compgen -G "$target/*/deps/libragtrail-*" > /dev/null \
  && ! compgen -G "$target/*/.fingerprint/ragtrail-*" > /dev/null; then
  exit 0
fi
names=(ragtrail libragtrail ragtrail_cli libragtrail_cli ragtrail-cli it)
for f in crates/*/benches/*.rs crates/*/examples/*.rs; do
  [ -e "$f" ] && names+=("$(basename "$f" .rs)")
done
for d in crates/*/examples/*/; do
  [ -d "$d" ] && names+=("$(basename "$d")")
done
before=$(du -sm "$target" 2>/dev/null | cut -f1)
for profile in "$target"/debug "$target"/release; do
  [ -d "$profile" ] || continue
  for name in "${names[@]}"; do
    find "$profile/deps" "$profile/examples" "$profile/.fingerprint" -maxdepth 1 \
      -name "${name}-*" -mmin +360 -exec rm -rf {} + 2>/dev/null || true
  done
  # Incremental caches are per clone path too and only speed up repeated builds of one clone.
  find "$profile/incremental" -mindepth 1 -maxdepth 1 -mmin +360 -exec rm -rf {} + 2>/dev/null || true
done
after=$(du -sm "$target" 2>/dev/null | cut -f1)
echo "== pruned $target: ${before:-?} MiB -> ${after:-?} MiB"
