"""Kafka source options and the broker reachability check (no Spark, no broker)."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest

from framework.errors import ConfigError, EnvironmentProblem
from framework.ods.kafka import KafkaSource, env_options, reader_options
from framework.project.config import load_project
from models.config import KafkaSourceConfig


def test_security_settings_come_from_the_environment() -> None:
    env = {"LAKE_KAFKA_SECURITY_PROTOCOL": "SASL_SSL", "LAKE_KAFKA_SASL_JAAS_CONFIG": "secret-jaas", "HOME": "/x"}
    assert env_options(env) == {"security.protocol": "SASL_SSL", "sasl.jaas.config": "secret-jaas"}
    cfg = KafkaSourceConfig(kind="kafka", bootstrap_servers="h:9092", topics=["a", "b"], options={"client.id": "lake"})
    opts = reader_options(cfg, env)
    assert opts["subscribe"] == "a,b"
    assert opts["kafka.sasl.jaas.config"] == "secret-jaas"
    assert opts["kafka.client.id"] == "lake"
    assert opts["startingOffsets"] == "earliest"


def test_secret_in_yaml_is_a_config_error(tmp_path: Path) -> None:
    (tmp_path / "lake.yaml").write_text(
        "name: t\nods:\n  source:\n    kind: kafka\n    bootstrap_servers: 'h:9092'\n    topics: [a]\n"
        "    options: {sasl.jaas.config: 'x'}\n"
    )
    with pytest.raises(ConfigError) as e:
        load_project(tmp_path)
    assert "LAKE_KAFKA_SASL_JAAS_CONFIG" in str(e.value) and "lake.yaml:7" in str(e.value)


def test_topics_or_pattern_and_keys(tmp_path: Path) -> None:
    (tmp_path / "layers" / "ods").mkdir(parents=True)
    (tmp_path / "layers" / "ods" / "t.yaml").write_text("tables:\n  - {source: db.t}\n")
    (tmp_path / "lake.yaml").write_text("name: t\n")
    with pytest.raises(ConfigError) as e:  # file source: a key is required
        load_project(tmp_path)
    assert "tables[0].key" in str(e.value)
    (tmp_path / "lake.yaml").write_text("name: t\nods: {source: {kind: kafka, bootstrap_servers: 'h:1', topics: [a]}}\n")
    assert load_project(tmp_path).ods_tables[0].key == []
    (tmp_path / "lake.yaml").write_text("name: t\nods: {source: {kind: kafka, bootstrap_servers: 'nohost', topics: [a]}}\n")
    with pytest.raises(ConfigError) as e:
        load_project(tmp_path)
    assert "host:port" in str(e.value) and "tables[0].key" not in str(e.value)
    (tmp_path / "lake.yaml").write_text("name: t\nods: {source: {kind: kafka, bootstrap_servers: 'h:1', topics: [a], topic_pattern: 'x'}}\n")
    with pytest.raises(ConfigError) as e:
        load_project(tmp_path)
    assert "exactly one of" in str(e.value)


def test_unreachable_broker_fails_after_bounded_retry(tmp_path: Path) -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (tmp_path / "lake.yaml").write_text(
        f"name: t\nods: {{source: {{kind: kafka, bootstrap_servers: '127.0.0.1:{port}', topics: [a], connect_timeout_seconds: 2}}}}\n"
    )
    project = load_project(tmp_path)
    src = project.config.ods.source
    assert isinstance(src, KafkaSourceConfig)
    t0 = time.monotonic()
    with pytest.raises(EnvironmentProblem) as e:
        KafkaSource(project, src).check()
    assert time.monotonic() - t0 < 10
    assert f"127.0.0.1:{port}" in str(e.value) and "connect_timeout_seconds" in str(e.value)
