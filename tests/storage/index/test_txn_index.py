"""TransactionIndex and AbortedTxn: Kafka's layout, TransactionIndexTest vectors, file lifetime."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkatier.storage.errors import CorruptIndexError
from kafkatier.storage.index.txn_index import AbortedTxn, TransactionIndex

VECTORS = Path(__file__).resolve().parents[2] / "data" / "vectors"
CORPUS = Path(__file__).resolve().parents[3].parent / "shared" / "kafka-corpus"
KAFKA = json.loads((VECTORS / "txn_index.json").read_text())

int64 = st.integers(-(2**63), 2**63 - 1)


def _txns(rows: list[dict[str, int]]) -> list[AbortedTxn]:
    return [AbortedTxn(**row) for row in rows]


def _index_with(tmp_path: Path, txns: list[AbortedTxn]) -> TransactionIndex:
    idx = TransactionIndex(tmp_path / "00000000000000000000.txnindex", 0)
    for txn in txns:
        idx.append(txn)
    return idx


# --------------------------------------------------------------------- bytes


def test_entry_bytes_match_the_kafka_vector() -> None:
    for case in json.loads((VECTORS / "index_entries.json").read_text())["aborted_txn"]:
        expected = bytes.fromhex(case.pop("hex"))
        txn = AbortedTxn(**case)
        assert txn.pack() == expected and len(expected) == AbortedTxn.SIZE == 34
        assert AbortedTxn.unpack(b"xx" + expected, 2) == txn


@settings(max_examples=200)
@given(pid=int64, first=int64, last=int64, lso=int64)
def test_pack_unpack_round_trip(pid: int, first: int, last: int, lso: int) -> None:
    txn = AbortedTxn(pid, first, last, lso)
    assert AbortedTxn.unpack(txn.pack()) == txn


def test_version_check_reads_only_the_first_byte() -> None:
    body = AbortedTxn(1, 2, 3, 4).pack()[2:]
    assert AbortedTxn.unpack(b"\x00\x07" + body) == AbortedTxn(1, 2, 3, 4)  # low byte ignored
    assert AbortedTxn.unpack(b"\xff\x00" + body).producer_id == 1  # negative byte passes
    with pytest.raises(CorruptIndexError) as err:
        AbortedTxn.unpack(b"\x01\x00" + body, file="x.txnindex")
    assert err.value.context["file"] == "x.txnindex" and err.value.context["position"] == 0
    with pytest.raises(CorruptIndexError):
        AbortedTxn.unpack(body)  # 32 bytes: truncated


# --------------------------------------------------------------------- Kafka's TransactionIndexTest


def test_kafka_collect_aborted_transactions(tmp_path: Path) -> None:
    vector = KAFKA["collect"]
    txns = _txns(vector["entries"])
    idx = _index_with(tmp_path, txns)
    for case in vector["cases"]:
        found, complete = idx.collect_aborted_txns(case["fetch_offset"], case["upper_bound_offset"])
        assert found == [txns[i] for i in case["expected_entries"]], case
        assert complete is case["complete"], case


def test_kafka_truncate_then_reset(tmp_path: Path) -> None:
    vector = KAFKA["truncate"]
    txns = _txns(vector["entries"])
    idx = _index_with(tmp_path, txns)
    for step in vector["steps"]:
        idx.truncate_to(step["truncate_to"])
        assert idx.collect_aborted_txns(0, 100)[0] == [txns[i] for i in step["expected_entries"]]
    assert idx.size_in_bytes == 3 * 34
    idx.append(AbortedTxn(9, 40, 45, 46))  # last offset 45 > 35 is in order again
    idx.reset()
    assert idx.collect_aborted_txns(0, 100) == ([], False) and idx.exists


def test_search_stops_at_the_first_lso_reaching_the_bound(tmp_path: Path) -> None:
    # Entries made up to separate ">=" from ">": the second would overlap [0, 20) but the first
    # entry's LSO already equals the bound, so the search must stop before reading it.
    first, second = AbortedTxn(0, 0, 10, 20), AbortedTxn(1, 15, 30, 31)
    idx = _index_with(tmp_path, [first, second])
    assert idx.collect_aborted_txns(0, 20) == ([first], True)
    assert idx.collect_aborted_txns(0, 21) == ([first, second], True)
    assert idx.collect_aborted_txns(31, 31) == ([], True)
    assert idx.collect_aborted_txns(31, 32) == ([], False)


def test_last_offset_must_increase(tmp_path: Path) -> None:
    idx = _index_with(tmp_path, [AbortedTxn(1, 5, 15, 13)])
    for last in (15, 10):
        with pytest.raises(ValueError):
            idx.append(AbortedTxn(0, 0, last, 11))
    idx.close()
    reopened = TransactionIndex(idx.path, 0)
    with pytest.raises(ValueError):  # also checked against the file after a reopen
        reopened.append(AbortedTxn(0, 0, 15, 11))
    reopened.append(AbortedTxn(3, 50, 60, 55))
    assert reopened.all_entries() == [AbortedTxn(1, 5, 15, 13), AbortedTxn(3, 50, 60, 55)]


def test_sanity_check(tmp_path: Path) -> None:
    txns = _txns(KAFKA["collect"]["entries"])
    idx = _index_with(tmp_path, txns)
    idx.sanity_check()
    idx.close()
    with pytest.raises(CorruptIndexError) as err:
        TransactionIndex(idx.path, 100).sanity_check()  # entries end below base 100
    assert err.value.context["file"] == str(idx.path) and err.value.context["position"] == 0
    TransactionIndex(idx.path, 10).sanity_check()  # last offsets 10, 15, ... are all >= 10


def test_bad_version_in_file_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "0.txnindex"
    path.write_bytes(AbortedTxn(1, 2, 3, 4).pack() + b"\x01" + bytes(33))
    with pytest.raises(CorruptIndexError) as err:
        TransactionIndex(path, 0).all_entries()
    assert err.value.context["file"] == str(path) and err.value.context["position"] == 34


# --------------------------------------------------------------------- file lifetime


def test_file_is_created_lazily(tmp_path: Path) -> None:
    idx = TransactionIndex(tmp_path / "0.txnindex", 0)
    idx.reset()
    idx.flush()
    idx.truncate_to(0)
    idx.close()
    assert not idx.exists and idx.size_in_bytes == 0 and list(idx) == []
    assert idx.collect_aborted_txns(0, 10) == ([], False)
    idx.sanity_check()
    assert not idx.path.exists()
    idx.append(AbortedTxn(0, 0, 10, 2))
    idx.flush()
    assert idx.exists and idx.path.read_bytes() == AbortedTxn(0, 0, 10, 2).pack()


def test_append_and_read_after_close_and_rename(tmp_path: Path) -> None:
    idx = _index_with(tmp_path, [AbortedTxn(0, 0, 10, 2)])
    idx.close()
    idx.append(AbortedTxn(1, 5, 15, 16))  # reopens, like Kafka's channel
    renamed = tmp_path / "00000000000000000000.txnindex.swap"
    idx.rename_to(renamed)
    idx.append(AbortedTxn(2, 16, 20, 21))
    assert idx.path == renamed and not (tmp_path / "00000000000000000000.txnindex").exists()
    assert [t.first_offset for t in idx] == [0, 5, 16]
    idx.close()
    assert renamed.stat().st_size == 3 * 34
    assert idx.delete() and not renamed.exists() and not idx.delete()


def test_rename_before_the_file_exists(tmp_path: Path) -> None:
    idx = TransactionIndex(tmp_path / "0.txnindex", 0)
    idx.rename_to(tmp_path / "0.txnindex.cleaned")
    idx.append(AbortedTxn(0, 0, 1, 2))
    assert (tmp_path / "0.txnindex.cleaned").exists()
    assert not (tmp_path / "0.txnindex").exists()


def test_partial_tail_is_ignored_like_kafka(tmp_path: Path) -> None:
    path = tmp_path / "0.txnindex"
    path.write_bytes(AbortedTxn(1, 2, 3, 4).pack() + bytes(20))
    assert TransactionIndex(path, 0).all_entries() == [AbortedTxn(1, 2, 3, 4)]


# --------------------------------------------------------------------- the real corpus


def test_every_corpus_txn_index() -> None:
    if not CORPUS.is_dir():
        pytest.skip(f"Kafka corpus not found at {CORPUS}")
    paths = sorted(CORPUS.rglob("*.txnindex"))
    if not paths:
        pytest.skip("the corpus has no .txnindex files (no aborted transactions were written)")
    for path in paths:
        idx = TransactionIndex(path, int(path.name.split(".")[0]))
        idx.sanity_check()
        lasts = [t.last_offset for t in idx]
        assert lasts == sorted(set(lasts)), path
        assert path.stat().st_size // 34 == len(lasts)
