"""``kafkatier run``: the whole pipeline on one machine, from one configuration file.

1. the remote store: the embedded S3 server (SeaweedFS on 127.0.0.1, data in the working folder)
   when ``remote.storage.embedded=true``, else the configured endpoint; and ``kafkatier serve``
   at ``listeners`` (``run.serve.enable``), where a consumer group tails the events topic;
2. a PySpark Structured Streaming job (local mode) reading the generated clickstream (or a
   landing folder of JSON files) and writing an events topic and a compacted latest-state topic
   through one exactly-once KafkaLogSink;
3. the tiering sidecar beside it, in this process (uploads, local retention, remote retention
   and compaction), then a final pass once the stream has stopped;
4. restore of one partition per topic from the store plus ``verify``, replay of both topics
   with ``spark.read.format("kafkatier")`` and the exactly-once / latest-value checks; the
   tailing consumer's records, and the state topic read through serve by a Kafka client,
   compared with the replay (kafkatier.cli.run.serving);
5. a short report; exit 0 only if every check passed.

Every process it starts (the S3 server, Spark's JVM) is stopped on the way out, Ctrl-C included.
With ``run.reset=true`` (the shipped configuration) the log dirs, checkpoint, work dir and the
embedded server's data are wiped first, so every run starts from nothing; with ``false`` the
job resumes from its checkpoint (a restart in production).
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
import warnings
from pathlib import Path
from types import FrameType

from kafkatier.cli.commands import summary


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "run",
        help=summary("run"),
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--config", type=Path, default=None, metavar="FILE",
                        help="configuration file (default: the built-in one, which "
                             "conf/kafkatier.properties spells out; work in ./kafkatier-run)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from kafkatier.cli.config.loader import load_config  # see cli/commands.py
    from kafkatier.cli.config.remote import remote_storage
    from kafkatier.cli.run.job import spark_session
    from kafkatier.cli.run.pipeline import pipeline, prepare, say
    from kafkatier.cli.run.report import render
    from kafkatier.cli.run.serving import serving
    from kafkatier.storage.cleaner.warm import warming

    began = time.monotonic()
    warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas")
    config = load_config(args.config)
    signal.signal(signal.SIGTERM, _interrupt)  # as Ctrl-C: stop cleanly (containers, kill)
    try:
        say(f"configuration: {config.source}")
        prepare(config)
        with remote_storage(config) as tiering:
            say(f"remote store: {tiering.remote_url} at "
                f"{tiering.endpoint_url or 'the AWS default'}"
                + (" (embedded SeaweedFS)" if config.embedded_dir else ""))  # fmt: skip
            tiering.open_store().probe()  # a store it cannot use ends the run before the job
            # a port in use ends the run before Spark; the cleaner's kernels compile meanwhile
            with warming(), serving(config, tiering, say) as bootstrap:
                say(f"starting Spark ({config.run.spark_master})")
                spark = spark_session(config.run.spark_master, config.run.work_dir)
                try:
                    outcome = pipeline(config, tiering, spark, bootstrap)
                finally:
                    spark.stop()
    except KeyboardInterrupt:
        print("kafkatier run: interrupted; stopped everything it had started", file=sys.stderr)
        return 130
    outcome.wall_seconds = time.monotonic() - began
    print(render(outcome, (config.run.events_topic, config.run.state_topic),
                 outcome.job.stopped_by), flush=True)  # fmt: skip
    if not outcome.ok:
        print("kafkatier run: a check failed", file=sys.stderr)
    return 0 if outcome.ok else 1


def _interrupt(signum: int, frame: FrameType | None) -> None:
    del signum, frame
    raise KeyboardInterrupt
