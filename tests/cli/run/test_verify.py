"""The checks ``kafkatier run`` ends with must fail on exactly the faults they claim to catch, and
the generated clickstream must be a pure function of its seed and offsets."""

from __future__ import annotations

import json
from typing import Any

from kafkatier.cli.run.source import PAGES, clickstream_events, clickstream_table
from kafkatier.cli.run.verify import Record, check_events, check_state, expected_states


def event(i: int, user: str, ts: int) -> dict[str, Any]:
    return {"event_id": f"e{i}", "user_id": user, "page": "/", "event_type": "view", "ts": ts}


def rec(offset: int, value: dict[str, Any], batch: int | None = None) -> Record:
    headers = {} if batch is None else {"batch": str(batch).encode()}
    return (0, offset, value["user_id"].encode(), value, headers)


EVENTS = [event(0, "a", 10), event(1, "b", 11), event(2, "a", 12), event(3, "a", 13)]
BATCHES = [0, 0, 0, 1]
REPLAYED = [rec(i, e, b) for i, (e, b) in enumerate(zip(EVENTS, BATCHES, strict=True))]


def test_events_check_passes_only_for_exactly_once() -> None:
    assert check_events(REPLAYED, EVENTS).ok
    missing = check_events(REPLAYED[:-1], EVENTS)
    assert not missing.ok and "1 missing" in missing.detail
    twice = check_events([*REPLAYED, REPLAYED[1]], EVENTS)
    assert not twice.ok and "1 extra (1 duplicated)" in twice.detail
    altered = [*REPLAYED[:-1], rec(3, {**EVENTS[3], "page": "/cart"}, 1)]
    assert not check_events(altered, EVENTS).ok


def test_expected_state_is_the_last_event_of_the_users_last_batch() -> None:
    states = expected_states(REPLAYED)
    assert states[("a", 0)] == {"user_id": "a", "event_id": "e2", "page": "/",
                                "event_type": "view", "ts": 12, "batch_events": 2, "batch": 0}
    assert states[("a", 1)]["event_id"] == "e3" and states[("a", 1)]["batch_events"] == 1
    assert states[("b", 0)]["event_id"] == "e1"


def test_state_checks_catch_stale_unknown_and_repeated_values() -> None:
    states = expected_states(REPLAYED)
    compacted = [rec(0, states[("b", 0)]), rec(1, states[("a", 1)])]
    assert all(c.ok for c in check_state(compacted, REPLAYED))
    full = [rec(0, states[("a", 0)]), rec(1, states[("b", 0)]), rec(2, states[("a", 1)])]
    assert all(c.ok for c in check_state(full, REPLAYED))  # an uncleaned head is fine
    stale = [rec(0, states[("a", 1)]), rec(1, states[("b", 0)]), rec(2, states[("a", 0)])]
    latest, _ = check_state(stale, REPLAYED)
    assert not latest.ok and "1 wrong or missing" in latest.detail
    lost = check_state([rec(0, states[("a", 1)])], REPLAYED)[0]
    assert not lost.ok
    forged = [*compacted, rec(2, {**states[("a", 1)], "page": "/x"})]
    assert not check_state(forged, REPLAYED)[0].ok and not check_state(forged, REPLAYED)[1].ok
    repeated = [rec(0, states[("a", 1)]), *compacted]
    assert check_state(repeated, REPLAYED)[0].ok and not check_state(repeated, REPLAYED)[1].ok


def test_clickstream_is_a_pure_function_of_seed_and_offsets() -> None:
    whole = clickstream_events(7, 50, 1000, 300)
    assert whole == clickstream_events(7, 50, 1000, 300)
    parts = (clickstream_table(7, 50, 1000, 0, 120).to_pylist()
             + clickstream_table(7, 50, 1000, 120, 300).to_pylist())  # fmt: skip
    assert parts == whole  # any split into micro-batches gives the same events
    assert whole != clickstream_events(8, 50, 1000, 300)
    assert [e["ts"] for e in whole] == list(range(1000, 1300))
    assert len({e["event_id"] for e in whole}) == 300
    users = {e["user_id"] for e in whole}
    assert 40 <= len(users) <= 50 and {e["page"] for e in whole} == set(PAGES)
    assert json.loads(json.dumps(whole[0])) == whole[0]  # plain JSON values, as replayed
