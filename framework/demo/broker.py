"""A real single-node Kafka broker (KRaft: broker and controller in one JVM) on loopback ports.

For tests and the Kafka demo, never for production. The jars come from framework.runtime.jars
(`make install` fetches them); events are produced with the confluent-kafka Python client.

    with KafkaBroker(work_dir) as broker:
        broker.create_topic("orders", partitions=3)
        broker.produce("orders", [(b"k1", b"v1"), (b"k2", None)])   # None value = tombstone
        spark.readStream.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap_servers)

The broker logs to `work_dir/logs/server.log` (never the terminal); its stdout/stderr go to
`work_dir/logs/kafka.out`. `stop()` (also run at exit) sends SIGTERM, then SIGKILL, and reaps it.
"""

from __future__ import annotations

import base64
import contextlib
import os
import signal
import subprocess
import time
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from framework.demo.services import Service, free_port, log_tail, port_open
from framework.errors import EnvironmentProblem
from framework.runtime.jars import KAFKA_VERSION, java_executable, kafka_broker_classpath

Payload = str | bytes | None

_LOG4J = """\
log4j.rootLogger=INFO, file
log4j.appender.file=org.apache.log4j.FileAppender
log4j.appender.file.File={log}
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka=INFO
log4j.logger.org.apache.kafka=INFO
log4j.logger.state.change.logger=WARN
log4j.logger.kafka.request.logger=WARN
"""


def _cluster_id(data_dir: Path) -> str:
    """The id the data dir was formatted with, so a restart keeps its topics; else a new one.

    Kafka's Uuid text form: 16 random bytes, base64url without padding, not starting with '-'.
    """
    meta = data_dir / "meta.properties"
    if meta.exists():
        for line in meta.read_text().splitlines():
            if line.startswith("cluster.id="):
                return line.split("=", 1)[1].strip()
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def _client_module() -> Any:
    try:
        import confluent_kafka
        import confluent_kafka.admin  # noqa: F401  (submodule, not imported by the package)
    except ImportError as e:
        raise EnvironmentProblem(
            "the Python Kafka client (confluent-kafka) is not installed",
            fix="run `make install` (or pip install confluent-kafka)",
        ) from e
    return confluent_kafka


def _bytes(x: Payload) -> bytes | None:
    return x.encode() if isinstance(x, str) else x


