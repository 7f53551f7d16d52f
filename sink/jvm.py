"""The sink's encoder inside Spark's JVM: built from ``sink/java`` on first use, loaded into the
running SparkSession, and its errors brought back as the sink's Python errors.

Why: handing rows to Python workers (Spark's conversion to Arrow) costs about as much CPU as
Spark's whole Parquet write, so no Python encoder can keep up with Parquet; the Java encoder
(``io.kafkatier.sink.JvmEncoder``) reads Spark's internal rows where they are and writes the same
pieces as :class:`kafkatier.sink.encode.Encode` (record batches with provisional sequences, staged
or inline). Everything after the pieces (sequences, offsets, appends, markers) stays in Python.

The jar is compiled with ``javac`` against the running Spark's jars (``$SPARK_HOME/jars`` or
pyspark's own) into ``$KAFKATIER_CACHE_DIR`` (default ``~/.cache/kafkatier``), once per source
and Spark version; compiling takes a few seconds. It is added to the SparkContext
(``addJar``: executors load it) and to the driver's class loader (as the JVM reader adds it: one
loader for all of the jar's classes), so the user's session needs no ``spark.jars`` setting.
Without a JDK (no ``javac``), or under Spark Connect, the sink falls back to the Python
encoder, saying why once.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import subprocess
import tempfile
import threading
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from kafkatier.sink.encode import CHUNK_BYTES, CHUNK_SCHEMA, EncodePlan, TopicPlan
from kafkatier.sink.schema import INPUT_ERROR_MARK, SinkSchemaError
from kafkatier.storage.arrow.encode import batch_byte_limit
from kafkatier.storage.errors import (
    InvalidRecordError,
    KafkaTierError,
    LogWriteError,
    RecordTooLargeError,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

log = logging.getLogger(__name__)
SOURCES: Final = Path(__file__).resolve().parent / "java"
ENCODER_CLASS: Final = "io.kafkatier.sink.JvmEncoder"
CACHE_ENV: Final = "KAFKATIER_CACHE_DIR"
ENCODERS: Final = ("auto", "jvm", "python")
OPEN_BUDGET_BYTES = 32 * 1024 * 1024  # per task: open batches held before the largest closes
SORT_BUFFER: tuple[int, int] | None = None
"""SortBuffer.java's size (bytes, records) for topics of many partitions; None: its own
(``SortBuffer.BYTES``, ``RECORDS``). Tests set it small, so the records move many times a task."""
_LOCK: Final = threading.Lock()
_LOADED: list[JvmEncoder] = []  # the encoder of the current SparkContext
_ERROR = re.compile(re.escape(INPUT_ERROR_MARK) + r"\[(\w+)\] ([^\r\n]*)")
_ERRORS: Final[dict[str, type[KafkaTierError]]] = {
    "SinkSchemaError": SinkSchemaError,
    "RecordTooLargeError": RecordTooLargeError,
    "InvalidRecordError": InvalidRecordError,
    "LogWriteError": LogWriteError,
}


class JvmEncoderUnavailable(SinkSchemaError):
    """``encoder='jvm'`` was asked for and cannot be had (the message says why)."""


def check_choice(encoder: str) -> str:
    if encoder not in ENCODERS:
        raise SinkSchemaError(
            f"encoder={encoder!r}: expected one of {', '.join(ENCODERS)}", setting="encoder"
        )
    return encoder


def spark_jars_dir() -> Path:
    """The jars of the Spark that runs the session: ``$SPARK_HOME/jars``, else pyspark's."""
    home = os.environ.get("SPARK_HOME")
    if home and (Path(home) / "jars").is_dir():
        return Path(home) / "jars"
    import pyspark

    return Path(pyspark.__file__).resolve().parent / "jars"


SINK_FALLBACK: Final = "pass KafkaLogSink(..., encoder='python')"
"""How a sink does without the jar (the reader's is ``reader='python'``), said in errors."""


def _javac(fallback: str) -> str:
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "javac") if home else shutil.which("javac")
    if not found or not Path(found).exists():
        raise JvmEncoderUnavailable(
            "no javac (a JDK 17+) on PATH or in $JAVA_HOME: kafkatier's JVM classes (the sink's "
            f"encoder, the source's reader) are compiled on first use; fix: install a JDK, or "
            f"{fallback}"
        )
    return found


