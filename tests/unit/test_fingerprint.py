"""Model fingerprints: what forces a rebuild (the data hash) and what does not (no Spark)."""

from __future__ import annotations

from pathlib import Path

from framework.project.config import load_project
from framework.transform import fingerprint as fp
from framework.transform.loader import Model, load_models
from models.config import ModelConfig

SQL = "select count(1) as num, device_model -- per model\nfrom ods.user group by device_model\n"
YAML = "key: [device_model]\ntags: [finance]\ndescription: Users per device\nchecks:\n  - not_null: [device_model]\n"
PY = "def model(ctx):\n    # all users\n    return ctx.read('ods.user')\n"
PY_YAML = "depends_on: [ods.user]\nkey: [id]\nrecompute_below_mib: 0\n"


def _project(root: Path, files: dict[str, str]) -> Path:
    (root / "lake.yaml").write_text("name: t\n")
    (root / "layers" / "ods").mkdir(parents=True, exist_ok=True)
    (root / "layers" / "ods" / "t.yaml").write_text("tables:\n  - {source: db.user, key: [id]}\n")
    for rel, text in files.items():
        p = root / "layers" / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root


def _models(root: Path, files: dict[str, str]) -> dict[str, Model]:
    return load_models(load_project(_project(root, files)))


def _agg(root: Path, sql: str = SQL, yaml: str = YAML) -> Model:
    return _models(root, {"dws/user_agg.sql": sql, "dws/user_agg.yaml": yaml})["dws.user_agg"]


def test_comments_whitespace_and_keyword_case_do_not_count(tmp_path: Path) -> None:
    base = _agg(tmp_path)
    same = ("/* users */ SELECT count(1) AS num,\n\n   device_model FROM ods.user GROUP   BY device_model;",
            "select count(1) as num, device_model from ods.user group by device_model -- trailing\n;;")
    for sql in same:
        m = _agg(tmp_path, sql)
        assert (m.fingerprint, m.metadata_fingerprint) == (base.fingerprint, base.metadata_fingerprint), sql
    # What the query computes counts: a literal, a name, the case of an output column's name.
    for sql in ("select count(2) as num, device_model from ods.user group by device_model",
                "select count(1) as n, device_model from ods.user group by device_model",
                "select count(1) as NUM, device_model from ods.user group by device_model",
                "select count(1) as num, device_model from ods.user where 'a' = 'A' group by device_model"):
        assert _agg(tmp_path, sql).fingerprint != base.fingerprint, sql


def test_metadata_edits_change_only_the_metadata_hash(tmp_path: Path) -> None:
    base = _agg(tmp_path)
    for yaml in (YAML.replace("finance", "sales"), YAML.replace("Users per device", "Users by device model"),
                 YAML.replace("not_null", "unique"), "key: [device_model]\n"):
        m = _agg(tmp_path, yaml=yaml)
        assert m.fingerprint == base.fingerprint and m.metadata_fingerprint != base.metadata_fingerprint, yaml
    # How a build runs changes neither.
    m = _agg(tmp_path, yaml=YAML + "recompute_below_mib: 0\n")
    assert (m.fingerprint, m.metadata_fingerprint) == (base.fingerprint, base.metadata_fingerprint)
    # What the table holds: key, partitions, strategy.
    for extra in ("partition_by: device_model\n", "strategy: rescan\n"):
        assert _agg(tmp_path, yaml=YAML + extra).fingerprint != base.fingerprint, extra
    assert _agg(tmp_path, yaml=YAML.replace("key: [device_model]", "key: [num]")).fingerprint != base.fingerprint


def test_python_models_ignore_comments_and_blank_lines(tmp_path: Path) -> None:
    def py(source: str, yaml: str = PY_YAML) -> Model:
        return _models(tmp_path, {"dwd/p.py": source, "dwd/p.yaml": yaml})["dwd.p"]

    base = py(PY)
    assert py("def model(ctx):  # the users\n\n    return ctx.read('ods.user')  \n").fingerprint == base.fingerprint
    assert py(PY.replace("ods.user'", "ods.user').limit(1)")).fingerprint != base.fingerprint
    assert py(PY, PY_YAML + "description: all users\n").fingerprint == base.fingerprint
    assert py(PY, PY_YAML.replace("[id]", "[uid]")).fingerprint != base.fingerprint


def test_tables_built_before_the_split_keep_their_fingerprint(tmp_path: Path) -> None:
    """The oracle: lake before this change (main at 095b125) printed these fingerprints for these
    files, as its `Model.fingerprint`; they are what existing tables' commits record."""
    models = _models(tmp_path, {"dws/user_agg.sql": SQL, "dws/user_agg.yaml": YAML, "dwd/p.py": PY, "dwd/p.yaml": PY_YAML})
    assert models["dws.user_agg"].legacy_fingerprint == "b0b1464f1779a444"
    assert models["dwd.p"].legacy_fingerprint == "11c38f32f0d5bba3"
    m = models["dws.user_agg"]
    assert m.same_data("b0b1464f1779a444") and m.same_data(m.fingerprint)
    assert not m.same_data(None) and not m.same_data("11c38f32f0d5bba3")
    # Once the query changes, the old fingerprint no longer matches.
    changed = _agg(tmp_path, SQL.replace("count(1)", "count(*)"))
    assert not changed.same_data("b0b1464f1779a444")


def test_every_model_setting_is_classified() -> None:
    """A new ModelConfig key must say whether it changes the table's data (DATA_FIELDS: a rebuild),
    how a build runs (BUILD_FIELDS: neither hash) or is metadata (METADATA_FIELDS)."""
    known = set(fp.DATA_FIELDS) | set(fp.BUILD_FIELDS) | set(fp.METADATA_FIELDS) | set(fp.LAYOUT_FIELDS)
    new = set(ModelConfig.model_fields) - known
    assert not new, f"classify {sorted(new)} in framework/transform/fingerprint.py"


def test_forward_only_shapes_tell_added_columns_from_other_changes() -> None:
    from framework.transform.fingerprint import added_columns, shape

    cfg = ModelConfig()
    base = shape("select id, city from ods.users where score > 0", cfg)
    assert added_columns(base, shape("SELECT id, city, upper(city) AS uc -- new\nFROM ods.users WHERE score > 0", cfg)) == ["uc"]
    assert added_columns(base, shape("select upper(city) as uc, id, city from ods.users where score > 0", cfg)) == ["uc"]
    for other in ("select id, lower(city) as city, 1 as x from ods.users where score > 0",  # a column's expression
                  "select id, city, 1 as x from ods.users where score > 1",  # the WHERE
                  "select id, 1 as x from ods.users where score > 0",  # a column dropped
                  "select id, city from ods.users where score > 0"):  # nothing added
        assert added_columns(base, shape(other, cfg)) is None, other
    assert added_columns(base, shape("select id, city, 1 as x from ods.users where score > 0", ModelConfig(partition_by="city"))) is None
    assert shape("select * from ods.users", cfg) is None and shape("select u.* from ods.users u", cfg) is None
    assert shape("select a from x union all select a from y", cfg) is None and added_columns(None, base) is None
