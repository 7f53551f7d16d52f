"""Closing the sink cleanly when its streaming query stops.

A Kafka broker that shuts down cleanly trims each active segment's preallocated indexes, writes
a producer snapshot at the log end and leaves the clean-shutdown marker, so the next start
recovers nothing. ``foreachBatch`` tells a sink nothing when its query ends, so the sink listens
for it (a ``StreamingQueryListener`` registered by the first batch of each query) and closes its
logs in a turn on the log dir (:meth:`KafkaLogSink.close`); a later batch reopens them. The
listener goes on the session that runs the query: a batch's DataFrame belongs to a clone of it,
whose query manager never hears of the query. Where no listener can be registered (Spark Connect
without them) the sink stays open as before, and ``close()`` does the same by hand.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)


def close_when_stopped(session: Any, query_id: str, close: Callable[[], None]) -> bool:
    """Call ``close`` once the query ``query_id`` (a batch of which has ``session``) terminates;
    False when no session running it takes a listener."""
    try:
        owner = _owner(session, query_id)
        from pyspark.sql.streaming.listener import StreamingQueryListener

        class CloseOnStop(StreamingQueryListener):
            """Every end of the query (a restart from its checkpoint keeps its id): ``close``
            is a no-op when nothing is open."""

            def onQueryStarted(self, event: Any) -> None:
                pass

            def onQueryProgress(self, event: Any) -> None:
                pass

            def onQueryIdle(self, event: Any) -> None:
                pass

            def onQueryTerminated(self, event: Any) -> None:
                if str(event.id) != query_id:
                    return
                try:
                    close()
                except Exception:  # the listener bus would only log it, with less context
                    log.exception("closing the sink after query %s stopped failed", query_id)

        owner.streams.addListener(CloseOnStop())
        return True
    except Exception as exc:
        log.info("the sink cannot watch query %s for its end (%s): call close() when done",
                 query_id, exc)  # fmt: skip
        return False


def _owner(session: Any, query_id: str) -> Any:
    """The session whose query manager runs ``query_id``: the active or default session when the
    batch's own (a clone) does not know it."""
    from pyspark.sql import SparkSession

    for candidate in (session, SparkSession.getActiveSession(), SparkSession.builder.getOrCreate()):
        if candidate is not None and candidate.streams.get(query_id) is not None:
            return candidate
    raise LookupError(f"no session runs query {query_id}")
