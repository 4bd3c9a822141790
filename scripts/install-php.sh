#!/usr/bin/env bash
# What the WooCommerce plugin's tests (tests/integration/test_woocommerce_plugin.py, the
# PHPUnit suite in integrations/woocommerce) need: Debian's PHP command line and PHPUnit.
# Safe to run again; installing needs root or password-less sudo.
#
# `--if-possible` (what `make test` runs): when they cannot be installed here, print one line
# saying why and exit 0, so the rest of the suite still runs (those tests then skip, or fail
# under CI=true).
set -euo pipefail

if command -v php >/dev/null && command -v phpunit >/dev/null; then
    exit 0
fi

best_effort=false
if [ "${1:-}" = "--if-possible" ]; then
    best_effort=true
fi

skip() {
    echo "WooCommerce plugin tests will not run: $1 (run scripts/install-php.sh as root)" >&2
    exit 0
}

SUDO=""
if [ "$(id -u)" != "0" ]; then
    if sudo -n true 2>/dev/null; then
        SUDO="sudo -n"
    elif $best_effort; then
        skip "php or phpunit is missing and installing them needs root"
    else
        SUDO="sudo"
    fi
fi

export DEBIAN_FRONTEND=noninteractive
echo "installing Debian's php-cli and phpunit for the WooCommerce plugin's tests (once)"
if ! { $SUDO apt-get update -q && $SUDO apt-get install -y -q --no-install-recommends \
        php-cli phpunit php-mbstring; } >/tmp/install-php.log 2>&1; then
    if $best_effort; then
        skip "apt-get could not install php-cli and phpunit (see /tmp/install-php.log)"
    fi
    cat /tmp/install-php.log >&2
    exit 1
fi
php --version | head -n 1
