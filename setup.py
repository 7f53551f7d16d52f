"""The wheel's packages: every package below the five top-level folders, under ``kafkatier``.

The metadata lives in pyproject.toml. Only the package list is computed here, because
setuptools' own discovery cannot rename what it finds: ``storage/log`` must install as
``kafkatier.storage.log``. A subpackage added later is found without editing anything.
"""

from setuptools import find_packages, setup

TOP_LEVEL = ("storage", "sink", "tiering", "serve", "cli")

setup(
    packages=[
        f"kafkatier.{name}"
        for name in find_packages(include=[p for top in TOP_LEVEL for p in (top, f"{top}.*")])
    ],
    package_dir={f"kafkatier.{top}": top for top in TOP_LEVEL},
)
