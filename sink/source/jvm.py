"""The ``kafkatier`` source's batch scans decoded inside Spark's JVM: the driver's planner that
the JVM reader (``sink/java/io/kafkatier/source``) asks through a py4j callback, and the loading
of that reader into a running session.

Why: a Python data source hands its rows to Spark as Arrow batches, and that hand-off alone
costs more than Spark's whole Parquet scan of the same rows (``bench/read_handoff.py``), so no
decoder in Python workers reads at Parquet speed. The JVM reader decodes record batches straight
into Spark's column vectors, only the columns a query uses (``bench/read_jvm.py``).

How: ``register_data_source(spark, reader="jvm")`` (or ``"auto"``) puts the jar that
``sink/jvm.py`` builds on the class loader every py4j thread of the driver shares (spark-submit's
``MutableURLClassLoader``), where Spark finds ``kafkatier`` through the jar's
``DataSourceRegister`` entry, and registers the Python source as ``kafkatier_python``. The JVM
provider's tables are the Python source's; the scans this planner puts in scope (local logs of
v2 batches), batch and streaming, are read in the JVM, everything else (remote segments, logs
that begin with legacy message sets) by the Python reader. The planner resolves options and
offsets exactly as the Python source (``queries.batch_plan``; a streaming query's offsets are
``stream.StreamOffsets``', kept here per query between its triggers) and answers with each
range's partition directory: the executors find the batches in the segment files, as the
Python reader's do.
"""

from __future__ import annotations

import functools
import json
import logging
import os
from pathlib import Path
from typing import Any, ClassVar, Final

from kafkatier.sink.source.options import SourceOptions, parse_options
from kafkatier.sink.source.plan import topic_partitions
from kafkatier.sink.source.pushdown import Narrowing
from kafkatier.sink.source.queries import batch_plan
from kafkatier.sink.source.stream import StreamOffsets
from kafkatier.sink.source.task import ReadTask, checked_start
from kafkatier.storage.checkpoint.metadata import partition_dir_name
from kafkatier.storage.errors import ConfigError, KafkaTierError
from kafkatier.storage.wire import MAGIC_OFFSET

log = logging.getLogger(__name__)
READERS: Final = ("auto", "jvm", "python")
PROVIDER_CLASS: Final = "io.kafkatier.source.KafkaTierProvider"
PYTHON_NAME: Final = "kafkatier_python"
"""The name of the Python source while the JVM provider answers ``kafkatier``."""


class JvmReaderUnavailable(ConfigError):
    """``reader='jvm'`` was asked for and cannot be had (the message says why)."""


def check_reader(reader: str) -> str:
    if reader not in READERS:
        raise ConfigError(f"reader={reader!r}: expected one of {', '.join(READERS)}",
                          setting="reader")  # fmt: skip
    return reader


def in_scope(opts: SourceOptions) -> bool:
    """Whether the JVM reader reads a batch scan of these options: local logs of v2 batches."""
    return opts.remote is None and not _legacy(opts)


def _legacy(opts: SourceOptions) -> bool:
    """Whether a subscribed partition starts with magic 0/1 message sets (Kafka before 0.11),
    which only the Python reader decodes: a log upgraded in place keeps its old segments
    first, so the first batch of each partition tells (remembered per first segment: a log's
    format at its start never changes). Options the Python source will refuse also answer
    True: its error is the one to show."""
    try:
        tps = topic_partitions(opts)
    except KafkaTierError:
        return True
    for topic, partition in tps:
        directory = Path(opts.path) / partition_dir_name(topic, partition)
        logs = sorted(n for n in os.listdir(directory) if n.endswith(".log"))
        if logs and _starts_legacy(str(directory / logs[0])):
            return True
    return False


@functools.lru_cache(maxsize=1 << 16)
def _starts_legacy(first_segment: str) -> bool:
    try:
        with open(first_segment, "rb") as f:
            head = f.read(MAGIC_OFFSET + 1)
    except FileNotFoundError:  # deleted by retention since the listing
        return False
    return len(head) > MAGIC_OFFSET and head[MAGIC_OFFSET] < 2


class Planner:
    """The callback ``KafkaTierProvider.planner`` (requests and answers: ``Planner.java``).
    Errors go back as one line each (the JVM raises them); unexpected ones are logged here with
    their traceback first."""

    def __init__(self, base_dir: str, enabled: bool) -> None:
        self.base_dir = base_dir
        self.enabled = enabled

    def apply(self, request: str) -> str:
        try:
            return json.dumps(self._answer(json.loads(request)))
        except KafkaTierError as exc:
            return json.dumps({"error": type(exc).__name__, "message": str(exc)})
        except Exception as exc:
            log.exception("kafkatier's planner failed on %s", request)
            return json.dumps({"error": type(exc).__name__, "message": str(exc)})

    def _answer(self, request: dict[str, Any]) -> dict[str, Any]:
        ask = request["ask"]
        streaming = {"scope": None, "plan": False, "stream": True}[ask]
        opts = parse_options(request["options"], streaming=streaming, base_dir=self.base_dir)
        if ask == "scope":
            return {"jvm": self.enabled and in_scope(opts)}
        cores = request.get("cores")  # Spark's defaultParallelism
        if ask == "stream":
            return _stream_call(request, opts, cores)
        return _tasks(batch_plan(opts, Narrowing.of(request["filters"]), cores))

    class Java:
        implements: ClassVar[list[str]] = ["java.util.function.Function"]


