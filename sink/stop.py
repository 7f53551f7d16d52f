"""Closing the sink cleanly when its streaming query stops.

A Kafka broker that shuts down cleanly trims each active segment's preallocated indexes, writes
a producer snapshot at the log end and leaves the clean-shutdown marker, so the next start
recovers nothing. ``foreachBatch`` tells a sink nothing when its query ends, so the sink listens
for it (a ``StreamingQueryListener`` registered by the first batch of each query) and closes its
logs in a turn on the log dir (:meth:`KafkaLogSink.close`); a later batch reopens them. The
listener goes on the session that runs the query: a batch's DataFrame belongs to a clone of it,
whose query manager never hears of the query. Where no listener can be registered (Spark Connect
without them) the sink stays open as before, and ``close()`` does the same by hand.

The listener takes Spark's events as they come from the JVM and looks only at a terminated
query's id. pyspark's own listener wrapper turns every event into Python objects before calling
its listener: each micro-batch's progress cost about seventy py4j reflection calls (each
iteration over a Java collection ends in an exception pyspark classifies by name), in the
driver's Python and in the JVM, beside the next micro-batch (a py4j trace and Java Flight
Recorder samples of ``bench/sink_stream.py``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, ClassVar

log = logging.getLogger(__name__)


EXIT_WAIT_S = 30.0
"""How long the driver's exit waits for a batch under way before it leaves the logs unclosed
(the next start recovers them, as after a crash)."""


def close_at_exit(close_when_idle: Callable[[float], None]) -> None:
    """Call ``close_when_idle(EXIT_WAIT_S)`` when the driver's Python exits: the listener's
    event comes from the JVM a moment after the query ends, and a script that ends with
    ``awaitTermination()`` or ``stop()`` exits before it arrives, leaving the logs unflushed,
    the staging files of the last batches and no clean-shutdown marker. Kept by a weak
    reference (``close_when_idle`` is a bound method): a sink the program dropped is not kept
    alive for it."""
    import atexit
    import weakref

    ref = weakref.WeakMethod(close_when_idle)

    def at_exit() -> None:
        found = ref()
        if found is not None:
            found(EXIT_WAIT_S)

    atexit.register(at_exit)


def close_when_stopped(session: Any, query_id: str, close: Callable[[], None]) -> bool:
    """Call ``close`` once the query ``query_id`` (a batch of which has ``session``) terminates;
    False when no session running it takes a listener."""
    try:
        owner = _owner(session, query_id)
        owner.streams.addListener(_listener(query_id, close))
        return True
    except Exception as exc:
        log.info("the sink cannot watch query %s for its end (%s): call close() when done",
                 query_id, exc)  # fmt: skip
        return False


def _listener(query_id: str, close: Callable[[], None]) -> Any:
    """A ``StreamingQueryListener`` whose JVM side hands it the raw events (module docstring):
    every end of the query (a restart from its checkpoint keeps its id) calls ``close``, a
    no-op when nothing is open."""
    from pyspark import SparkContext
    from pyspark.sql.streaming.listener import StreamingQueryListener

    class CloseOnStop(StreamingQueryListener):
        """Both what ``streams.addListener`` takes and, behind its ``_jlistener``, Spark's
        ``PythonStreamingQueryListener`` itself: the JVM calls these with its own events."""

        def onQueryStarted(self, event: Any) -> None:
            pass

        def onQueryProgress(self, event: Any) -> None:
            pass

        def onQueryIdle(self, event: Any) -> None:
            pass

        def onQueryTerminated(self, event: Any) -> None:
            if str(event.id().toString()) != query_id:
                return
            try:
                close()
            except Exception:  # the listener bus would only log it, with less context
                log.exception("closing the sink after query %s stopped failed", query_id)

        @property
        def _jlistener(self) -> Any:
            if not hasattr(self, "_wrapped"):
                jvm = SparkContext._jvm
                assert jvm is not None
                self._wrapped = jvm.PythonStreamingQueryListenerWrapper(self)
            return self._wrapped

        class Java:
            implements: ClassVar[list[str]] = [
                "org.apache.spark.sql.streaming.PythonStreamingQueryListener"
            ]

    return CloseOnStop()


def _owner(session: Any, query_id: str) -> Any:
    """The session whose query manager runs ``query_id``: the active or default session when the
    batch's own (a clone) does not know it."""
    from pyspark.sql import SparkSession

    for candidate in (session, SparkSession.getActiveSession(), SparkSession.builder.getOrCreate()):
        if candidate is not None and candidate.streams.get(query_id) is not None:
            return candidate
    raise LookupError(f"no session runs query {query_id}")
