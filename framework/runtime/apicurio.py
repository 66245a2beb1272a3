"""Apicurio Registry, runnable, from what Maven Central serves: for tests and demos only.

Apicurio publishes its server as a Quarkus application module (`io.apicurio:apicurio-registry-app`),
not as a runnable jar; the runnable form is what Quarkus' Maven plugin makes of that module
("augmentation"). This does the same, once, into the jar cache (`apicurio-registry-<version>/`):
the module's pom and jar from Maven Central, then `quarkus-maven-plugin:build`, giving
`…-runner.jar` beside `lib/`. In-memory storage (H2), so each start is an empty registry.

2.4.2.Final is the newest version whose parts Maven Central serves here (3.x and 2.6.x need an
`apicurio-registry-schema-util-provider` it does not serve). Three things of its pom cannot be had
and are left out, none of which serves the Confluent-compatible API lake uses:
- its test-scope dependencies (Confluent's serializers, from Confluent's own repository);
- the JSON Schema validator `org.everit.json.schema` (JitPack only; JSON Schema artifacts);
- the Quarkus extension `apicurio-common-app-components-config-index`, whose deployment module is
  not served. It indexes the admin API's dynamic settings; a two-line CDI producer of an empty
  index (compiled with `javac`) stands in for it, so those settings are fixed at their defaults.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from framework.errors import EnvironmentProblem
from framework.runtime.jars import cache_dir, ensure_jar

VERSION = "2.4.2.Final"
QUARKUS = "2.16.4.Final"  # the Quarkus of Apicurio 2.4.2 (its parent pom's quarkus.version)
APP = f"io.apicurio:apicurio-registry-app:{VERSION}"
CCOMPAT = "/apis/ccompat/v7"  # the Confluent-compatible API
_CONFIG_DEFS = "io.apicurio:apicurio-common-app-components-config-definitions:0.1.18.Final"
_CDI_API = "jakarta.enterprise:jakarta.enterprise.cdi-api:2.0.2"
_DROPPED = ("apicurio-common-app-components-config-index",)
_EXCLUDED = ("com.github.everit-org.json-schema", "org.everit.json.schema")
_SHIM = """package lake.shim;

@javax.enterprise.context.ApplicationScoped
public class EmptyDynamicConfig {
    @javax.enterprise.inject.Produces
    @javax.enterprise.context.ApplicationScoped
    public io.apicurio.common.apps.config.DynamicConfigPropertyList dynamicConfigPropertyList() {
        return new io.apicurio.common.apps.config.DynamicConfigPropertyList(new java.util.ArrayList<>());
    }
}
"""


def _tool(name: str, fix: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise EnvironmentProblem(f"building Apicurio Registry needs `{name}`, which is not installed", fix=fix)
    return path


def _pom(text: str) -> str:
    """The app module's pom without what Maven Central does not serve (module docstring)."""
    head, sep, rest = text.partition("<dependencies>")
    deps, sep2, tail = rest.partition("</dependencies>")
    blocks = re.findall(r"<dependency>.*?</dependency>", deps, re.S)
    kept = []
    for b in blocks:
        if "<scope>test</scope>" in b or any(f"<artifactId>{a}</artifactId>" in b for a in _DROPPED):
            continue
        if "<artifactId>apicurio-registry-schema-util-provider</artifactId>" in b:
            b = b.replace("</dependency>", "<exclusions><exclusion><groupId>{}</groupId><artifactId>{}</artifactId></exclusion>"
                          "</exclusions></dependency>".format(*_EXCLUDED))
        kept.append(b)
    return head + sep + "\n".join(kept) + sep2 + tail


def _run(cmd: list[str], cwd: Path, what: str) -> None:
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-8:])
        raise EnvironmentProblem(f"{what} failed:\n{tail}", fix="check that Maven Central is reachable (mvn -v), then retry")


def registry_jar() -> Path:
    """The runnable Apicurio Registry (`java -jar`), built into the jar cache on first use."""
    target = cache_dir() / f"apicurio-registry-{VERSION}"
    runner = target / f"apicurio-registry-app-{VERSION}-runner.jar"
    if runner.exists() and (target / ".complete").exists():
        return runner
    mvn = _tool("mvn", "install Maven (apt-get install maven)")
    javac = _tool("javac", "install a JDK (apt-get install openjdk-17-jdk-headless)")
    app = ensure_jar(APP)
    pom = _fetch_pom(mvn, app.parent)
    if target.exists():
        shutil.rmtree(target)
    with tempfile.TemporaryDirectory(prefix="lake-apicurio-") as tmp:
        build = Path(tmp)
        classes = build / "target" / "classes"
        classes.mkdir(parents=True)
        (build / "pom.xml").write_text(_pom(pom.read_text()))
        shutil.unpack_archive(str(app), str(classes), "zip")
        (classes / "META-INF" / "jandex.idx").unlink(missing_ok=True)  # Quarkus indexes the classes itself (the shim too)
        src = build / "EmptyDynamicConfig.java"
        src.write_text(_SHIM)
        cp = ":".join(str(ensure_jar(c)) for c in (_CONFIG_DEFS, _CDI_API))
        _run([javac, "--release", "11", "-cp", cp, "-d", str(classes), str(src)], build, "compiling the config-index stand-in")
        _run([mvn, "-q", "-B", f"io.quarkus:quarkus-maven-plugin:{QUARKUS}:build", "-Dquarkus.profile=prod"], build,
             f"building Apicurio Registry {VERSION} with Quarkus {QUARKUS}")
        built = build / "target"
        target.mkdir(parents=True)
        shutil.copytree(built / "lib", target / "lib")
        shutil.copy2(built / runner.name, runner)
    (target / ".complete").write_text(VERSION + "\n")
    return runner


def _fetch_pom(mvn: str, where: Path) -> Path:
    """The app module's pom (its parent comes from Maven Central during the build)."""
    pom = where / f"apicurio-registry-app-{VERSION}.pom"
    if not pom.exists():
        _run([mvn, "-q", "-B", "dependency:copy", f"-Dartifact={APP}:pom", f"-DoutputDirectory={where}"], where, f"fetching the pom of {APP}")
    return pom
