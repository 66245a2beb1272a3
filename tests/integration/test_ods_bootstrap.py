"""Bootstrap dumps with a key on several rows: stored once (the latest by `ordering:`) or refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from framework.errors import LakeError
from tests.helpers import LakeProject

DUMP = "id,version,name\n1,1,a-old\n2,1,b\n1,3,a-new\n3,1,c\n1,2,a-mid\n3,2,c-new\n"


def _dump(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "users.csv"
    path.write_text(text)
    return path


def test_duplicate_keys_keep_the_row_with_the_greatest_ordering(tmp_path: Path, spark: Any) -> None:
    from framework.ods.bootstrap import run_bootstrap

    lp = LakeProject(tmp_path, "tables:\n  - {source: shop.users, key: [id], ordering: [version]}\n")
    res = run_bootstrap(spark, lp.project, lp.project.ods_table("ods.users"), _dump(tmp_path, DUMP), position=None)
    latest: dict[int, tuple[int, str]] = {}
    for line in DUMP.splitlines()[1:]:
        i, v, name = line.split(",")
        if int(i) not in latest or int(v) > latest[int(i)][0]:
            latest[int(i)] = (int(v), name)
    stored = lp.raw(spark, "users").select("id", "version", "name").collect()  # every row, as stored
    assert sorted((r.id, r.version, r.name) for r in stored) == sorted((i, v, n) for i, (v, n) in latest.items())
    assert (res.rows, res.duplicates) == (len(latest), 6 - len(latest))


def test_duplicate_keys_without_ordering_are_refused(tmp_path: Path, spark: Any) -> None:
    from framework.ods.bootstrap import run_bootstrap

    lp = LakeProject(tmp_path, "tables:\n  - {source: shop.users, key: [id]}\n")
    with pytest.raises(LakeError) as e:
        run_bootstrap(spark, lp.project, lp.project.ods_table("ods.users"), _dump(tmp_path, DUMP), position=None)
    text = str(e.value)
    assert "has 2 key(s) of ods.users (id) on more than one row, e.g. id=1; id=3" in text
    assert "declare `ordering:`" in text
    assert not (lp.layout.table("ods.users") / ".hoodie").local.exists()


def test_duplicate_keys_tied_on_ordering_are_refused(tmp_path: Path, spark: Any) -> None:
    from framework.ods.bootstrap import run_bootstrap

    lp = LakeProject(tmp_path, "tables:\n  - {source: shop.users, key: [id], ordering: [version]}\n")
    with pytest.raises(LakeError) as e:
        run_bootstrap(spark, lp.project, lp.project.ods_table("ods.users"), _dump(tmp_path, DUMP + "3,2,c-other\n"), position=None)
    assert "has 1 key(s) of ods.users (id) on several rows with the same greatest ordering (version), e.g. id=3" in str(e.value)
    assert not (lp.layout.table("ods.users") / ".hoodie").local.exists()
