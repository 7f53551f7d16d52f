"""The checks ``kafkatier run`` ends with must fail on exactly the faults they claim to catch, run
in Spark (a real local session), and the generated clickstream must be a pure function of its seed
and offsets. The replayed records are built with the job's own ``events_frame`` and
``state_frame``, so the checks are held to the bytes the job really writes."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kafkatier.cli.run import checks
from kafkatier.cli.run.checks import clickstream_frame, spark_check
from kafkatier.cli.run.job import events_frame, state_frame
from kafkatier.cli.run.source import EVENT_SCHEMA, PAGES, clickstream_table
from kafkatier.cli.run.verify import (
    Check,
    check_events,
    check_latest,
    check_state,
    check_written_once,
    event_json,
    expected_states,
)

pytest.importorskip("pyspark", reason="the end-of-run checks run in Spark")
REPLAYED_SCHEMA = ("partition int, offset long, key binary, value binary, "
                   "headers array<struct<key: string, value: binary>>")  # fmt: skip


def event(i: int, user: str, ts: int, page: str = "/") -> tuple[Any, ...]:
    return (f"e{i}", user, page, "view", ts)


EVENTS = [event(0, "a", 10), event(1, "b", 11), event(2, "a", 12), event(3, "a", 13)]
BATCHES = [0, 0, 0, 1]


def replayed(spark: Any, rows: list[Any]) -> Any:
    """Rows of the job's output frames as the reader returns them: partition 0, offsets 0..n."""
    dicts = [r.asDict() if hasattr(r, "asDict") else r for r in rows]
    out = [(0, i, d["key"], d["value"], d.get("headers")) for i, d in enumerate(dicts)]
    return spark.createDataFrame(out, REPLAYED_SCHEMA)


def written(spark: Any, frame: Any, events: list[tuple[Any, ...]], batches: list[int]) -> list[Any]:
    """What the job writes with ``frame`` (events_frame / state_frame) for each batch."""
    rows = []
    for batch in sorted(set(batches)):
        mine = [e for e, b in zip(events, batches, strict=True) if b == batch]
        rows += frame(spark.createDataFrame(mine, EVENT_SCHEMA), batch).collect()
    return rows


@pytest.fixture(scope="module")
def jobs(spark: Any) -> dict[str, Any]:
    events = written(spark, events_frame, EVENTS, BATCHES)
    states = {(json.loads(r["value"])["user_id"], json.loads(r["value"])["batch"]): r
              for r in written(spark, state_frame, EVENTS, BATCHES)}  # fmt: skip
    model = event_json(spark.createDataFrame(EVENTS, EVENT_SCHEMA))
    return {"events": events, "states": states, "model": model}


def test_events_check_passes_only_for_exactly_once(spark: Any, jobs: dict[str, Any]) -> None:
    events, model = jobs["events"], jobs["model"]
    good = check_events(replayed(spark, events), model)
    assert good.ok and good.detail.startswith("4 records replayed, 4 expected"), good.detail
    missing = check_events(replayed(spark, events[:-1]), model)
    assert not missing.ok and "1 missing, 0 extra" in missing.detail
    twice = check_events(replayed(spark, [*events, events[1]]), model)
    assert not twice.ok and "0 missing, 1 extra (1 duplicated)" in twice.detail
    other = written(spark, events_frame, [event(3, "a", 13, page="/cart")], [1])
    altered = check_events(replayed(spark, [*events[:-1], *other]), model)
    assert not altered.ok and "1 missing, 1 extra (0 duplicated)" in altered.detail
    empty = check_events(replayed(spark, []), model.limit(0))
    assert empty.ok and empty.detail.startswith("0 records replayed, 0 expected")


