"""`make submit-archive`: lake and its Python dependencies as one archive for a submitted Spark
application (`--archives lake-venv.tar.gz#env`, PYSPARK_PYTHON=./env/bin/python, as EMR
Serverless documents), plus `lake_submit.py`, the driver program.

A virtual environment is built with lake installed in it (not editable: venv-pack packs files),
and every dependency except PySpark and py4j, which the platform's Spark provides (the driver and
executors put its own `pyspark.zip` on PYTHONPATH; a second copy is 350 MB of clashing jars), then
packed with venv-pack. The environment is kept and reused: the dependencies are installed again
only when their list changes; lake itself is reinstalled every time.

The archive holds the build machine's interpreter path: build it on the platform's OS and Python
(for EMR, in the Amazon Linux image its docs name), as for any venv-pack archive.

    python -m framework.ops.archive [--out dist] [--venv build/submit-venv] [--compress-level 4]
"""

from __future__ import annotations

import argparse
import hashlib
import subprocess
import sys
import venv
from pathlib import Path

import tomllib

REPO = Path(__file__).resolve().parents[2]
PROVIDED = ("pyspark", "py4j")  # the platform's Spark brings these

# What `make submit-archive` writes as dist/lake_submit.py: the file spark-submit runs.
ENTRY_POINT = '''"""The driver program of lake submitted as a Spark application (spark-submit, EMR Serverless,
EMR steps): `spark-submit [options] lake_submit.py [--project DIR] COMMAND ...` (docs/guides/spark-submit.md)."""

from framework.cli.submit import main

if __name__ == "__main__":
    main()
'''


def requirements(pyproject: Path) -> list[str]:
    """The project's runtime dependencies, minus what Spark provides."""
    deps = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["dependencies"]
    return [d for d in deps if not d.lower().replace("_", "-").startswith(PROVIDED)]


def _pip(env: Path, *args: str) -> None:
    subprocess.run([str(env / "bin" / "python"), "-m", "pip", "-q", "--disable-pip-version-check", *args], check=True)


def build(out: Path, env: Path, compress_level: int = 4, repo: Path = REPO) -> Path:
    """Build (or refresh) `env`, pack it to `out/lake-venv.tar.gz`, write `out/lake_submit.py`."""
    import venv_pack

    reqs = requirements(repo / "pyproject.toml")
    stamp = env / ".lake-requirements"
    digest = hashlib.sha256("\n".join(reqs).encode()).hexdigest()
    if not (env / "bin" / "python").exists() or not stamp.exists() or stamp.read_text() != digest:
        venv.EnvBuilder(clear=True, with_pip=True).create(env)
        _pip(env, "install", "setuptools>=68", *reqs)  # setuptools: lake is installed without build isolation
        stamp.write_text(digest)
    _pip(env, "install", "--no-deps", "--force-reinstall", "--no-build-isolation", str(repo))
    out.mkdir(parents=True, exist_ok=True)
    archive = out / "lake-venv.tar.gz"
    archive.unlink(missing_ok=True)
    venv_pack.pack(prefix=str(env), output=str(archive), compress_level=compress_level, verbose=False)
    (out / "lake_submit.py").write_text(ENTRY_POINT, encoding="utf-8")
    return archive


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m framework.ops.archive", description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=REPO / "dist", help="where lake-venv.tar.gz and lake_submit.py go")
    p.add_argument("--venv", type=Path, default=REPO / "build" / "submit-venv", help="the environment to build and pack (kept)")
    p.add_argument("--compress-level", type=int, default=4, choices=range(10))
    a = p.parse_args(argv)
    archive = build(a.out, a.venv, a.compress_level)
    print(f"wrote {archive} ({archive.stat().st_size / 2**20:.0f} MiB) and {a.out / 'lake_submit.py'}")


if __name__ == "__main__":
    main(sys.argv[1:])
