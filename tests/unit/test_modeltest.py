"""`lake test` without Spark: reading and typing a test's rows, applying its change events,
comparing rows, and every config error (file, line, field, fix) found before Spark starts."""

from __future__ import annotations

import textwrap
from datetime import date, datetime, timezone
from pathlib import Path

import pytest

from framework.errors import ConfigError
from framework.modeltest.cases import discover
from framework.modeltest.compare import _ordered, _unordered
from framework.modeltest.events import EventError, Table, apply
from framework.modeltest.refs import referenced_columns
from framework.modeltest.rows import check_value, infer, kind_of, text
from framework.project.config import load_project
from framework.transform.loader import load_models
from models.unit_test import ChangeEvent

ODS = "tables:\n  - {source: shop.user, key: [id], columns: {score: 'decimal(10,2)'}}\n  - {source: shop.orders, key: [oid]}\n"
AGG = "select device_model, count(*) as num, sum(score) as total from ods.user group by device_model"


def project(root: Path, yaml_text: str, sql: str = AGG, extra: dict[str, str] | None = None) -> Path:
    (root / "layers" / "ods").mkdir(parents=True)
    (root / "layers" / "dws").mkdir(parents=True)
    (root / "lake.yaml").write_text("name: t\nwarehouse: wh\n")
    (root / "layers" / "ods" / "t.yaml").write_text(ODS)
    (root / "layers" / "dws" / "agg.sql").write_text(sql)
    (root / "layers" / "dws" / "agg.yaml").write_text(textwrap.dedent(yaml_text))
    for rel, body in (extra or {}).items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(textwrap.dedent(body))
    return root


def issues(root: Path) -> list[str]:
    p = load_project(root)
    with pytest.raises(ConfigError) as e:
        discover(p, load_models(p), ["dws.agg"])
    return [str(i) for i in e.value.issues]


def ev(op: str, row: dict[str, object], key: dict[str, object] | None = None, table: str = "ods.user") -> ChangeEvent:
    return ChangeEvent(op=op, input=table, row=row, key=key)  # type: ignore[arg-type]


# ---------------------------------------------------------------- rows
def test_values_are_text_and_types_are_inferred_from_yaml_and_csv() -> None:
    assert [text(v) for v in (None, True, 3, 1.5, date(2024, 5, 1), [1, {"a": 2}])] == [None, "true", "3", "1.5", "2024-05-01", '[1, {"a": 2}]']
    assert text(datetime(2024, 5, 1, 14, 0, tzinfo=timezone.utc).astimezone()) == "2024-05-01 14:00:00"  # any zone -> UTC
    assert [kind_of(v, False) for v in (1, 1.0, "1", True, date(2024, 1, 1), datetime(2024, 1, 1))] == \
        ["bigint", "double", "string", "boolean", "date", "timestamp"]
    assert [kind_of(v, True) for v in ("1", "1.5", "TRUE", "2024-05-01", "2024-05-01T10:00:00Z", "x1")] == \
        ["bigint", "double", "boolean", "date", "timestamp", "string"]
    assert infer(["bigint", None, "double"]) == "double" and infer(["date", "timestamp"]) == "timestamp"
    assert infer(["bigint", "string"]) == "string" and infer([None]) is None


@pytest.mark.parametrize(("value", "sql_type", "ok"), [
    ("12.50", "decimal(10,2)", True), ("123456789", "decimal(10,2)", False), ("abc", "decimal(10,2)", False),
    ("2147483648", "int", False), ("-5", "bigint", True), ("yes", "boolean", True), ("maybe", "boolean", False),
    ("2024-02-30", "date", False), ("2024-02-29", "date", True), ("2024-05-01 10:00:00", "timestamp", True),
    ("noon", "timestamp", False), ("1e3", "double", True), ("anything", "string", True),
])
def test_declared_types_check_values_before_spark(value: str, sql_type: str, ok: bool) -> None:
    assert (check_value(value, sql_type) is None) == ok


def test_columns_the_sql_reads_per_upstream() -> None:
    refs = referenced_columns("select u.name, o.total as amount from ods.user u join ods.orders o on u.id = o.uid "
                              "where o.status = 'paid' order by amount", ("ods.user", "ods.orders"))
    assert refs == {"ods.user": {"name", "id"}, "ods.orders": {"total", "uid", "status"}}
    # One upstream: unqualified columns are its own, except output aliases (GROUP BY alias).
    assert referenced_columns("select upper(city) as c, count(*) as n from ods.user group by c", ("ods.user",)) == {"ods.user": {"city"}}


