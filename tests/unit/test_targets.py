"""`targets:` of lake.yaml and `${VAR}` in every YAML file (framework/project/targets.py), loaded through
load_project / load_models as lake does (no Spark). Expected values are written out by hand."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from framework.commands.common import recorded
from framework.errors import ConfigError
from framework.project.config import load_project
from framework.runtime import history
from framework.runtime.paths import Layout
from framework.transform.loader import load_models

LAKE = """\
name: demo
warehouse: wh
spark:
  master: local[2]
  conf: {spark.a: "1", spark.b: "2"}
hudi: {hoodie.x: top}
default_target: dev
targets:
  dev:
    warehouse: /data/dev
    spark:
      conf: {spark.b: "3", spark.c: "4"}
  prod:
    warehouse: /data/prod
    spark: {master: "yarn"}
    ods:
      source: {kind: kafka, bootstrap_servers: "broker:9092", topics: [cdc]}
"""


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LAKE_TARGET", raising=False)


def _project(tmp_path: Path, lake: str, ods: str = "tables: []\n") -> Path:
    (tmp_path / "lake.yaml").write_text(textwrap.dedent(lake))
    (tmp_path / "layers" / "ods").mkdir(parents=True)
    (tmp_path / "layers" / "ods" / "a.yaml").write_text(textwrap.dedent(ods))
    return tmp_path


def _issues(root: Path, target: str | None = None) -> list[str]:
    with pytest.raises(ConfigError) as e:
        load_project(root, target)
    return [str(i) for i in e.value.issues]


def test_flag_selects_target_and_merges_spark_conf_key_by_key(tmp_path: Path) -> None:
    p = load_project(_project(tmp_path, LAKE), "dev")
    assert p.target == "dev"
    assert p.warehouse.local == Path("/data/dev")
    assert p.config.spark.master == "local[2]"  # not in the target: the top level's
    assert p.config.spark.conf == {"spark.a": "1", "spark.b": "3", "spark.c": "4"}
    assert p.config.hudi == {"hoodie.x": "top"}
    assert p.config.ods.source.kind == "files"


def test_target_with_another_source_kind_replaces_the_source(tmp_path: Path) -> None:
    p = load_project(_project(tmp_path, LAKE), "prod")
    assert p.warehouse.local == Path("/data/prod") and p.config.spark.master == "yarn"
    assert p.config.spark.conf == {"spark.a": "1", "spark.b": "2"}
    src = p.config.ods.source
    assert src.kind == "kafka" and src.bootstrap_servers == "broker:9092" and src.topics == ["cdc"]


def test_env_var_then_flag_then_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _project(tmp_path, LAKE)
    assert load_project(root).target == "dev"  # default_target
    monkeypatch.setenv("LAKE_TARGET", "prod")
    assert load_project(root).warehouse.local == Path("/data/prod")
    assert load_project(root, "dev").warehouse.local == Path("/data/dev")  # the flag wins


def test_no_target_chosen_and_no_default_uses_the_top_level(tmp_path: Path) -> None:
    p = load_project(_project(tmp_path, LAKE.replace("default_target: dev\n", "")))
    assert p.target is None
    assert p.warehouse.local == tmp_path / "wh"
    assert p.config.spark.conf == {"spark.a": "1", "spark.b": "2"}


def test_unknown_target_names_the_declared_ones(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _project(tmp_path, LAKE)
    (msg,) = _issues(root, "prd")
    assert msg.startswith("lake.yaml:8: targets: no target named 'prd' (asked for by --target)")
    assert "did you mean prod? declared targets: dev, prod" in msg
    monkeypatch.setenv("LAKE_TARGET", "stage")
    (msg,) = _issues(root)
    assert "no target named 'stage' (asked for by LAKE_TARGET)" in msg and "declared targets: dev, prod" in msg


def test_unknown_default_target_points_at_its_line(tmp_path: Path) -> None:
    (msg,) = _issues(_project(tmp_path, LAKE.replace("default_target: dev", "default_target: deev")))
    assert msg.startswith("lake.yaml:7: default_target: no target named 'deev'")
    assert "did you mean dev?" in msg


def test_target_asked_for_without_targets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _project(tmp_path, "name: demo\n")
    (msg,) = _issues(root, "dev")
    assert "--target asks for target 'dev' but lake.yaml declares no `targets:`" in msg
    # LAKE_TARGET may be exported for another project (or `lake demo`'s parent): nothing to choose here.
    monkeypatch.setenv("LAKE_TARGET", "dev")
    p = load_project(root)
    assert p.target is None and p.warehouse.local == root / "warehouse"


def test_key_outside_the_allow_list_is_an_error(tmp_path: Path) -> None:
    lake = LAKE + "  qa:\n    name: other\n    ods:\n      trigger_seconds: 5\n    sprak: {}\n"
    msgs = _issues(_project(tmp_path, lake), "dev")  # every target is checked, chosen or not
    assert len(msgs) == 3
    assert msgs[0].startswith("lake.yaml:19: targets.qa.name: a target cannot override this key")
    assert "set `name` at the top level of lake.yaml; a target may override only warehouse, spark, ods.source, catalog, locks, hudi" in msgs[0]
    assert msgs[1].startswith("lake.yaml:21: targets.qa.ods.trigger_seconds: a target cannot override this key")
    assert msgs[2].startswith("lake.yaml:22: targets.qa.sprak:") and "did you mean `spark`?" in msgs[2]


def test_wrong_value_in_a_target_points_at_the_targets_line(tmp_path: Path) -> None:
    lake = LAKE.replace('spark: {master: "yarn"}', "spark: {master: [yarn]}")
    (msg,) = _issues(_project(tmp_path, lake), "prod")
    assert msg.startswith("lake.yaml:15: spark.master:")


def test_env_vars_defaults_and_escape(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WH", "/data/from-env")
    monkeypatch.setenv("EMPTY", "")
    monkeypatch.delenv("UNSET_ONE", raising=False)
    root = _project(tmp_path, """\
        name: demo  # ${NOT_EXPANDED_IN_COMMENTS}
        warehouse: ${WH}
        spark:
          master: "local[${UNSET_ONE:-3}]"
          conf:
            literal: $${WH}
            empty_default: ${EMPTY:-fallback}
            ${KEY_NOT_EXPANDED}: x
        ods: {trigger_seconds: "${UNSET_ONE:-7}"}
        """)
    p = load_project(root)
    assert p.warehouse.local == Path("/data/from-env")
    assert p.config.spark.master == "local[3]"
    assert p.config.spark.conf == {"literal": "${WH}", "empty_default": "fallback", "${KEY_NOT_EXPANDED}": "x"}
    assert p.config.ods.trigger_seconds == 7


def test_unset_variable_names_file_line_variable_and_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LAKE_TEST_HOST", raising=False)
    root = _project(tmp_path, "name: demo\n", """\
        tables:
          - source: db.t
            key: [id]
            description: |
              first line
              from ${LAKE_TEST_HOST}
        """)
    (msg,) = _issues(root)
    assert msg == ("layers/ods/a.yaml:6: tables[0].description: the environment variable LAKE_TEST_HOST is not set\n"
                   "  fix: export LAKE_TEST_HOST=... before running lake, or give a default: ${LAKE_TEST_HOST:-value}")


def test_unset_variable_in_a_target_not_chosen_is_no_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PROD_BROKER", raising=False)
    root = _project(tmp_path, LAKE.replace('"broker:9092"', '"${PROD_BROKER}"'))
    assert load_project(root).target == "dev"
    (msg,) = _issues(root, "prod")
    assert msg.startswith("lake.yaml:17: ods.source.bootstrap_servers: the environment variable PROD_BROKER is not set")


def test_values_from_the_environment_stay_out_of_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROD_BROKER", "s3cr3t-host-without-port")
    root = _project(tmp_path, LAKE.replace('"broker:9092"', '"${PROD_BROKER}"'))
    (msg,) = _issues(root, "prod")
    assert "s3cr3t" not in msg
    assert msg.startswith("lake.yaml:17: ods.source.bootstrap_servers: '${PROD_BROKER}' is not host:port")


def test_only_values_that_may_be_secrets_are_redacted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A short value of a plainly named variable (a user name) is shown; one named like a secret,
    put into a field named like one, or as long as a token is not."""
    from framework.project.targets import read_yaml

    monkeypatch.setenv("DB_USER", "lake")
    monkeypatch.setenv("DB_PASSWORD", "pw")
    monkeypatch.setenv("PLAIN", "abc")
    monkeypatch.setenv("LONG_HOST", "kafka-1.internal.example")
    doc = read_yaml("user: ${DB_USER}\npassword: ${DB_PASSWORD}\napi_key: ${PLAIN}\nhost: ${LONG_HOST}\n", "lake.yaml")
    assert doc.data == {"user": "lake", "password": "pw", "api_key": "abc", "host": "kafka-1.internal.example"}
    assert doc.secrets == {"pw": "DB_PASSWORD", "abc": "PLAIN", "kafka-1.internal.example": "LONG_HOST"}


