"""``spark.read.format("kafkatier")`` (and ``readStream``) over a topic tiered to a real S3 server
(SeaweedFS, tests/conftest.py): the sidecar's Tierer uploads the closed segments and local
retention deletes most of them, then Spark with the remote options returns exactly what it
returns from the full local log, which is what was written (checked in test_source_remote and
test_source): offsets, keys, values, timestamps, headers, both isolation levels, with aborted
transactions whose ``txnindex`` entries are remote only.

Credentials reach Spark's Python workers the way a deployment gives them: through their
environment (here ``SparkContext.environment``, set before the source is registered, since a
registered source carries the environment of its registration), never through options."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_datasource import Row, Written, append, load, rows_of
from test_remote import tier, write_topics
from test_stream import run_available_now
from tier_fixtures import only

from kafkatier.sink.source.datasource import register_data_source
from kafkatier.storage.log.directory import LogDirectory
from kafkatier.tiering.metadata.manifest_store import ManifestStore
from kafkatier.tiering.store.s3store import S3Store
from kafkatier.tiering.store.weed import WeedServer


@pytest.fixture(scope="module")
def s3_spark(spark: Any, s3_server: WeedServer) -> Iterator[Any]:
    """The session with the S3 identity in the driver's and the Python workers' environment."""
    env = spark.sparkContext.environment
    saved = dict(env)
    with pytest.MonkeyPatch.context() as mp:
        for name, value in s3_server.env.items():
            mp.setenv(name, value)
        mp.delenv("AWS_PROFILE", raising=False)
        env.update(s3_server.env)
        register_data_source(spark)
        try:
            yield spark
        finally:
            env.clear()
            env.update(saved)
            register_data_source(spark)


class S3Tiered:
    """A log dir written and read in full, then tiered to a fresh prefix of the S3 bucket."""

    def __init__(self, spark: Any, server: WeedServer, root: Path) -> None:
        self.spark = spark
        self.logs = root / "logs"
        self.written = write_topics(self.logs)
        self.before = {  # what the reader returns from the full log (test_source_remote)
            c: self.written.visible(committed=c == "read_committed")
            for c in ("read_committed", "read_uncommitted")
        }
        url = f"s3://{server.bucket}/reader-{root.name}"
        self.store = S3Store(url, endpoint_url=server.endpoint, region="us-east-1")
        tier(self.logs, self.store)
        self.remote = {"remote.storage.url": url,
                       "remote.storage.s3.endpoint.url": server.endpoint,
                       "remote.storage.s3.region": "us-east-1"}  # fmt: skip

    def read(self, path: Path | None = None, **options: str) -> list[Row]:
        given = {"includeHeaders": "true", **self.remote, **options}
        return rows_of(load(self.spark, path or self.logs, **given))

    def remote_segments(self, topic: str, partition: int) -> list[tuple[int, int]]:
        manifest, _ = ManifestStore(self.store).load(only(self.store, topic, partition))
        return [(s.base_offset, s.end_offset) for s in manifest.contiguous()]


@pytest.fixture(scope="module")
def tiered(
    s3_spark: Any, s3_server: WeedServer, tmp_path_factory: pytest.TempPathFactory
) -> S3Tiered:
    return S3Tiered(s3_spark, s3_server, tmp_path_factory.mktemp("remote-s3"))


@pytest.mark.parametrize("isolation", ["read_committed", "read_uncommitted"])
def test_spark_reads_remote_and_local_as_the_full_log(tiered: S3Tiered, isolation: str) -> None:
    got = tiered.read(subscribe="rt,ro", isolationLevel=isolation)
    assert got == tiered.before[isolation]
    if isolation == "read_committed":
        local_only = rows_of(load(tiered.spark, tiered.logs, subscribe="rt,ro"))
        assert len(local_only) < len(got) // 2


def test_spark_offsets_and_timestamps_in_remote_segments(tiered: S3Tiered) -> None:
    segs = tiered.remote_segments("rt", 0)
    start, end = segs[1][0] + 1, segs[2][1]
    got = tiered.read(subscribe="rt", startingOffsets=f'{{"rt":{{"0":{start},"1":-2}}}}',
                      endingOffsets=f'{{"rt":{{"0":{end},"1":-1}}}}')  # fmt: skip
    expected = [r for r in tiered.before["read_committed"]
                if r[0] == "rt" and (r[1] == 1 or start <= r[2] < end)]  # fmt: skip
    assert got == expected
    target = next(r for r in tiered.before["read_committed"] if r[:2] == ("rt", 0) and r[2] > start)
    got = tiered.read(assign='{"rt":[0]}', startingTimestamp=str(target[5]))
    expected = [r for r in tiered.before["read_committed"]
                if r[:2] == ("rt", 0) and r[2] >= target[2]]  # fmt: skip
    assert got == expected and target[2] < segs[-1][1]


def test_spark_partition_only_in_s3(tiered: S3Tiered, tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    shutil.copytree(tiered.logs, logs)
    shutil.rmtree(logs / "ro-1")
    remote_end = tiered.remote_segments("ro", 1)[-1][1] + 1
    got = tiered.read(logs, assign='{"ro":[1]}')
    expected = [r for r in tiered.before["read_committed"]
                if r[:2] == ("ro", 1) and r[2] < remote_end]  # fmt: skip
    assert got == expected and expected


def test_spark_sidecar_config_file(tiered: S3Tiered, tmp_path: Path) -> None:
    config = tmp_path / "sidecar.properties"
    config.write_text(
        f"log.dirs={tiered.logs}\nremote.storage.url={tiered.remote['remote.storage.url']}\n"
        f"remote.storage.s3.endpoint.url={tiered.remote['remote.storage.s3.endpoint.url']}\n"
        "remote.storage.s3.region=us-east-1\n"
    )
    reader = tiered.spark.read.format("kafkatier").option("kafkatier.config", str(config))
    got = rows_of(reader.option("subscribe", "rt,ro").option("includeHeaders", "true").load())
    assert got == tiered.before["read_committed"]


def test_spark_bad_remote_options_name_the_option(tiered: S3Tiered, s3_server: WeedServer) -> None:
    missing_bucket = f"s3://no-such-bucket-{tiered.logs.parent.name.lower()}/x"
    with pytest.raises(Exception, match=r"'remote\.storage\.url'") as info:
        tiered.read(subscribe="rt", **{"remote.storage.url": missing_bucket})
    assert "NoSuchBucket" in str(info.value)
    assert s3_server.secret_key not in str(info.value)
    assert s3_server.access_key not in str(info.value)
    with pytest.raises(Exception, match=r"'remote\.storage\.url'"):
        tiered.read(subscribe="rt", **{"remote.storage.url": "nosuchproto://bucket/x"})


def test_streaming_replays_from_s3_then_follows_the_local_log(
    tiered: S3Tiered, tmp_path: Path
) -> None:
    logs = tmp_path / "logs"
    shutil.copytree(tiered.logs, logs)
    options = {**tiered.remote, "subscribe": "rt", "includeHeaders": "true"}
    first = run_available_now(tiered.spark, logs, tmp_path / "ckpt", **options)
    expected = [r for r in tiered.before["read_committed"] if r[0] == "rt"]
    assert first.sorted_rows() == expected
    written = Written(logs)  # only the new rows
    with LogDirectory(logs) as ld:
        append(written, ld.get_or_create("rt", 1), 5, headers=True)
    second = run_available_now(tiered.spark, logs, tmp_path / "ckpt", **options)
    assert second.sorted_rows() == written.visible() and len(second.rows) == 5
