"""`lake init DIR`: a small working project (config, one ODS declaration, sample CDC, an example
model with a unit test, and an example seed).

The sample is seven Debezium envelopes for `inventory.customers` (the Debezium tutorial table),
so `lake ingest --once` works right after `lake init` with no database or Kafka around. The
caller passes them: `lake init` takes them from :mod:`framework.demo`'s simulator, which the
core never imports. They live in `sample/cdc/`, lake.yaml's source until the user points it at
their own CDC (a folder of theirs, or Kafka): never in the folder a user's own CDC files go, where
they would reach the dead letter (and a `dead_letter` alert) once the user declares their own
tables instead of `inventory.customers`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from framework.errors import LakeError

LAKE_YAML = """\
# lake project configuration; every key: docs/reference/lake-yaml.md in lake's repository.
name: {name}
# Where the Hudi tables, checkpoints and run history live (relative to this file).
warehouse: warehouse
spark:
  master: "local[2]"
  # Extra Spark confs, e.g. spark.driver.memory: 8g
  conf: {{}}
ods:
  source:
    # A directory of CDC files, one Debezium JSON message per line (Kafka: kind: kafka).
    kind: files
    # lake's sample: seven events of inventory.customers, the table layers/ods/inventory.yaml
    # declares. Point this at the folder of your own CDC files (e.g. cdc), or read Kafka instead;
    # then delete sample/.
    path: sample/cdc
    format: debezium-json
"""

INVENTORY_YAML = """\
# ODS declarations: each entry routes one CDC source table into one Hudi table, ods.<name>.
tables:
  # `<db>.<table>` exactly as in the events' source.db / source.table (a Postgres or SQL
  # Server schema other than public/dbo: `<db>.<schema>.<table>`).
  - source: inventory.customers
    # The ODS table name (ods.customers); default: the source table name, lower-cased.
    name: customers
    # Primary key column(s) of the source table: one ODS row per key; deletes remove it.
    key: [id]
    # Business column(s) that order versions of a row (e.g. [modify_time]); empty: the
    # binlog position orders them, which is right for MySQL. Timestamp, date or integer.
    ordering: []
    # Partition the table by a time column, e.g.
    #   partition_by: {column: create_time, granularity: month}   # adds column year_month
    # granularity: day (dt), month (year_month) or year (year). Unpartitioned when absent.
    # Hudi table type: cow (copy-on-write: fast reads) or mor (merge-on-read: fast writes).
    type: cow
    # Spark SQL types for events without a `schema` block, e.g. {price: "decimal(10,2)"};
    # events with a schema block (like sample/cdc/0001-customers.json) need none.
    columns: {}
    # `history: true` also keeps every version of each key in ods.customers_history
    # (_valid_from, _valid_to, _is_current: SCD type 2), for point-in-time joins.
    # `contract: enforced` (with every column in `columns:`) sends events with other
    # columns or wider types to the dead letter instead of widening the table.
"""

LAYER_README = """\
# {layer} models

{what}
Each model is one file here: `<name>.sql` (a SELECT) or `<name>.py` (a function returning a
DataFrame), with an optional `<name>.yaml` beside it for keys, strategy, tags and checks. The
model is called `{layer}.<name>` (`lake build {layer}.<name>`) and reads the tables it names.
"""

EXAMPLE_SQL = """\
-- An example model: customers per e-mail domain. A GROUP BY of one upstream with COUNT, so
-- `lake build --incremental` merges each change into it (the aggregate strategy).
SELECT substring_index(email, '@', -1) AS domain, count(*) AS customers
FROM   ods.customers
GROUP  BY substring_index(email, '@', -1)
"""

EXAMPLE_YAML = """\
description: Customers per e-mail domain (an example; delete it or make it yours).
# The columns and types its readers may rely on: a build whose output differs fails before it
# commits (`contract: enforced`; remove it to let the output change shape freely).
contract: enforced
columns:
  domain: {type: string, description: the part of the e-mail address after the @}
  customers: {type: bigint, nullable: false, description: customers with an address in that domain}
# Unit tests: `lake test` runs the model on these rows only (no warehouse needed); `lake build`
# runs them before it builds. With `changes:`, lake also builds the model incrementally over the
# events, as `lake build --incremental` would, and both results must equal `expect:`.
tests:
  - name: customers_per_domain
    given:
      - input: ods.customers
        rows:
          - {id: 1001, email: sally.thomas@acme.com}
          - {id: 1002, email: gbailey@foobar.com}
          - {id: 1003, email: ed@walker.com}
    changes:
      - {op: update, input: ods.customers, row: {id: 1002, email: george@acme.com}}
      - {op: delete, input: ods.customers, row: {id: 1003}}
    expect:
      rows:
        - {domain: acme.com, customers: 2}
