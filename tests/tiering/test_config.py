"""The sidecar configuration file, the stores it opens, and the upload rate limit."""

from __future__ import annotations

import pickle
import re
import time
from pathlib import Path

import pytest

from kafkatier.storage.errors import ConfigError
from kafkatier.tiering.config import TieringConfig
from kafkatier.tiering.store.object_store import FsspecStore
from kafkatier.tiering.store.s3store import S3Store

CONF = Path(__file__).resolve().parents[2] / "conf" / "sidecar.properties"


def test_the_shipped_example_parses() -> None:
    config = TieringConfig.load(CONF)
    assert config.remote_url.startswith("s3://")
    store = config.open_store()
    assert isinstance(store, S3Store)
    clone = pickle.loads(pickle.dumps(store))
    assert clone.url == store.url and clone.settings == store.settings


def test_keys_are_checked(tmp_path: Path) -> None:
    good = {"log.dirs": "/a, /b", "remote.storage.url": "file:///r",
            "remote.log.manager.copy.max.bytes.per.second": "1000"}
    config = TieringConfig.from_properties(good, source="t")
    assert config.log_dirs == (Path("/a"), Path("/b")) and config.rate_limit_bps == 1000
    assert isinstance(config.open_store(), FsspecStore)
    with pytest.raises(ConfigError, match="unknown"):
        TieringConfig.from_properties({**good, "remote.storage.secret": "x"}, source="t")
    with pytest.raises(ConfigError, match="required"):
        TieringConfig.from_properties({"log.dirs": "/a"}, source="t")
    with pytest.raises(ConfigError, match="integer"):
        TieringConfig.from_properties({**good, "remote.log.metrics.port": "x"}, source="t")
    with pytest.raises(ConfigError, match=re.escape("mean 'remote.log.manager.task.interval.ms'")):
        TieringConfig.from_properties({**good, "remote.log.manager.task.intervall.ms": "1"},
                                      source="t")  # fmt: skip


@pytest.mark.parametrize(
    ("key", "value", "says"),
    [
        ("remote.storage.url", "s3:///prefix", "'' is not an S3 bucket name"),
        ("remote.storage.url", "s3://My_Bucket/p", "'My_Bucket' is not an S3 bucket name"),
        ("remote.storage.s3.endpoint.url", "127.0.0.1:9000", "an endpoint is a URL"),
        ("remote.storage.url", "memory://x", "memory:// keeps objects in this process's"),
        ("remote.storage.url", "ktb/prefix", "not a URL: give its scheme"),
    ],
)
def test_a_bad_store_setting_is_named(key: str, value: str, says: str) -> None:
    """Before, botocore's ParamValidationError or ValueError surfaced as "unexpected ...",
    naming no setting."""
    props = {"log.dirs": "/a", "remote.storage.url": "s3://bucket/p", key: value}
    with pytest.raises(ConfigError, match=re.escape(says)) as raised:
        TieringConfig.from_properties(props, source="t")
    assert raised.value.context["setting"] == key


@pytest.mark.parametrize("backend", ["file", "s3"])
def test_rate_limit_holds_uploads_to_the_rate(backend, tmp_path, request) -> None:
    src = tmp_path / "one-mib"
    src.write_bytes(b"x" * (1 << 20))
    rate = 4 << 20  # 1 MiB at 4 MiB/s: at least ~0.25 s
    if backend == "file":
        store = FsspecStore(f"file://{tmp_path / 'r'}", rate_limit_bps=rate)
    else:
        env = request.getfixturevalue("s3_env")
        store = S3Store(request.getfixturevalue("s3_url"), endpoint_url=env.endpoint,
                        region="us-east-1", rate_limit_bps=rate)
    start = time.monotonic()
    store.put_file("a", src)
    store.put_file("b", src)
    assert time.monotonic() - start >= 0.45  # 2 MiB at 4 MiB/s, minus the first burst
