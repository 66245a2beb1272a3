"""Checks validated once per GE version are not validated again: loading a project whose checks
did not change imports no Great Expectations (framework/project/check_cache.py)."""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from framework.project.check_cache import ValidatedChecks
from framework.project.checks import parse_checks

ITEMS = [{"not_null": ["id"]}, {"expect_column_values_to_be_between": {"column": "amount", "min_value": 0}, "severity": "warn"}]

# parse_checks in a process where `import great_expectations` fails: what it finds, or the error.
NO_GX = """
import json, sys
sys.modules["great_expectations"] = None
from framework.project.checks import parse_checks
try:
    specs, issues = parse_checks(json.loads(sys.argv[1]))
    print(json.dumps({"specs": [s.name for s in specs], "issues": len(issues)}))
except ImportError as e:
    print(json.dumps({"import_error": str(e)}))
"""


def _without_gx(items: list[object], cache: Path) -> dict[str, object]:
    env = {**os.environ, "LAKE_JAR_CACHE": str(cache / "jars")}
    r = subprocess.run([sys.executable, "-c", NO_GX, json.dumps(items)], capture_output=True, text=True, env=env, timeout=120,
                       cwd=Path(__file__).resolve().parents[2], check=True)
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_validated_items_load_without_great_expectations(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert "import_error" in _without_gx(ITEMS, tmp_path)  # nothing cached yet: validation needs GE
    monkeypatch.setenv("LAKE_JAR_CACHE", str(tmp_path / "jars"))
    specs, issues = parse_checks(list(ITEMS))
    assert not issues and [s.name for s in specs] == ["not_null(id)", "expect_column_values_to_be_between(amount)"]
    assert _without_gx(ITEMS, tmp_path) == {"specs": [s.name for s in specs], "issues": 0}
    # A changed item is validated again (and needs GE), the others still come from the cache.
    assert "import_error" in _without_gx([ITEMS[0], {"not_null": ["other"]}], tmp_path)


def test_items_with_problems_or_values_json_would_change_are_never_stored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAKE_JAR_CACHE", str(tmp_path / "jars"))
    bad = {"expect_column_values_to_be_between": {"colum": "x"}}
    dated = {"expect_column_values_to_be_between": {"column": "d", "min_value": datetime.date(2020, 1, 1)}}
    specs, issues = parse_checks([bad])
    assert issues and not specs and not (tmp_path / "checks").exists()
    cache = ValidatedChecks.open(tmp_path)
    cache.put(dated, [])
    assert cache.get(dated) is None and not cache.changed
    cache.put({"not_null": ["id"]}, [])
    cache.save()
    assert ValidatedChecks.open(tmp_path).get({"not_null": ["id"]}) == []


def test_an_unreadable_cache_file_is_ignored(tmp_path: Path) -> None:
    cache = ValidatedChecks.open(tmp_path)
    assert cache.path is not None
    cache.path.parent.mkdir(parents=True, exist_ok=True)
    cache.path.write_text("{not json")
    again = ValidatedChecks.open(tmp_path)
    assert again.get(ITEMS[0]) is None
    cache.path.write_text(json.dumps({json.dumps(ITEMS[0], sort_keys=True): [{"name": 1}]}))
    assert ValidatedChecks.open(tmp_path).get(ITEMS[0]) is None  # not a CheckSpec: validated again
