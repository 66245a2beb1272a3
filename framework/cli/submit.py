"""lake as the application a platform submits (spark-submit, EMR Serverless, EMR steps,
Airflow's SparkSubmitOperator, spark-operator): the driver's main program is `lake_submit.py`
(written by `make submit-archive`), which calls :func:`main`:

    spark-submit --jars hudi-spark3.5-bundle_2.12-1.2.0.jar --conf spark.serializer=... \\
        --archives lake-venv.tar.gz#env --conf spark.pyspark.python=./env/bin/python \\
        lake_submit.py --project project run --once

It adopts the SparkSession the submitter configured (framework/table/session.py: no jar added, no
static setting changed), then runs the lake command given, and stops the session at the end.
"""

from __future__ import annotations

import sys

from rich.console import Console
from rich.text import Text

from framework.errors import LakeError


def main(argv: list[str] | None = None) -> None:
    """Adopt the submitted session, run `lake ARGV`, exit with its code."""
    from pyspark.sql import SparkSession

    from framework.table.session import adopt

    spark = SparkSession.builder.getOrCreate()  # the submitter's: spark-submit already configured it
    code = 0
    try:
        adopt(spark)
        from framework.cli.main import main as lake

        lake.main(args=list(sys.argv[1:] if argv is None else argv), prog_name="lake_submit.py", standalone_mode=True)
    except LakeError as e:
        Console(stderr=True).print(Text.assemble(("Error:", "bold red"), " " + str(e)), highlight=False)
        code = 1
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    finally:
        spark.stop()
    sys.exit(code)