# ---------------------------------------------------------------- events
def test_events_apply_in_order_and_split_into_commits_where_a_key_repeats() -> None:
    t = Table(("id",), ("id", "k", "v"))
    given = {"ods.user": [{"id": 1, "k": "a", "v": 1}, {"id": 2, "k": "a", "v": 2}]}
    done = apply(given, [ev("update", {"id": 1, "k": "b"}), ev("delete", {"id": 2}), ev("insert", {"id": 3, "k": "c"}),
                         ev("update", {"id": 1, "v": 9})], {"ods.user": t})
    assert done.final["ods.user"] == [{"id": 1, "k": "b", "v": 9}, {"id": 3, "k": "c"}]  # an update keeps what it does not give
    assert len(done.rounds) == 2  # id 1 changes twice: two commits
    first, second = done.rounds
    assert first.upserts["ods.user"] == ({"id": 1, "k": "b", "v": 1}, {"id": 3, "k": "c"})
    assert first.deletes["ods.user"] == ({"id": 2, "k": "a", "v": 2},)
    assert second.upserts == {"ods.user": ({"id": 1, "k": "b", "v": 9},)} and not second.deletes


def test_an_update_that_changes_the_key_deletes_the_old_row() -> None:
    t = Table(("id",), ("id", "k"))
    done = apply({"ods.user": [{"id": 1, "k": "a"}]}, [ev("update", {"id": 7}, key={"id": 1})], {"ods.user": t})
    assert done.final["ods.user"] == [{"id": 7, "k": "a"}]
    assert done.rounds[0].deletes["ods.user"] == ({"id": 1, "k": "a"},) and done.rounds[0].upserts["ods.user"] == ({"id": 7, "k": "a"},)


@pytest.mark.parametrize(("events", "problem"), [
    ([ev("insert", {"id": 1})], "id=1 is in ods.user already at this point"),
    ([ev("update", {"id": 5, "k": "x"})], "id=5 is not in ods.user at this point"),
    ([ev("delete", {"k": "a"})], "no value for the key column id"),
    ([ev("delete", {"id": 1}), ev("delete", {"id": 1})], "id=1 is not in ods.user at this point"),
])
def test_events_that_cannot_apply(events: list[ChangeEvent], problem: str) -> None:
    with pytest.raises(EventError) as e:
        apply({"ods.user": [{"id": 1, "k": "a"}]}, events, {"ods.user": Table(("id",), ("id", "k"))})
    assert e.value.problem == problem


# ---------------------------------------------------------------- comparison
def test_unordered_comparison_marks_missing_extra_and_changed_rows_by_key() -> None:
    want = [("a", "2"), ("b", "1"), ("c", "1"), ("a", "2")]
    got = [("a", "2"), ("b", "3"), ("d", "1"), ("a", "2")]
    c = _unordered(want, got, [0])
    assert (c.matches, c.missing, c.extra, c.changed) == (False, 1, 1, 1)
    assert [(line.mark, line.values) for line in c.lines] == [
        ("ok", ["a", "2"]), ("expected", ["b", "1"]), ("actual", ["b", "3"]), ("missing", ["c", "1"]), ("ok", ["a", "2"]), ("extra", ["d", "1"])]
    assert _unordered([("x",), ("y",)], [("y",), ("x",)], None).matches  # order is ignored
    assert not _unordered([("x",), ("x",)], [("x",)], None).matches  # but not how often a row occurs


def test_ordered_comparison_pairs_rows_by_position() -> None:
    assert not _ordered([("x",), ("y",)], [("y",), ("x",)]).matches
    c = _ordered([("1", "a"), ("2", "b")], [("1", "a"), ("2", "z"), ("3", "c")])
    assert [(line.mark, line.values) for line in c.lines] == [("ok", ["1", "a"]), ("expected", ["2", "b"]), ("actual", ["2", "z"]), ("extra", ["3", "c"])]


# ---------------------------------------------------------------- config errors, before Spark
def test_a_good_test_resolves_with_its_inputs_typed(tmp_path: Path) -> None:
    root = project(tmp_path, """
        tests:
          - name: t1
            given:
              - input: ods.user
                rows: [{id: 1, device_model: a, score: 1.5, seen: 2024-05-01}]
            changes:
              - {op: update, input: ods.user, row: {id: 1, device_model: b}}
            expect: {rows: [{device_model: b, num: 1}]}
        """)
    p = load_project(root)
    (case,) = discover(p, load_models(p), ["dws.agg"])
    # Declared (ODS `columns:`), inferred (YAML values) and read-by-the-SQL (NULL) columns.
    assert dict(case.inputs["ods.user"].columns) == {"id": "bigint", "device_model": "string", "score": "decimal(10,2)", "seen": "date"}
    assert case.incremental and case.key == ("device_model",) and case.final["ods.user"][0]["device_model"] == "b"
    assert (case.file, case.line) == ("layers/dws/agg.yaml", 3)  # its `- name:` line


