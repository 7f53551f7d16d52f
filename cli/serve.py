"""``kafkatier serve``: answer Kafka clients from the log dirs (the Kafka protocol, read-only)."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
import signal
from pathlib import Path
from typing import TYPE_CHECKING

from kafkatier.cli.commands import summary
from kafkatier.cli.sidecar import setup_logging

if TYPE_CHECKING:
    from kafkatier.serve.config import ServeConfig

EPILOG = """\
Serves every topic of the configured log dirs to unmodified Kafka clients (kafka-python,
aiokafka, confluent-kafka/librdkafka, kcat, Java): ApiVersions, Metadata, ListOffsets and Fetch,
read_committed included; record batches go out as the bytes on disk. Consumer groups with the
classic protocol (subscribe() with a group.id, kcat -G): this server coordinates every group,
and committed offsets are kept in a __consumer_offsets topic in offsets.log.dir
[<first log dir>/.kafkatier-serve], fsynced before each commit is acknowledged. One broker,
node id 0, read-only: Produce gets POLICY_VIOLATION. SIGTERM/SIGINT stop it cleanly.

The configuration is conf/kafkatier.properties' format: log.dirs, and Kafka's listeners
[PLAINTEXT://127.0.0.1:9092], advertised.listeners [listeners], socket.request.max.bytes,
connections.max.idle.ms [600000], offsets.topic.num.partitions [1],
group.min.session.timeout.ms [6000], group.max.session.timeout.ms [1800000],
group.initial.rebalance.delay.ms [3000] and offset.metadata.max.bytes [4096].
Security, with Kafka's broker keys: listener.security.protocol.map [each of PLAINTEXT, SSL,
SASL_PLAINTEXT, SASL_SSL maps to itself]; TLS from PEM only: ssl.keystore.type=PEM,
ssl.keystore.location (key + chain) or ssl.keystore.key + ssl.keystore.certificate.chain,
ssl.key.password, ssl.truststore.location or ssl.truststore.certificates, ssl.client.auth
[none], ssl.enabled.protocols, ssl.cipher.suites; SASL: sasl.enabled.mechanisms (PLAIN,
SCRAM-SHA-256, SCRAM-SHA-512), listener.name.<listener>.<mechanism>.sasl.jaas.config with
user_<name>="<password>" options, sasl.scram.users.file (kafkatier's: SCRAM credentials,
README), connection.failed.authentication.delay.ms [100]; every key also as
listener.name.<listener>.<key>. Passwords are never logged or echoed.
With remote.storage.url, offsets below a partition's local log start are read from the remote
copy (remote.storage.embedded=true starts the embedded S3 server for as long as serve runs).

exit codes: 0 stopped cleanly, 2 usage or configuration error.

examples:
  kafkatier serve --config conf/kafkatier.properties
  kcat -b 127.0.0.1:9092 -C -t events -o beginning -e
  kcat -b 127.0.0.1:9092 -G my-group events          # a consumer group, offsets committed
  kcat -b 127.0.0.1:9094 -X security.protocol=SASL_SSL -X ssl.ca.location=ca.pem \
       -X sasl.mechanisms=SCRAM-SHA-512 -X sasl.username=bob -X sasl.password=... -L
"""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "serve",
        help=summary("serve"),
        description="Answer Kafka consumers from the log dirs: no Kafka cluster needed.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--config", required=True, type=Path,
                        help="configuration file (conf/kafkatier.properties format)")
    parser.add_argument("--log-format", choices=("text", "json"), default="text")
    parser.add_argument("--log-level", default="info")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from kafkatier.cli.config.loader import load_config  # see cli/commands.py
    from kafkatier.cli.config.remote import remote_storage
    from kafkatier.serve.config import ServeConfig

    config = ServeConfig.load(args.config)
    setup_logging(args.log_format, args.log_level)
    if config.tiering is None:
        asyncio.run(_serve(config))
        return 0
    with remote_storage(load_config(args.config)) as tiering:  # the embedded S3 server, if asked
        asyncio.run(_serve(dataclasses.replace(config, tiering=tiering)))
    return 0


async def _serve(config: ServeConfig) -> None:
    from kafkatier.serve.server import Server  # the wire protocol: only when serving (0.4 s)

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await Server(config).run(stop)
    logging.getLogger("kafkatier.serve").info("stopped")
