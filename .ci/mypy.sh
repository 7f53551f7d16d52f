#!/usr/bin/env bash
# mypy cannot follow setuptools' editable mapping (storage/ -> kafkatier.storage), so it checks a
# copy laid out as installed, in a private temp dir (concurrent runs must not share one); error
# paths look like kafkatier/storage/x.py.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
root=$(mktemp -d "${TMPDIR:-/tmp}/kafkatier-mypy.XXXXXX")
trap 'rm -rf "$root"' EXIT
mkdir -p "$root/kafkatier"
for pkg in storage sink tiering serve cli; do
  # every package below the folder (subpackages included), Python files only
  find "$pkg" -name '*.py' -not -path '*/__pycache__/*' | while read -r f; do
    mkdir -p "$root/kafkatier/$(dirname "$f")"
    cp "$f" "$root/kafkatier/$f"
  done
done
cd "$root"
"$repo/.venv/bin/python" -m mypy --config-file "$repo/pyproject.toml" --explicit-package-bases \
  --cache-dir "$root/.mypy_cache" kafkatier "$@"
