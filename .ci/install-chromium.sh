#!/bin/sh
# Install Debian's chromium for tests/reports/test_browser.py (headless; no network use at test time).
# Called from .ci/run. CI runs as root; elsewhere it uses sudo when available.
# Idempotent: does nothing when chromium is already installed.
set -eu

if command -v chromium >/dev/null 2>&1; then
    echo "install-chromium: $(chromium --version 2>/dev/null | tail -n 1) already installed"
    exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        SUDO="sudo"
    else
        echo "install-chromium: not root and no sudo; install the 'chromium' package yourself" >&2
        exit 1
    fi
fi

export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# fonts-dejavu-core: matplotlib's figures are PNG already, but the page text needs a font to lay out
$SUDO apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
echo "install-chromium: $(chromium --version 2>/dev/null | tail -n 1)"