def jar_path(fallback: str = SINK_FALLBACK) -> Path:
    """The jar of the sink's encoder and the source's reader for these sources and this Spark,
    compiled if not cached yet; ``fallback``: how the caller does without it (in errors)."""
    jars = spark_jars_dir()
    digest = hashlib.sha256()
    for source in _sources() + _resources():
        digest.update(source.name.encode() + b"\0" + source.read_bytes())
    digest.update(str(sorted(p.name for p in jars.glob("spark-*.jar"))).encode())
    cache = Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "kafkatier")
    jar = cache / "jvm" / f"kafkatier-sink-{digest.hexdigest()[:16]}.jar"
    if not jar.exists():
        try:
            _compile(jar, jars, fallback)
        except OSError as exc:
            raise JvmEncoderUnavailable(
                f"cannot build kafkatier's JVM classes in {jar.parent} ({exc}); fix: point "
                f"${CACHE_ENV} at a writable directory, or {fallback}"
            ) from exc
    return jar


MUTABLE_LOADER: Final = "org.apache.spark.util.MutableURLClassLoader"


def driver_loader(sc: Any) -> Any:
    """The driver's class loader: the calling thread's (spark-submit and pyspark make it Spark's
    ``MutableURLClassLoader``, which takes jars as it runs)."""
    return sc._jvm.java.lang.Thread.currentThread().getContextClassLoader()


def add_jar(sc: Any, jar: Path, loader: Any) -> None:
    """``jar`` in the driver's ``loader`` (a ``MutableURLClassLoader``), then in the SparkContext
    for the executors (their next task fetches it). The sink's encoder and the reader are one
    jar and both add it so, before any task of theirs runs: in local mode the executors' loader
    asks the driver's first, so every class of the jar comes from one loader (a class that came
    from each, once the other had the jar, could not reach the first one's package-private
    classes, or was another class of the same name)."""
    loader.addURL(sc._jvm.java.io.File(str(jar)).toURI().toURL())
    sc._jsc.addJar(str(jar))


def _sources() -> list[Path]:
    return sorted(SOURCES.rglob("*.java"))


def _resources() -> list[Path]:
    return sorted(p for p in (SOURCES / "META-INF").rglob("*") if p.is_file())


def _compile(jar: Path, jars: Path, fallback: str) -> None:
    """javac into a scratch dir, then the jar written beside its final name and renamed, so a
    concurrent or killed build never leaves a half jar under the final name."""
    jar.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=jar.parent) as scratch:
        classes = Path(scratch) / "classes"
        sources = [str(s) for s in _sources()]
        command = [_javac(fallback), "--release", "17", "-nowarn", "-d", str(classes),
                   "-cp", str(jars / "*"), *sources]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise JvmEncoderUnavailable(
                f"compiling kafkatier's JVM classes failed (javac exit {done.returncode}, "
                f"against {jars}): {done.stderr.strip()[-2000:]}"
            )
        partial = Path(scratch) / jar.name
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as out:
            for path in sorted(classes.rglob("*.class")):
                out.write(path, path.relative_to(classes).as_posix())
            for path in _resources():  # the reader's DataSourceRegister service entry
                out.write(path, path.relative_to(SOURCES).as_posix())
        os.replace(partial, jar)
    log.info("compiled the sink's JVM encoder into %s", jar)


