#!/usr/bin/env bash
# Installs the given Debian packages that are missing (apt-get update first, sudo when not root);
# does nothing when all are installed. Used by tools/build.sh and tools/test.sh.
set -euo pipefail

missing=()
for p in "$@"; do
  dpkg -s "$p" 2>/dev/null | grep -q '^Status: install ok installed' || missing+=("$p")
done
((${#missing[@]})) || exit 0
as_root=()
[[ $(id -u) -eq 0 ]] || as_root=(sudo)
echo "sprig: installing ${missing[*]}"
"${as_root[@]}" apt-get update -q
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive \
  apt-get install -y -q --no-install-recommends "${missing[@]}"
