"""A real S3-compatible server for the tests: moto's server mode (PyPI `moto[server]`, a dev
dependency) on a free loopback port, one bucket per test, stopped afterwards.

Spark reaches it through hadoop-aws (s3a://) with the endpoint and path-style settings a user of
MinIO or Ceph would write; credentials come from the environment, as the AWS provider chain
reads them in production. Nothing here is a stub: moto answers the S3 REST API over HTTP.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from framework.demo.services import die_with_parent, free_port, log_tail, stop_process

CREDENTIALS = {"AWS_ACCESS_KEY_ID": "lake-test", "AWS_SECRET_ACCESS_KEY": "lake-test-secret", "AWS_REGION": "us-east-1"}


@dataclass
class S3Server:
    endpoint: str  # http://127.0.0.1:PORT

    def spark_conf(self) -> dict[str, str]:
        """What a lake.yaml's `spark.conf` says for an S3-compatible server."""
        return {
            "spark.hadoop.fs.s3a.endpoint": self.endpoint,
            "spark.hadoop.fs.s3a.path.style.access": "true",
            "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
            "spark.hadoop.fs.s3a.endpoint.region": "us-east-1",
        }

    def client(self) -> Any:
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint, region_name="us-east-1",
                            aws_access_key_id=CREDENTIALS["AWS_ACCESS_KEY_ID"], aws_secret_access_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"])

    def new_bucket(self) -> str:
        name = f"lake-{uuid.uuid4().hex[:12]}"
        self.client().create_bucket(Bucket=name)
        return name

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        pages = self.client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        return sorted(o["Key"] for page in pages for o in page.get("Contents", []))


def running_s3(work_dir: Path) -> Iterator[S3Server]:
    """Start moto's server; yield it with the AWS credential variables set; stop it afterwards."""
    work_dir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    log = work_dir / "moto.log"
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                                stdout=out, stderr=subprocess.STDOUT, preexec_fn=die_with_parent)
    endpoint = f"http://127.0.0.1:{port}"
    saved = {k: os.environ.get(k) for k in CREDENTIALS}
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(endpoint + "/moto-api/", timeout=2).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"moto's S3 server did not start:\n{log_tail(log.read_text())}") from None
                time.sleep(0.2)
        os.environ.update(CREDENTIALS)
        yield S3Server(endpoint)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        stop_process(proc, 10)
