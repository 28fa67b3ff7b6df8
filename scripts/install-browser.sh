#!/usr/bin/env bash
# The real browser of the trace browser's test (crates/cli/tests/it/browser.rs): Debian's
# chromium and chromium-driver, installed with apt-get when missing (root, or sudo without a
# password). Prints CHROMEDRIVER=… and CHROMIUM=… on success. When the packages cannot be
# installed it says so LOUDLY on stderr and prints BROWSER_SKIP=<why>, so the test skips with
# that reason instead of failing; it never skips silently.
set -uo pipefail

found() {
  command -v chromedriver >/dev/null 2>&1 && command -v chromium >/dev/null 2>&1
}

if ! found; then
  if [ "$(id -u)" = 0 ]; then
    sudo=
  elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    sudo="sudo -n"
  else
    sudo=none
  fi
  if [ "$sudo" != none ] && command -v apt-get >/dev/null 2>&1; then
    echo "== installing chromium and chromium-driver (apt-get) for the trace browser test" >&2
    export DEBIAN_FRONTEND=noninteractive
    if ! $sudo apt-get install -y -qq chromium chromium-driver >&2; then
      $sudo apt-get update -qq >&2 && $sudo apt-get install -y -qq chromium chromium-driver >&2
    fi
  fi
fi

if found; then
  echo "CHROMEDRIVER=$(command -v chromedriver)"
  echo "CHROMIUM=$(command -v chromium)"
  exit 0
fi
why="the Debian packages chromium and chromium-driver could not be installed (needs apt-get as root)"
{
  echo "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!"
  echo "!! WARNING: the trace browser test will be SKIPPED: $why"
  echo "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!"
} >&2
echo "BROWSER_SKIP=$why"