def test_expected_states_are_what_the_job_wrote(spark: Any, jobs: dict[str, Any]) -> None:
    derived = expected_states(replayed(spark, jobs["events"])).collect()
    by_key = {(r["user_id"], r["batch"]): r["v"] for r in derived}
    assert by_key == {k: r["value"].decode() for k, r in jobs["states"].items()}
    a1 = json.loads(by_key[("a", 1)])
    assert a1["event_id"] == "e3" and a1["batch_events"] == 1
    a0 = json.loads(by_key[("a", 0)])
    assert a0["event_id"] == "e2" and a0["batch_events"] == 2 and a0["ts"] == 12


def test_state_checks_catch_stale_unknown_and_repeated_values(
    spark: Any, jobs: dict[str, Any]
) -> None:
    events, s = replayed(spark, jobs["events"]), jobs["states"]
    a0, b0, a1 = s[("a", 0)], s[("b", 0)], s[("a", 1)]

    def run(rows: list[Any]) -> tuple[Check, Check]:
        latest, once = check_state(replayed(spark, rows), events)
        return latest, once

    assert all(c.ok for c in run([b0, a1]))  # compacted
    assert all(c.ok for c in run([a0, b0, a1]))  # an uncleaned head is fine
    latest, _ = run([a1, b0, a0])  # stale: an older state after the newest
    assert not latest.ok and "1 wrong or missing, 0 unexpected keys" in latest.detail
    assert not run([a1])[0].ok  # b's state lost
    forged = {"key": a1["key"], "value": a1["value"].replace(b'"page":"/"', b'"page":"/x"')}
    assert forged["value"] != a1["value"]
    latest, once = run([b0, a1, forged])
    assert not latest.ok and not once.ok and "1 unknown, 1 twice" in once.detail  # a1 too
    latest, once = run([a1, b0, a1])  # a state written twice
    assert latest.ok and not once.ok and "0 unknown, 1 twice" in once.detail
    stranger = {"key": b"z", "value": b0["value"]}
    latest, _ = run([b0, a1, stranger])
    assert not latest.ok and "1 unexpected keys" in latest.detail


def test_each_state_check_alone(spark: Any, jobs: dict[str, Any]) -> None:
    states = expected_states(replayed(spark, jobs["events"]))
    s = jobs["states"]
    good = replayed(spark, [s[("b", 0)], s[("a", 1)]])
    assert check_latest(good, states).detail == "2 keys, 2 expected"
    assert check_written_once(good, states).detail == "2 records left of 3 written"


def test_clickstream_is_a_pure_function_of_seed_and_offsets() -> None:
    whole = clickstream_table(7, 50, 1000, 0, 300).to_pylist()
    assert whole == clickstream_table(7, 50, 1000, 0, 300).to_pylist()
    parts = (clickstream_table(7, 50, 1000, 0, 120).to_pylist()
             + clickstream_table(7, 50, 1000, 120, 300).to_pylist())  # fmt: skip
    assert parts == whole  # any split into micro-batches gives the same events
    assert whole != clickstream_table(8, 50, 1000, 0, 300).to_pylist()
    assert [e["ts"] for e in whole] == list(range(1000, 1300))
    assert len({e["event_id"] for e in whole}) == 300
    users = {e["user_id"] for e in whole}
    assert 40 <= len(users) <= 50 and {e["page"] for e in whole} == set(PAGES)


def test_the_model_generated_in_spark_is_the_stream(
    spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(checks, "MODEL_CHUNK", 70)  # 300 events: four whole chunks and a part
    rows = [r.asDict() for r in clickstream_frame(spark, 7, 50, 1000, 300).collect()]
    assert sorted(rows, key=lambda r: r["ts"]) == clickstream_table(7, 50, 1000, 0, 300).to_pylist()
    assert clickstream_frame(spark, 7, 50, 1000, 0).count() == 0


def test_a_check_spark_cannot_run_fails_with_one_line(spark: Any) -> None:
    broken = spark.range(3).selectExpr("raise_error('disk on fire') AS value")
    check = spark_check("events: every event exactly once",
                        lambda: check_events(broken, spark.range(0).selectExpr("'x' AS v")))
    assert not check.ok and "disk on fire" in check.detail, check.detail
    assert check.detail.startswith("could not run: ") and "\n" not in check.detail
