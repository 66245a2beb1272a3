# The README's two commands are `make demo` and `make test`; both install what they need.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
PYTHON ?= python3
STAMP := $(VENV)/.installed-$(shell cksum pyproject.toml | cut -d' ' -f1)

.PHONY: install bytecode chromium mariadb postgres jars demo demo-kafka demo-cdc kafka-broker submit-archive test unit lint docs bench clean

install: $(STAMP) jars chromium mariadb postgres bytecode

# lake's own modules compiled once (a `lake` process imports ~200 of them; with
# PYTHONDONTWRITEBYTECODE set, as in many CI images, each process would compile them again).
bytecode: $(STAMP)
	@$(PY) -m compileall -q framework models >/dev/null

# Headless Chromium renders `lake report` in the report test (Debian's package). Installed when
# missing and running as root; otherwise that test fails under `make test` and skips under plain
# pytest, saying why (LAKE_STRICT_SKIPS).
chromium:
	@command -v chromium >/dev/null || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then { apt-get update -q >/dev/null; DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium; }; \
	  else echo "note: chromium is missing (apt-get install -y chromium as root); the report test fails under make test"; fi; }

# MariaDB (Debian's package) is the real database of the CDC chain test and `make demo-cdc`.
# Installed when missing and running as root; otherwise that test fails under `make test` and
# skips under plain pytest, saying why (LAKE_STRICT_SKIPS). Only the
# binaries are used: lake starts its own server on a loopback port, never the system service.
mariadb:
	@command -v mariadbd >/dev/null || [ -x /usr/sbin/mariadbd ] || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then { apt-get update -q >/dev/null; DEBIAN_FRONTEND=noninteractive apt-get install -y -q mariadb-server; }; \
	  else echo "note: mariadb-server is missing (apt-get install -y mariadb-server as root); the CDC chain test fails under make test"; fi; }

# PostgreSQL (Debian's package) is the database of the PostgreSQL chain test and `make demo-cdc
# SOURCE=postgres`; the same rules as MariaDB's (lake runs its own server, never the system one).
postgres:
	@ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then { apt-get update -q >/dev/null; DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql; }; \
	  else echo "note: postgresql is missing (apt-get install -y postgresql as root); the PostgreSQL chain test will skip"; fi; }

$(STAMP): pyproject.toml
	@command -v java >/dev/null || { echo "Java 17 is required: apt-get install -y openjdk-17-jre-headless"; exit 1; }
	@command -v mvn >/dev/null || { echo "Maven is required to fetch the Hudi bundle and the Kafka jars: apt-get install -y maven"; exit 1; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	rm -f $(VENV)/.installed-*
	touch $@

# The Hudi bundle, Spark's Kafka connector, the Kafka broker, Kafka Connect and Debezium's MariaDB
# and PostgreSQL connectors, into .cache/jars (or $LAKE_JAR_CACHE).
jars: $(STAMP)
	@$(PY) -m framework.runtime.jars >/dev/null

demo: install
	$(VENV)/bin/lake demo

demo-kafka: install
	$(VENV)/bin/lake demo --kafka

# The real chain: the database -> Debezium (Kafka Connect) -> Kafka -> lake, in out/cdc-demo/.
# SOURCE=postgres runs it from PostgreSQL.
SOURCE ?= mariadb
demo-cdc: install
	$(VENV)/bin/lake demo --source $(SOURCE)

# A single-node Kafka broker on a free loopback port, data in out/kafka, until Ctrl-C.
kafka-broker: install
	$(PY) -m framework.demo.broker out/kafka

# lake and its Python dependencies (not PySpark: the platform's) as dist/lake-venv.tar.gz, and
# dist/lake_submit.py, for spark-submit / EMR (docs/guides/spark-submit.md). Built in build/submit-venv
# (kept: dependencies are reinstalled only when pyproject.toml's list changes).
submit-archive: install
	$(PY) -m framework.ops.archive --out dist --venv build/submit-venv

# LAKE_STRICT_SKIPS=1: a test that would skip for a missing install (MariaDB, Chromium, hudi-rs)
# fails instead, so CI never passes with a broken install (tests/strict_skips.py).
test: install
	LAKE_STRICT_SKIPS=1 $(VENV)/bin/pytest -q -p no:cacheprovider -n 2 --dist loadfile --no-loadscope-reorder --durations=25

unit: install
	$(VENV)/bin/pytest -q -m "not spark" tests/unit

lint: install
	$(VENV)/bin/ruff check framework models tests benchmarks
	$(VENV)/bin/mypy

# lake's manual (mkdocs + material, docs/) into out/manual/; the reference pages are generated
# from the code while it builds (docs/hooks/reference.py). `--strict`: a broken link fails.
# Not `lake docs`, which writes one project's table catalog.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet -f mkdocs.yml
	@echo "manual: out/manual/index.html"

bench: install
	$(PY) benchmarks/goals.py --out BENCHMARKS.md

clean:
	rm -rf warehouse cdc out/demo out/kafka-demo spark-warehouse metastore_db derby.log dist build/submit-venv
