#!/usr/bin/env bash
# What the browser tests (tests/browser) need beyond the Python dev extras:
# Debian's Chromium (Playwright drives it through executable_path; we never run
# `playwright install`, which downloads a browser build) and the fonts it renders with.
# The Python side (playwright, zxing-cpp) comes from the dev extras in pyproject.toml.
# Safe to run again; needs root (CI runs as root).
set -euo pipefail

if [ -x /usr/bin/chromium ]; then
    echo "chromium already installed: $(/usr/bin/chromium --version 2>/dev/null || true)"
    exit 0
fi

SUDO=""
if [ "$(id -u)" != "0" ]; then
    SUDO="sudo"
fi

export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends chromium fonts-liberation fonts-dejavu-core
/usr/bin/chromium --version
