#!/usr/bin/env bash
# Installs what gptrain needs on a fresh Debian/Ubuntu machine, skipping what is there.
# usage: scripts/install_deps.sh [--test]   (--test adds what the test suite needs)
set -euo pipefail
pkgs=(g++ make bible-kjv unicode-data python3 nodejs npm curl ca-certificates)
[ "${1:-}" = "--test" ] && pkgs+=(python3-torch python3-numpy)
missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "installing: ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    command -v sudo > /dev/null || { echo "error: need root (or sudo) to apt-get install ${missing[*]}"; exit 1; }
    SUDO=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" > /dev/null
