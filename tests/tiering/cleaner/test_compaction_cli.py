"""``kafkatier clean --remote``: one remote-compaction pass by hand from the sidecar's
properties file, with its text and JSON reports and its usage errors."""

from __future__ import annotations

import json

from compaction_support import (
    Workload,
)
from test_compaction import TOPIC, append, assert_no_orphans, settings, tier
from tier_fixtures import only

from kafkatier.cli.main import main
from kafkatier.tiering.metadata.manifest_store import ManifestStore


def _conf(tmp_path, logs, s3_url, s3_env):
    conf = tmp_path / "sidecar.properties"
    conf.write_text(f"log.dirs={logs}\nremote.storage.url={s3_url}\n"
                    f"remote.storage.s3.endpoint.url={s3_env.endpoint}\n"
                    "remote.storage.s3.region=us-east-1\nremote.log.orphan.grace.ms=0\n")
    return conf


def test_clean_remote_json_then_text(tmp_path, s3_env, s3_url, s3_store, capsys):
    logs = tmp_path / "logs"
    append(logs, Workload(21, keys=6), 120, 0, settings(3000, 0))
    tier(logs, s3_store)
    conf = _conf(tmp_path, logs, s3_url, s3_env)
    assert main(["clean", "--remote", "--config", str(conf), "--json"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(o["topic"], o["partition"], o["cleaned"], o["error"]) for o in lines] == [
        (TOPIC, 0, True, None)]
    out = lines[0]
    assert out["records_removed"] > 0 and out["bytes_after"] < out["bytes_before"]
    manifest, _ = ManifestStore(s3_store).load(only(s3_store, TOPIC, 0))
    assert manifest.cleaner_checkpoint == out["checkpoint"] == manifest.highest_offset + 1
    assert_no_orphans(s3_store)
    # a topic setting for this run only: nothing is dirty, but a zero ratio still says no
    assert main(["clean", "--remote", "--config", str(conf), "--topic", TOPIC,
                 "--config", "min.cleanable.dirty.ratio=0"]) == 0
    text = capsys.readouterr().out
    assert text.startswith(f"{TOPIC}-0 [remote]: ") and "not due" in text


def test_clean_remote_usage_errors(tmp_path, s3_env, s3_url, capsys):
    conf = _conf(tmp_path, tmp_path / "logs", s3_url, s3_env)
    assert main(["clean", "--remote"]) == 2
    assert main(["clean", "--remote", "--config", str(conf), str(tmp_path)]) == 2
    assert main(["clean"]) == 2
    assert "--remote" in capsys.readouterr().err
