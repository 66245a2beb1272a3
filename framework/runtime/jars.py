"""JVM jars: fetched from Maven Central with `mvn dependency:copy` into a git-ignored cache.

The Hudi bundle is pinned together with pyspark (pyproject.toml): Hudi 1.2.0 is compiled against
Spark 3.5.5 and Scala 2.12, the Scala version of the pip pyspark 3.5 wheels.

Kafka needs whole dependency trees, not one jar: `ensure_artifacts` resolves them with
`mvn dependency:copy-dependencies` into one directory per purpose under the same cache:

- the broker (tests, `make demo-kafka`): Kafka 3.9.2, the last line that still ships a Scala
  broker jar with the ZooKeeper-free KRaft mode and runs on Java 17; its protocol serves the
  kafka-clients 3.4.1 inside Spark's connector. Plus slf4j-reload4j so it logs to a file.
- the Spark connector: spark-sql-kafka-0-10_2.12 without anything pyspark's own jars already
  hold (Spark, Scala, Hadoop, slf4j, compression codecs). 3.5.3, not 3.5.5: the Maven Central
  this project fetches from has no 3.5.4-3.5.6 of that artifact (3.5.0, 3.5.1, 3.5.3, 3.5.7).
  An older connector on a newer Spark of the same 3.5 line is the safe direction; 3.5.7 could
  call Spark methods that 3.5.5 lacks.
- spark-avro 3.5.5 (pyspark's version) for `from_avro` (`format: debezium-avro`): one jar; the
  Avro library it calls is in pyspark's jars. Hudi's bundle shades its own copy of Spark's Avro
  classes (org.apache.hudi.org.apache.spark.sql.avro), so the two never meet.
- the real CDC chain (tests/cdc_chain.py, `make demo-cdc`): Kafka Connect 4.3.1 (standalone; it
  needs Java 17, and talks to the 3.9.2 broker like any 4.x client), Debezium's PostgreSQL
  connector 3.6.1.Final and its MariaDB connector 3.5.0.Final: the newest release of it the Maven
  Central reachable here serves (its metadata lists 3.5.0.Final as the latest; no 3.6.x exists for
  that artifact there, while the other Debezium modules resolve at 3.6.1.Final). Each connector is
  a Connect plugin in its own directory (`plugin.path`), so its dependencies never meet Connect's
  (or another connector's) on one classpath.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from xml.sax.saxutils import escape

from framework.errors import EnvironmentProblem

HUDI_BUNDLE = "org.apache.hudi:hudi-spark3.5-bundle_2.12:1.2.0"

KAFKA_VERSION = "3.9.2"
KAFKA_BROKER = (
    f"org.apache.kafka:kafka_2.13:{KAFKA_VERSION}",
    # Kafka's distribution logs through slf4j -> reload4j; the Maven artifact leaves the binding out.
    "org.slf4j:slf4j-reload4j:1.7.36",
    "ch.qos.reload4j:reload4j:1.2.25",
)
CONNECT_VERSION = "4.3.1"
KAFKA_CONNECT = (f"org.apache.kafka:connect-runtime:{CONNECT_VERSION}", *KAFKA_BROKER[1:])
DEBEZIUM = {
    "mariadb": "io.debezium:debezium-connector-mariadb:3.5.0.Final",
    "postgres": "io.debezium:debezium-connector-postgres:3.6.1.Final",
}
# The Avro converter of the Avro chain test (framework/demo/registry.py): Apicurio's, the one Maven
# Central serves (Confluent's AvroConverter is only in Confluent's repository), of the Apicurio
# Registry version the tests run (framework/runtime/apicurio.py). Its JSON Schema serde's validator
# is not served (JitPack only) and not used by Avro.
AVRO_CONVERTER = "io.apicurio:apicurio-registry-utils-converter:2.4.2.Final"
AVRO_CONVERTER_UNSERVED = ("com.github.everit-org.json-schema:*",)
# Connect provides these to every plugin; a plugin's own copies would shadow them.
CONNECT_PROVIDED = ("org.apache.kafka:*", "org.slf4j:*", "ch.qos.reload4j:*", "log4j:*")
SPARK_KAFKA_CONNECTOR = ("org.apache.spark:spark-sql-kafka-0-10_2.12:3.5.3",)
# `from_avro` for `format: debezium-avro` (framework/ods/avro.py): pyspark's own version (Maven Central
# serves 3.5.5 of this one); its Avro library is in pyspark/jars already, so the one jar alone.
SPARK_AVRO = "org.apache.spark:spark-avro_2.12:3.5.5"
# Already in pyspark/jars (or Spark itself): two copies on one classpath is asking for trouble.
SPARK_PROVIDED = (
    "org.apache.spark:spark-tags_2.12",
    "org.scala-lang:*",
    "org.apache.hadoop:*",
    "commons-logging:*",
    "org.slf4j:*",
    "org.lz4:*",
    "org.xerial.snappy:*",
    "com.github.luben:*",
    "com.google.code.findbugs:*",
)
# s3a://: hadoop-aws of pyspark 3.5's Hadoop (3.3.4) and the AWS SDK bundle it was built with.
HADOOP_AWS = ("org.apache.hadoop:hadoop-aws:3.3.4", "com.amazonaws:aws-java-sdk-bundle:1.12.262")
# framework/runtime/jars.py -> the checkout's root (three levels up), where README says the cache is.
REPO_ROOT = Path(__file__).resolve().parents[2]


def default_cache_dir(root: Path = REPO_ROOT) -> Path:
    """`.cache/jars` of a source checkout; `~/.cache/lake/jars` for an installed package.

    An installed (non-editable) lake lives in site-packages, whose parent is no place for 600 MB
    of jars: a checkout is recognised by its pyproject.toml beside `framework/`.
    """
    if (root / "pyproject.toml").is_file() and (root / "framework").is_dir():
        return root / ".cache" / "jars"
    return Path.home() / ".cache" / "lake" / "jars"


def cache_dir() -> Path:
    configured = os.environ.get("LAKE_JAR_CACHE")
    return Path(configured) if configured else default_cache_dir()


def jar_path(coordinate: str) -> Path:
    group, artifact, version = coordinate.split(":")
    return cache_dir() / f"{artifact}-{version}.jar"


def ensure_jar(coordinate: str) -> Path:
    """Return the local jar for `coordinate`, downloading it with mvn on first use."""
    path = jar_path(coordinate)
    if path.exists() and path.stat().st_size > 0:
        return path
    mvn = shutil.which("mvn")
    if mvn is None:
        raise EnvironmentProblem(
            f"the jar {coordinate} is not in {cache_dir()} and `mvn` is not installed",
            fix="install Maven (apt-get install maven) and run `make install`",
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        [mvn, "-q", "-B", "dependency:copy", f"-Dartifact={coordinate}", f"-DoutputDirectory={path.parent}"],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0 or not path.exists():
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-5:])
        raise EnvironmentProblem(
            f"mvn could not fetch {coordinate}:\n{tail}",
            fix="check that Maven Central is reachable (mvn -v; ~/.m2/settings.xml), then run `make install`",
        )
    return path


def _pom(coordinates: Sequence[str], exclude: Sequence[str]) -> str:
    """A throwaway pom whose only job is to declare `coordinates` as dependencies."""
    exclusions = "".join(
        "<exclusion><groupId>{}</groupId><artifactId>{}</artifactId></exclusion>".format(
            *map(escape, e.split(":"))
        )
        for e in exclude
    )
    deps = "".join(
        "<dependency><groupId>{}</groupId><artifactId>{}</artifactId><version>{}</version>"
        "<exclusions>{}</exclusions></dependency>\n".format(*map(escape, c.split(":")), exclusions)
        for c in coordinates
    )
    return (
        '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
        "<groupId>lake.fetch</groupId><artifactId>fetch</artifactId><version>0</version>"
        f"<packaging>pom</packaging><dependencies>\n{deps}</dependencies></project>\n"
    )


def ensure_artifacts(name: str, coordinates: Sequence[str], exclude: Sequence[str] = ()) -> list[Path]:
    """Return the jars of `coordinates` plus their runtime dependencies, in `cache_dir()/name`.

    Fetched with mvn on first use. `exclude` holds "group:artifact" patterns ("*" allowed) whose
    whole subtree is left out. A marker file naming coordinates and exclusions makes the call
    idempotent; changing either refetches the directory from scratch.
    """
    target = cache_dir() / name
    marker = target / ".complete"
    wanted = "\n".join([*coordinates, *(f"exclude {e}" for e in exclude)]) + "\n"
    if marker.exists() and marker.read_text() == wanted:
        return sorted(target.glob("*.jar"))
    mvn = shutil.which("mvn")
    if mvn is None:
        raise EnvironmentProblem(
            f"the jars for {name} ({', '.join(coordinates)}) are not in {target} and `mvn` is not installed",
            fix="install Maven (apt-get install maven) and run `make install`",
        )
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    with tempfile.TemporaryDirectory(prefix="lake-mvn-") as tmp:
        (Path(tmp) / "pom.xml").write_text(_pom(coordinates, exclude))
        proc = subprocess.run(
            [mvn, "-q", "-B", "dependency:copy-dependencies", "-DincludeScope=runtime", f"-DoutputDirectory={target}"],
            cwd=tmp,
            capture_output=True,
            text=True,
        )
    jars = sorted(target.glob("*.jar"))
    if proc.returncode != 0 or not jars:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-5:])
        raise EnvironmentProblem(
            f"mvn could not fetch {', '.join(coordinates)} with its dependencies:\n{tail}",
            fix="check that Maven Central is reachable (mvn -v; ~/.m2/settings.xml), then run `make install`",
        )
    marker.write_text(wanted)
    return jars


def kafka_broker_classpath() -> list[Path]:
    """Jars to run a Kafka broker (`java -cp ... kafka.Kafka server.properties`)."""
    return ensure_artifacts(f"kafka-broker-{KAFKA_VERSION}", KAFKA_BROKER)


def kafka_connect_classpath() -> list[Path]:
    """Jars to run Kafka Connect (`java -cp ... org.apache.kafka.connect.cli.ConnectStandalone`)."""
    return ensure_artifacts(f"kafka-connect-{CONNECT_VERSION}", KAFKA_CONNECT)


def debezium_plugin(flavor: str = "mariadb") -> Path:
    """The directory holding one Debezium connector (`DEBEZIUM[flavor]`) and its dependencies:
    one Connect plugin (Connect's `plugin.path` names a directory of such directories)."""
    coordinate = DEBEZIUM[flavor]
    _group, artifact, version = coordinate.split(":")
    return ensure_artifacts(f"{artifact}-{version}", (coordinate,), CONNECT_PROVIDED)[0].parent


def avro_converter_plugin() -> Path:
    """The directory holding Apicurio's Avro converter for Kafka Connect (`AVRO_CONVERTER`) and its
    dependencies: one Connect plugin, like a connector."""
    _group, artifact, version = AVRO_CONVERTER.split(":")
    return ensure_artifacts(f"{artifact}-{version}", (AVRO_CONVERTER,), (*CONNECT_PROVIDED, *AVRO_CONVERTER_UNSERVED))[0].parent


def kafka_connector_jars() -> list[Path]:
    """Jars to add to pyspark's own for `spark.readStream.format("kafka")`."""
    version = SPARK_KAFKA_CONNECTOR[0].rsplit(":", 1)[1]
    return ensure_artifacts(f"spark-kafka-{version}", SPARK_KAFKA_CONNECTOR, SPARK_PROVIDED)


def spark_avro_jar() -> Path:
    """The jar to add to pyspark's own for `from_avro` (Spark's Avro data source functions)."""
    return ensure_jar(SPARK_AVRO)


def s3_jars() -> list[Path]:
    """Jars Spark needs for s3a:// (hadoop-aws and its AWS SDK bundle, 268 MiB)."""
    return [ensure_jar(c) for c in HADOOP_AWS]


def java_executable() -> str:
    """Path of `java` ($JAVA_HOME/bin first, then PATH); EnvironmentProblem when there is none."""
    java = shutil.which("java", path=os.path.join(os.environ["JAVA_HOME"], "bin")) if os.environ.get("JAVA_HOME") else shutil.which("java")
    if java is None:
        raise EnvironmentProblem(
            "no Java runtime found (Spark and the Kafka broker need Java 17)",
            fix="install OpenJDK 17 (apt-get install openjdk-17-jre-headless) or set JAVA_HOME",
        )
    return java


def ensure_java() -> None:
    """Fail with a clear message when no Java 17+ runtime is available."""
    java_executable()


if __name__ == "__main__":  # used by `make install`
    print(ensure_jar(HUDI_BUNDLE))
    for jar in [*kafka_connector_jars(), spark_avro_jar(), *kafka_broker_classpath(), *s3_jars(), *kafka_connect_classpath()]:
        print(jar)
    for flavor in DEBEZIUM:
        print(debezium_plugin(flavor))
    print(avro_converter_plugin())