"""

SEED_CSV = """\
domain,kind
acme.com,business
foobar.com,business
walker.com,personal
gmail.com,personal
"""

SEED_YAML = """\
# A seed: reference data kept in the project as a CSV file, loaded as the table seed.email_domains
# (`lake build` loads it, and again only when the file changes). A model reads it like any table:
#   SELECT d.kind, count(*) AS customers FROM ods.customers c
#   JOIN seed.email_domains d ON substring_index(c.email, '@', -1) = d.domain GROUP BY d.kind
description: What kind of address each e-mail domain gives (an example; delete it or make it yours).
key: [domain]
columns:
  domain: {type: string, description: the part of an e-mail address after the @}
  kind: {type: string, description: business or personal}
# Checks run on the rows before every commit of the table (an `error` check that fails blocks it;
# `severity: warn` only reports), and against the table as it is with `lake check`.
checks:
  - accepted_values: {column: kind, values: [business, personal]}
"""

_LAYERS = {
    "dwd": "DWD: cleaned, conformed detail tables built from `ods.*`.",
    "dws": "DWS: aggregates and wide tables built from `dwd.*` and `ods.*`.",
}
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# The sample CDC file, relative to the project: lake.yaml's source reads its folder.
SAMPLE_CDC = "sample/cdc/0001-customers.json"


def scaffold(directory: Path, name: str | None, *, cdc_sample: Sequence[str]) -> list[Path]:
    """Create a project in `directory` (made if missing) and return the files written;
    `cdc_sample`: the lines of its sample CDC file (Debezium envelopes for inventory.customers).

    Raises:
        LakeError: the directory already holds a project, a file would be overwritten, or
            `name` is not a valid project name.
    """
    directory = Path(directory)
    if (directory / "lake.yaml").exists():
        raise LakeError(
            f"{directory} already contains lake.yaml",
            fix="choose another directory for `lake init`, or use the existing project: lake --project " + str(directory),
        )
    project = _project_name(directory, name)
    files = {
        Path("lake.yaml"): LAKE_YAML.format(name=project),
        Path("layers/ods/inventory.yaml"): INVENTORY_YAML,
        Path("layers/dwd/README.md"): LAYER_README.format(layer="dwd", what=_LAYERS["dwd"]),
        Path("layers/dws/README.md"): LAYER_README.format(layer="dws", what=_LAYERS["dws"]),
        Path("layers/dws/customers_by_domain.sql"): EXAMPLE_SQL,
        Path("layers/dws/customers_by_domain.yaml"): EXAMPLE_YAML,
        Path("layers/seed/email_domains.csv"): SEED_CSV,
        Path("layers/seed/email_domains.yaml"): SEED_YAML,
        Path(SAMPLE_CDC): "".join(line + "\n" for line in cdc_sample),
    }
    clashes = [str(directory / rel) for rel in files if (directory / rel).exists()]
    if clashes:
        raise LakeError(f"lake init would overwrite {', '.join(clashes)}", fix="move those files away or choose an empty directory")
    created = []
    for rel, text in files.items():
        path = directory / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        created.append(path)
    gitignore = _ignore_warehouse(directory / ".gitignore")
    if gitignore:
        created.append(gitignore)
    return created


def _project_name(directory: Path, name: str | None) -> str:
    """`name`, or one derived from the directory name (letters, digits, underscores)."""
    if name is not None:
        if not _IDENT.match(name):
            raise LakeError(
                f"project name {name!r} is not valid",
                fix="use letters, digits and underscores, not starting with a digit, e.g. --name my_lake",
            )
        return name
    stem = re.sub(r"[^A-Za-z0-9_]+", "_", directory.resolve().name).strip("_") or "lake"
    return stem if _IDENT.match(stem) else f"lake_{stem}"


def _ignore_warehouse(path: Path) -> Path | None:
    """Add `warehouse/` and `.lake/` (a warm engine's file: framework/engine/) to .gitignore
    (creating it); None when both are already ignored."""
    existing = path.read_text(encoding="utf-8") if path.exists() else ""
    lines = existing.split()
    wanted = [(entry, why) for entry, why in (("warehouse/", "Hudi tables, checkpoints and run history"),
                                             (".lake/", "the warm engine's address and token (lake engine start)"))
              if entry not in lines]
    if not wanted:
        return None
    sep = "" if not existing or existing.endswith("\n") else "\n"
    path.write_text(existing + sep + "".join(f"# lake: {why}\n{entry}\n" for entry, why in wanted), encoding="utf-8")
    return path