def test_not_a_reference_is_an_error(tmp_path: Path) -> None:
    (msg,) = _issues(_project(tmp_path, "name: demo\nwarehouse: ${1abc}\n"))
    assert msg.startswith("lake.yaml:2: warehouse: ${1abc} is not a variable reference")
    assert "'$${'" in msg


def test_model_sidecar_expands_variables(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OWNER_TAG", "team_a")
    monkeypatch.delenv("MISSING_DESC", raising=False)
    root = _project(tmp_path, "name: demo\n", "tables:\n  - {source: db.t, key: [id]}\n")
    (root / "layers" / "dws").mkdir(parents=True)
    (root / "layers" / "dws" / "agg.sql").write_text("select id, count(*) as n from ods.t group by id")
    (root / "layers" / "dws" / "agg.yaml").write_text("key: [id]\ntags: [\"${OWNER_TAG}\", '$${x}']\n")
    assert load_models(load_project(root))["dws.agg"].config.tags == ["team_a", "${x}"]
    (root / "layers" / "dws" / "agg.yaml").write_text("key: [id]\ndescription: ${MISSING_DESC}\n")
    with pytest.raises(ConfigError) as e:
        load_models(load_project(root))
    assert str(e.value.issues[0]).startswith("layers/dws/agg.yaml:2: description: the environment variable MISSING_DESC is not set")


def test_run_record_stores_the_target(tmp_path: Path) -> None:
    p = load_project(_project(tmp_path, LAKE.replace("/data/dev", str(tmp_path / "devwh"))), "dev")

    with recorded(p, "build", ["build"]) as rec:
        pass
    (stored,) = history.runs(Layout(tmp_path / "devwh"), 5)
    assert stored.run_id == rec.run_id and stored.target == "dev"


def test_scheduled_commands_run_with_the_schedulers_target(tmp_path: Path) -> None:
    from framework.ops.airflow import render_dags
    from framework.ops.schedule import SubprocessSteps
    from models.config import ScheduleConfig

    steps = SubprocessSteps(Path("/p"), print, "prod")
    assert steps.argv(["build"])[3:] == ["--project", "/p", "--target", "prod", "build"]
    source = render_dags(Path("/p"), [ScheduleConfig(name="n", cron="0 2 * * *", what="build")], target="prod")
    assert "bash_command='lake --project /p --target prod build'" in source
