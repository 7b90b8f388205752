#!/usr/bin/env bash
# The admin page in a real headless browser: installs Debian's chromium when
# no Chromium is on PATH, then runs the browser test, which must not skip.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v chromium >/dev/null && ! command -v chromium-browser >/dev/null && ! command -v google-chrome >/dev/null; then
  echo "== installing chromium (Debian)"
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi

echo "== browser test ($(command -v chromium || command -v chromium-browser || command -v google-chrome))"
BRIDGE_REQUIRE_BROWSER=1 go test -count=1 -run Browser -v ./internal/admin/
