"""JVM jars: fetched from Maven Central with `mvn dependency:copy` into a git-ignored cache.

The Hudi bundle is pinned together with pyspark (pyproject.toml): Hudi 1.2.0 is compiled against
Spark 3.5.5 and Scala 2.12, the Scala version of the pip pyspark 3.5 wheels.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from framework.errors import EnvironmentProblem

HUDI_BUNDLE = "org.apache.hudi:hudi-spark3.5-bundle_2.12:1.2.0"
REPO_ROOT = Path(__file__).resolve().parent.parent


def cache_dir() -> Path:
    return Path(os.environ.get("LAKE_JAR_CACHE", REPO_ROOT / ".cache" / "jars"))


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


def ensure_java() -> None:
    """Fail with a clear message when no Java 17+ runtime is available."""
    java = shutil.which("java", path=os.path.join(os.environ["JAVA_HOME"], "bin")) if os.environ.get("JAVA_HOME") else shutil.which("java")
    if java is None:
        raise EnvironmentProblem(
            "no Java runtime found (Spark needs Java 17)",
            fix="install OpenJDK 17 (apt-get install openjdk-17-jre-headless) or set JAVA_HOME",
        )


if __name__ == "__main__":  # used by `make install`
    print(ensure_jar(HUDI_BUNDLE))