class KafkaBroker(Service):
    """One Kafka broker+controller process; a context manager. See the module docstring."""

    name = "the Kafka broker"
    fix = "check the log; a port clash or a slow machine may need a retry or a longer start_timeout"

    def __init__(
        self,
        work_dir: Path | str,
        *,
        num_partitions: int = 1,
        heap: str = "512m",
        start_timeout: float = 60.0,
        stop_timeout: float = 20.0,
        extra_properties: dict[str, str] | None = None,
    ) -> None:
        super().__init__(work_dir, start_timeout=start_timeout, stop_timeout=stop_timeout)
        self.num_partitions = num_partitions
        self.heap = heap
        self.extra_properties = dict(extra_properties or {})
        self.port = 0
        self.controller_port = 0
        self._admin: Any = None

    # -- paths -----------------------------------------------------------------------------
    @property
    def log_file(self) -> Path:
        return self.work_dir / "logs" / "server.log"

    @property
    def out_file(self) -> Path:
        return self.work_dir / "logs" / "kafka.out"

    def log_files(self) -> list[Path]:
        return [self.log_file, self.out_file]

    @property
    def bootstrap_servers(self) -> str:
        if not self.port:
            raise RuntimeError("the Kafka broker is not started")
        return f"127.0.0.1:{self.port}"

    def properties(self) -> dict[str, str]:
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(self.work_dir / "data"),
            "num.partitions": str(self.num_partitions),
            "auto.create.topics.enable": "true",
            # One node: every internal topic has one replica, and few partitions (fast start).
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "1",
            "group.initial.rebalance.delay.ms": "0",
            # A 2-core test box: few threads.
            "num.network.threads": "2",
            "num.io.threads": "2",
            "background.threads": "2",
            "log.cleaner.enable": "false",
        }
        props.update(self.extra_properties)
        return props

    # -- lifecycle -------------------------------------------------------------------------
    def _java(self, classpath: list[Path], *args: str, heap: str) -> list[str]:
        return [
            java_executable(),
            f"-Xmx{heap}",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-Djava.awt.headless=true",
            f"-Dlog4j.configuration=file:{self.work_dir / 'log4j.properties'}",
            f"-Dkafka.logs.dir={self.work_dir / 'logs'}",
            "-cp",
            os.pathsep.join(str(p) for p in classpath),
            *args,
        ]

    def prepare(self) -> None:
        """Pick the ports, write the configuration and format the storage."""
        self._classpath = kafka_broker_classpath()
        self._admin = None
        self.port = free_port()
        self.controller_port = free_port()
        while self.controller_port == self.port:
            self.controller_port = free_port()
        self._props_file = self.work_dir / "server.properties"
        self._props_file.write_text("".join(f"{k}={v}\n" for k, v in self.properties().items()))
        (self.work_dir / "log4j.properties").write_text(_LOG4J.format(log=self.log_file))

        fmt = subprocess.run(
            self._java(self._classpath, "kafka.tools.StorageTool", "format", "--ignore-formatted",
                       "-t", _cluster_id(self.work_dir / "data"), "-c", str(self._props_file), heap="256m"),
            capture_output=True, text=True, timeout=self.start_timeout,
        )  # fmt: skip
        if fmt.returncode != 0:
            raise EnvironmentProblem(
                f"formatting Kafka storage in {self.work_dir / 'data'} failed:\n"
                + log_tail(fmt.stdout + fmt.stderr),
                fix="the line above names the cause; the jars come from `make install`, Java 17 must be installed",
            )

    def command(self) -> list[str]:
        return self._java(self._classpath, "kafka.Kafka", str(self._props_file), heap=self.heap)

    def ready(self) -> bool:
        """The broker answers a metadata request (after its port accepts connections)."""
        if self._admin is None:
            if not port_open(self.port):
                return False
            self._admin = self.admin()
        try:
            return bool(self._admin.list_topics(timeout=2).brokers)
        except Exception:  # KafkaException while the broker finishes starting
            return False

    # -- client helpers ----------------------------------------------------------------------
    def admin(self) -> Any:
        """A confluent_kafka AdminClient for this broker."""
        return _client_module().admin.AdminClient(
            {"bootstrap.servers": self.bootstrap_servers, "log_level": 3}
        )

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        *,
        timeout: float = 30.0,
        config: dict[str, str] | None = None,
    ) -> None:
        """Create `name` with `partitions` partitions (one replica), and wait until each has a leader."""
        ck = _client_module()
        admin = self.admin()
        futures = admin.create_topics(
            [
                ck.admin.NewTopic(
                    name, num_partitions=partitions, replication_factor=1, config=config or {}
                )
            ],
            operation_timeout=timeout,
        )
        futures[name].result(timeout)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            topic = admin.list_topics(name, timeout=5).topics.get(name)
            if (
                topic is not None
                and topic.error is None
                and len(topic.partitions) == partitions
                and all(p.leader >= 0 for p in topic.partitions.values())
            ):
                return
            time.sleep(0.1)
        raise EnvironmentProblem(
            f"topic {name} has no leader for all {partitions} partitions after {timeout:.0f}s"
        )

    def produce(
        self,
        topic: str,
        messages: Iterable[tuple[Payload, Payload]],
        *,
        partition: int | None = None,
        timeout: float = 30.0,
    ) -> int:
        """Send (key, value) pairs in order and flush; value None is a tombstone. Returns the count.

        Idempotent producer with acks=all: retries cannot reorder or duplicate messages, so
        messages with the same key land in the same partition in the order given.
        """
        ck = _client_module()
        producer = ck.Producer(
            {
                "bootstrap.servers": self.bootstrap_servers,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 5,
                # librdkafka logs to stderr; retries while the broker warms up are not worth a line.
                "log_level": 3,
            }
        )
        errors: list[str] = []

        def delivered(err: Any, msg: Any) -> None:
            if err is not None:
                errors.append(str(err))

        count = 0
        for key, value in messages:
            kwargs: dict[str, Any] = {
                "key": _bytes(key),
                "value": _bytes(value),
                "on_delivery": delivered,
            }
            if partition is not None:
                kwargs["partition"] = partition
            while True:
                try:
                    producer.produce(topic, **kwargs)
                    break
                except BufferError:  # local queue full: let deliveries drain
                    producer.poll(0.5)
            count += 1
            producer.poll(0)
        left = producer.flush(timeout)
        if left or errors:
            raise EnvironmentProblem(
                f"producing to {topic} on {self.bootstrap_servers} failed: "
                f"{left} message(s) undelivered after {timeout:.0f}s; errors: {errors[:3]}"
            )
        return count

    def __repr__(self) -> str:
        state = f"pid {self.pid} on {self.bootstrap_servers}" if self.process else "stopped"
        return f"KafkaBroker({KAFKA_VERSION}, {state}, {self.work_dir})"


def main(argv: list[str] | None = None) -> None:
    """`python -m framework.demo.broker [WORK_DIR]` (`make kafka-broker`): run until Ctrl-C."""
    import argparse

    parser = argparse.ArgumentParser(description="Run a single-node Kafka broker on loopback.")
    parser.add_argument(
        "work_dir", nargs="?", default="out/kafka", help="data and logs (default: out/kafka)"
    )
    parser.add_argument(
        "--partitions", type=int, default=1, help="num.partitions for auto-created topics"
    )
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    with KafkaBroker(args.work_dir, num_partitions=args.partitions) as broker:
        print(
            f"Kafka {KAFKA_VERSION} on {broker.bootstrap_servers} (pid {broker.pid}), started in "
            f"{broker.startup_seconds:.1f}s; log: {broker.log_file}; Ctrl-C stops it",
            flush=True,
        )
        with contextlib.suppress(KeyboardInterrupt):
            while broker.process is not None and broker.process.poll() is None:
                time.sleep(0.5)


if __name__ == "__main__":
    main()
