#!/usr/bin/env bash
# Installs Debian's Chromium for the headless-browser check of the HTML audit report.
# Idempotent: does nothing when `chromium` is already on PATH. Never fails the build: when the
# install is impossible (not root, no apt-get, no network) it says so and the browser test skips
# with an explicit reason.
set -u

if command -v chromium >/dev/null 2>&1; then
    echo "install_chromium: chromium already installed ($(command -v chromium))"
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "install_chromium: SKIPPED, apt-get is not available; install Chromium by hand to run the browser check of the HTML report" >&2
    exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "install_chromium: SKIPPED, not root; run 'sudo apt-get install -y --no-install-recommends chromium' to run the browser check of the HTML report" >&2
    exit 0
fi

echo "install_chromium: installing Debian's chromium package"
export DEBIAN_FRONTEND=noninteractive
if apt-get update -qq && apt-get install -y -qq --no-install-recommends chromium; then
    echo "install_chromium: installed $(chromium --version 2>/dev/null || echo chromium)"
else
    echo "install_chromium: FAILED to install chromium with apt-get; the browser check of the HTML report will be skipped" >&2
fi
exit 0
