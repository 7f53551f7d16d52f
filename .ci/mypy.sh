#!/usr/bin/env bash
# mypy cannot follow setuptools' editable mapping (storage/ -> kafkatier.storage), so it checks a
# copy laid out as installed: build/mypy-root/kafkatier/<pkg>/ (error paths point there).
set -euo pipefail
cd "$(dirname "$0")/.."
root=build/mypy-root
rm -rf "$root" && mkdir -p "$root/kafkatier"
for pkg in storage sink tiering cli; do
  mkdir -p "$root/kafkatier/$pkg"
  cp "$pkg"/*.py "$root/kafkatier/$pkg/"
done
cd "$root"
exec ../../.venv/bin/python -m mypy --config-file ../../pyproject.toml --explicit-package-bases \
  kafkatier "$@"
