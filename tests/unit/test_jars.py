"""ensure_artifacts: a complete cache directory is reused without mvn; a changed request refetches."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from framework.errors import EnvironmentProblem
from framework.runtime import jars


def test_complete_directory_is_reused_without_mvn(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAKE_JAR_CACHE", str(tmp_path))
    monkeypatch.setattr(jars.shutil, "which", lambda name, **kw: None)  # no mvn, no java
    target = tmp_path / "thing"
    target.mkdir()
    (target / "b-1.0.jar").write_bytes(b"x")
    (target / "a-2.0.jar").write_bytes(b"x")
    (target / ".complete").write_text("g:a:2.0\nexclude g:b\n")

    assert [p.name for p in jars.ensure_artifacts("thing", ["g:a:2.0"], ["g:b"])] == ["a-2.0.jar", "b-1.0.jar"]
    with pytest.raises(EnvironmentProblem, match="mvn"):  # other coordinates: must fetch again
        jars.ensure_artifacts("thing", ["g:a:3.0"], ["g:b"])


def test_pom_declares_each_coordinate_with_every_exclusion() -> None:
    ns = {"m": "http://maven.apache.org/POM/4.0.0"}
    root = ET.fromstring(jars._pom(["g:a:1", "h:b:2"], ["x:*", "y:z"]))
    deps = root.findall("m:dependencies/m:dependency", ns)
    assert [(d.findtext("m:groupId", namespaces=ns), d.findtext("m:version", namespaces=ns)) for d in deps] == [("g", "1"), ("h", "2")]
    for d in deps:
        assert [e.findtext("m:artifactId", namespaces=ns) for e in d.findall("m:exclusions/m:exclusion", ns)] == ["*", "z"]


def test_the_cache_is_in_the_checkout_or_the_users_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """README's `.cache/jars` of the checkout (not inside the `framework` package); an installed
    package (site-packages has no pyproject.toml beside `framework/`) caches in the home folder."""
    monkeypatch.delenv("LAKE_JAR_CACHE", raising=False)
    assert jars.cache_dir() == Path(__file__).resolve().parents[2] / ".cache" / "jars"
    assert jars.default_cache_dir(tmp_path) == Path.home() / ".cache" / "lake" / "jars"
    (tmp_path / "framework").mkdir()
    (tmp_path / "pyproject.toml").write_text("")
    assert jars.default_cache_dir(tmp_path) == tmp_path / ".cache" / "jars"