@dataclass
class JvmEncoder:
    """The encoder loaded into one SparkContext (a py4j handle to ``JvmEncoder``)."""

    context: Any  # the (Python) SparkContext it was loaded into
    handle: Any

    @classmethod
    def load(cls, df: DataFrame) -> JvmEncoder:
        """The encoder of ``df``'s SparkContext, loaded once per context: py4j caches methods
        by class name, so a second class loader's copy of the class would meet the first
        copy's methods ("object is not an instance of declaring class")."""
        sc = _context(df)
        if sc is None or getattr(df, "_jdf", None) is None:
            raise JvmEncoderUnavailable("Spark Connect session: no JVM to load the encoder into")
        with _LOCK:
            if _LOADED and _LOADED[0].context is sc:
                return _LOADED[0]
            _LOADED[:] = [cls._load(sc)]
            return _LOADED[0]

    @classmethod
    def _load(cls, sc: Any) -> JvmEncoder:
        jar = jar_path()
        jvm, gateway = sc._jvm, sc._gateway
        driver = driver_loader(sc)
        if driver is not None and driver.getClass().getName() == MUTABLE_LOADER:
            add_jar(sc, jar, driver)
            loaded = driver.loadClass(ENCODER_CLASS)
        else:  # a loader of its own, child first so that the jar's classes all come from it
            urls = gateway.new_array(jvm.java.net.URL, 1)
            urls[0] = jvm.java.io.File(str(jar)).toURI().toURL()
            parent = jvm.org.apache.spark.util.Utils.getContextOrSparkClassLoader()
            loaded = jvm.org.apache.spark.util.ChildFirstURLClassLoader(urls, parent).loadClass(
                ENCODER_CLASS
            )
            sc._jsc.addJar(str(jar))  # executors fetch it before their next task
        no_types = gateway.new_array(jvm.java.lang.Class, 0)
        handle = loaded.getConstructor(no_types).newInstance(
            gateway.new_array(jvm.java.lang.Object, 0)
        )
        return cls(sc, handle)

    def encode_staged(self, df: DataFrame, plan: EncodePlan, pieces: Path) -> bytes:
        """The micro-batch encoded into staging files now: where its pieces are, packed
        (``PieceRows.java``; :func:`kafkatier.sink.pieces.unpack_pieces`), handed over through
        the file ``pieces`` (read and removed here)."""
        self.handle.encodeStaged(df._jdf, plan_json(plan), str(pieces))
        try:
            return pieces.read_bytes()
        finally:
            pieces.unlink(missing_ok=True)

    def encode(self, df: DataFrame, plan: EncodePlan) -> DataFrame:
        """The micro-batch's pieces as a lazy DataFrame in ``encode.CHUNK_SCHEMA``."""
        from pyspark.sql import DataFrame as SparkDataFrame

        return SparkDataFrame(self.handle.encode(df._jdf, plan_json(plan)), df.sparkSession)


def _context(df: DataFrame) -> Any:
    """The SparkContext behind ``df``; None under Spark Connect (which raises on access)."""
    try:
        return df.sparkSession.sparkContext
    except Exception:
        return None


def plan_json(plan: EncodePlan) -> str:
    """The plan as ``EncodePlan.java`` reads it."""
    def sizes(t: TopicPlan) -> list[int]:
        limit = batch_byte_limit(plan.codec, t.max_batch_bytes)
        rules = t.rules
        return [t.partitions, t.max_batch_bytes, limit, int(rules.keys_required), rules.earliest,
                rules.latest]  # fmt: skip

    new = plan.new_topic
    return json.dumps({
        "fixed_topic": plan.fixed_topic,
        "topics": {n: sizes(t) for n, t in plan.topics.items()},
        "new_topic": None if new is None else sizes(new),
        "codec": int(plan.codec), "level": plan.level, "producer_id": plan.producer_id,
        "producer_epoch": plan.producer_epoch, "write_time_ms": plan.write_time_ms,
        "staging_dir": plan.staging_dir, "staging_prefix": plan.staging_prefix,
        "open_budget": OPEN_BUDGET_BYTES, "open_batch_bytes": plan.open_batch_bytes,
        "chunk_bytes": CHUNK_BYTES, "max_tasks": plan.max_tasks, "pieces_schema": CHUNK_SCHEMA,
        "sort_buffer_bytes": None if SORT_BUFFER is None else SORT_BUFFER[0],
        "sort_buffer_records": None if SORT_BUFFER is None else SORT_BUFFER[1],
    })  # fmt: skip


def input_error(exc: BaseException) -> KafkaTierError | None:
    """The sink error an executor's ``InputError.java`` stands for, from the job's message."""
    found = _ERROR.search(str(exc))
    if found is None:
        return None
    return _ERRORS.get(found.group(1), SinkSchemaError)(found.group(2))


class EncoderChoice:
    """The sink's ``encoder=`` option over the sink's life: ``auto`` takes the JVM encoder when
    it loads (else the Python one, logged once), ``jvm`` insists on it, ``python`` never loads
    it. A new SparkContext (a restarted session) loads the encoder again."""

    def __init__(self, encoder: str) -> None:
        self.encoder = check_choice(encoder)
        self.loaded: JvmEncoder | None = None
        self.failed_for: Any = None

    def for_frame(self, df: DataFrame) -> JvmEncoder | None:
        if self.encoder == "python":
            return None
        sc = _context(df)
        if self.loaded is not None and self.loaded.context is sc:
            return self.loaded
        if self.failed_for is not None and self.failed_for is sc:
            return None
        try:
            self.loaded = JvmEncoder.load(df)
        except JvmEncoderUnavailable as exc:
            if self.encoder == "jvm":
                raise
            log.warning("the sink encodes in Python workers (slower): %s", exc)
            self.failed_for = sc
            return None
        return self.loaded
