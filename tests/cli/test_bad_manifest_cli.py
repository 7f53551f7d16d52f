"""A manifest that does not parse, seen by every command that reads the remote side: each
answers with one line naming the manifest's key, exits 1, and changes nothing (no partition is
restored from it, no object is written or deleted on its strength)."""

from __future__ import annotations

from pathlib import Path

import pytest
from tier_fixtures import only, write_tiered

from kafkatier.cli.main import main
from kafkatier.tiering.config import TieringConfig
from kafkatier.tiering.errors import TieringError
from kafkatier.tiering.metadata.manifest import manifest_key
from kafkatier.tiering.read.remote_reader import joined_batches
from kafkatier.tiering.sidecar.tierer import Tierer
from kafkatier.tiering.store.object_store import FsspecStore


def _objects(root: Path) -> dict[str, bytes]:
    files = sorted(p for p in root.rglob("*") if p.is_file())
    return {str(p.relative_to(root)): p.read_bytes() for p in files}


def _tiered(tmp_path: Path, partitions: int) -> tuple[Path, FsspecStore, Path]:
    """A tiered topic uploaded by one sidecar pass: its log dir, the store, the sidecar file."""
    logs = write_tiered(tmp_path / "logs", partitions=partitions)
    store = FsspecStore(f"file://{tmp_path / 'remote'}")
    conf = tmp_path / "sidecar.properties"
    conf.write_text(f"log.dirs={logs}\nremote.storage.url={store.url}\n")
    assert Tierer(TieringConfig.load(conf)).run_once().failures == 0
    return logs, store, conf


def test_every_command_names_a_manifest_that_does_not_parse(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    logs, store, conf = _tiered(tmp_path, 1)
    key = manifest_key(only(store, "tiered", 0))
    store.put_bytes(key, b'{"version": 1, "segments": [{"base')
    before = _objects(tmp_path / "remote")
    target = tmp_path / "restored"
    commands = {
        "restore": ["restore", "--config", str(conf), "--topic", "tiered", "--to", str(target),
                    "--quiet"],
        "clean": ["clean", "--remote", "--config", str(conf), "--topic", "tiered"],
        "status": ["status", "--config", str(conf)],
    }  # fmt: skip
    capsys.readouterr()
    for name, argv in commands.items():
        assert main(argv) == 1, name
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(f"kafkatier {name}: error: "), (name, err)
        assert "malformed manifest" in err[0] and key in err[0], (name, err)
    assert not (target / "tiered-0").exists()
    assert _objects(tmp_path / "remote") == before
    with pytest.raises(TieringError, match="malformed manifest"):
        list(joined_batches(store, logs, "tiered", 0, 0))


def test_status_lists_every_partition_beside_one_whose_manifest_is_damaged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One bad manifest failed the whole status: no partition was listed. The others are
    listed as they are, the damaged one with its local side, its error on stderr, exit 1."""
    _, store, conf = _tiered(tmp_path, 3)
    key = manifest_key(only(store, "tiered", 1))
    store.put_bytes(key, b"[]")
    capsys.readouterr()
    assert main(["status", "--config", str(conf), "--refresh"]) == 1
    out, err = capsys.readouterr()
    [line] = err.strip().splitlines()
    assert line.startswith("kafkatier status: error: tiered-1: ") and key in line, line
    rows = {row.split()[0]: row for row in out.splitlines()[1:]}
    assert sorted(rows) == ["tiered-0", "tiered-1", "tiered-2"]
    assert rows["tiered-0"].count("[") == rows["tiered-2"].count("[") == 2  # local and remote
    assert rows["tiered-1"].count("[") == 1 and "(error: remote side unknown)" in rows["tiered-1"]