def test_config_errors_name_file_line_field_and_fix(tmp_path: Path) -> None:
    root = project(tmp_path, """
        tests:
          - name: t1
            given:
              - input: ods.users
                rows: [{id: 1}]
            expect: {rows: []}
          - name: t2
            given:
              - input: ods.user
                format: csv
                rows: |
                  id,score
                  1,1.5
                  2,lots
            expect: {rows: []}
          - name: t3
            given:
              - {input: ods.user, rows: [{id: 1, device_model: a}]}
            changes:
              - {op: update, input: ods.user, row: {id: 2, device_model: b}}
            expect: {rows: []}
          - name: t4
            expect:
              rows: [{device_model: a, nmu: 1}]
          - name: t4
            expect: {file: nowhere.csv}
        """)
    assert issues(root) == [
        "layers/dws/agg.yaml:5: tests[0].given[0].input: dws.agg does not read ods.users\n"
        "  fix: did you mean ods.user? name one of its upstreams as its SQL does: ods.user",
        "layers/dws/agg.yaml:15: tests[1].given[0].rows[1]: 'lots' in column score of ods.user is not a decimal(10,2)\n"
        "  fix: give a decimal(10,2) value (the `columns:` of ods.user in layers/ods/ declares it decimal(10,2))",
        "layers/dws/agg.yaml:21: tests[2].changes[0].row: update of ods.user: id=2 is not in ods.user at this point\n"
        "  fix: insert it first (in `given:` or an earlier insert), or correct the key",
        "layers/dws/agg.yaml:25: tests[3].expect.rows[0].nmu: dws.agg returns no column nmu (its columns: device_model, num, total)\n"
        "  fix: did you mean num?",
        "layers/dws/agg.yaml:26: tests[4].name: dws.agg has two tests named 't4'\n  fix: give each test of a model its own name",
    ]


def test_schema_errors_come_from_the_model_yaml_loader(tmp_path: Path) -> None:
    root = project(tmp_path, """
        tests:
          - name: t1
            given:
              - {input: ods.user, rows: "id\\n1"}
            changes:
              - {op: insert, input: ods.user, row: {id: 2}, key: {id: 2}}
            expect: {rows: [], extra: 1}
        """)
    with pytest.raises(ConfigError) as e:
        load_models(load_project(root))
    text_ = str(e.value)
    assert "layers/dws/agg.yaml:5: tests[0].given[0]: `rows:` is text, not a list of mappings\n  fix: add `format: csv`" in text_
    assert "layers/dws/agg.yaml:7: tests[0].changes[0]: `key:` is for updates that change a row's key" in text_
    assert "layers/dws/agg.yaml:8: tests[0].expect.extra: unknown key" in text_


def test_project_test_files_name_their_model(tmp_path: Path) -> None:
    root = project(tmp_path, "description: x\n", extra={
        "tests/more.yaml": """
            unit_tests:
              - {model: dws.agg, name: from_file, given: [{input: ods.user, file: fixtures/users.csv}], expect: {file: fixtures/want.yaml}}
              - {model: dws.agh, name: typo, expect: {rows: []}}
            """,
        "tests/fixtures/users.csv": "id,device_model\n1,a\n2,a\n",
        "tests/fixtures/want.yaml": "- {device_model: a, num: 2}\n",
        "tests/want.yaml": "- {device_model: a, num: 2}\n",  # rows, not tests: belongs in a subfolder
    })
    assert issues(root) == [
        "tests/more.yaml:4: unit_tests[1].model: no model named dws.agh\n  fix: did you mean dws.agg?",
        "tests/want.yaml:1: (file): is not a test file: it holds no `unit_tests:` mapping\n"
        "  fix: a YAML file in tests/ holds `unit_tests: [...]`; keep files of rows in a subfolder, e.g. tests/fixtures/",
    ]
    (root / "tests" / "want.yaml").unlink()
    (root / "tests" / "more.yaml").write_text((root / "tests" / "more.yaml").read_text().replace("dws.agh", "dws.agg"))
    p = load_project(root)
    (a, b) = discover(p, load_models(p), ["dws.agg"])
    assert a.inputs["ods.user"].rows == ({"id": "1", "device_model": "a"}, {"id": "2", "device_model": "a"})
    assert dict(a.inputs["ods.user"].columns)["id"] == "bigint" and a.expect == ({"device_model": "a", "num": 2},)
    assert (b.name, b.file) == ("typo", "tests/more.yaml")


def test_tests_do_not_change_the_model_fingerprint(tmp_path: Path) -> None:
    """Adding or editing tests changes no data: no full rebuild may follow."""
    root = project(tmp_path, "description: x\n")
    before = load_models(load_project(root))["dws.agg"].fingerprint
    (root / "layers" / "dws" / "agg.yaml").write_text("description: x\ntests:\n  - {name: t, expect: {rows: []}}\n")
    assert load_models(load_project(root))["dws.agg"].fingerprint == before


def test_given_columns_of_a_model_upstream_must_exist(tmp_path: Path) -> None:
    root = project(tmp_path, """
        tests:
          - name: t1
            given:
              - input: dwd.clean
                format: csv
                rows: |
                  id,devce_model
                  1,a
            expect: {rows: []}
        """, sql="select device_model, count(*) as n from dwd.clean group by device_model",
        extra={"layers/dwd/clean.sql": "select id, device_model from ods.user where id > 0"})
    assert issues(root) == ["layers/dws/agg.yaml:7: tests[0].given[0].rows: dwd.clean has no column devce_model (its columns: id, device_model)\n"
                            "  fix: did you mean device_model?"]