_STREAMS: dict[int, StreamOffsets] = {}
"""The offsets of each running query the JVM reader reads (``JvmStream.java``), by the stream's
id: kept by the module, not by one planner, so that a later ``register_data_source`` (which
installs a new planner) leaves running queries their state."""


def _stream_call(request: dict[str, Any], opts: SourceOptions, cores: int | None) -> dict[str, Any]:
    """One call of a JVM stream (``Planner.stream`` in ``Planner.java``); offsets travel as the
    JSON strings the Python source's stream writes (``json.dumps``), so checkpoints match."""
    key, call = int(request["stream"]), request["call"]
    if call == "stop":
        _STREAMS.pop(key, None)
        return {}
    offsets = _STREAMS.get(key)
    if offsets is None:  # the stream's first call
        offsets = _STREAMS[key] = StreamOffsets(opts)
    if call == "plan":
        planned = offsets.plan(json.loads(request["start"]), json.loads(request["end"]), cores)
        return _tasks(planned)
    if call == "available_now":
        offsets.prepare_available_now()
        return {}
    if call == "default_limit":
        return {"max_rows": offsets.default_max_rows}
    found = {
        "initial": offsets.initial,
        "latest": lambda: offsets.latest(json.loads(request["start"]), request.get("max_rows")),
        "report_latest": offsets.report_latest,
    }[call]()
    return {"offset": None if found is None else json.dumps(found)}


def _tasks(planned: list[tuple[ReadTask, ...]]) -> dict[str, Any]:
    return {"tasks": [[_range(task) for task in tasks] for tasks in planned]}


def _range(task: ReadTask) -> dict[str, Any]:
    """A range as the JVM reader takes it (``ReadRange.java``): its start checked against the
    log start the survey found (``failOnDataLoss``); the executor finds the batches itself."""
    directory = Path(task.log_dir) / partition_dir_name(task.topic, task.partition)
    start = checked_start(task, task.start, task.log_start_hint, str(directory))
    return {
        "dir": str(directory), "topic": task.topic, "partition": task.partition,
        "start": start, "end": task.end, "committed": task.committed,
        "aborted": [[t.producer_id, t.first_offset] for t in task.aborted],
        "chunk_bytes": task.chunk_bytes, "fail_on_data_loss": task.fail_on_data_loss,
    }  # fmt: skip


def use_jvm_reader(spark: Any, reader: str, base_dir: str) -> bool:
    """Whether the JVM provider answers ``kafkatier`` in ``spark``'s JVM after this call (then
    the Python source must be registered as :data:`PYTHON_NAME`). The provider is loaded
    whatever ``reader`` says (``"python"`` disables its planner: every scan is the Python
    source's), so that no session of this JVM ever holds a Python source named ``kafkatier``
    beside it: Spark refuses two sources of one name."""
    check_reader(reader)
    sc = _context(spark)
    try:
        provider = _loaded_provider(sc) or _load(spark, sc)
    except JvmReaderUnavailable as exc:
        if reader == "jvm":
            raise
        if reader == "auto":
            log.warning("the kafkatier source decodes in Python workers (slower): %s", exc)
        return False
    from pyspark.java_gateway import ensure_callback_server_started

    ensure_callback_server_started(sc._gateway)  # type: ignore[no-untyped-call]
    planner = Planner(base_dir, enabled=reader != "python")
    provider.getField("planner").set(None, planner)
    return True


def _context(spark: Any) -> Any:
    """The SparkContext behind ``spark``; None under Spark Connect (no JVM to load into)."""
    try:
        return spark.sparkContext
    except Exception:
        return None


def _loaded_provider(sc: Any) -> Any:
    from kafkatier.sink.jvm import driver_loader

    if sc is None:
        return None
    try:
        return driver_loader(sc).loadClass(PROVIDER_CLASS)
    except Exception:
        return None


def _load(spark: Any, sc: Any) -> Any:
    from kafkatier.sink.jvm import (
        MUTABLE_LOADER,
        JvmEncoderUnavailable,
        add_jar,
        driver_loader,
        jar_path,
    )

    fallback = "register_data_source(spark, reader='python')"

    if sc is None:
        raise JvmReaderUnavailable("Spark Connect session: no JVM to load the reader into")
    if spark._jsparkSession.sessionState().dataSourceManager().dataSourceExists("kafkatier"):
        raise JvmReaderUnavailable(
            "a Python source named kafkatier is already registered in this session (Spark "
            "refuses two sources of one name): register it only through "
            "register_data_source(spark, reader=...)"
        )
    loader = driver_loader(sc)
    if loader.getClass().getName() != MUTABLE_LOADER:
        raise JvmReaderUnavailable(
            f"the driver's class loader is {loader.getClass().getName()}, not Spark's "
            "MutableURLClassLoader: the reader's jar cannot be added to it"
        )
    try:
        jar = jar_path(fallback)
    except JvmEncoderUnavailable as exc:
        raise JvmReaderUnavailable(str(exc)) from exc
    add_jar(sc, jar, loader)
    return loader.loadClass(PROVIDER_CLASS)
