"""A client of a Confluent-compatible schema registry: the writer schema of an id, cached.

Only the calls a reader needs, over plain HTTP(S) with the standard library: `GET /subjects` (is
this a registry that answers, with these credentials?), `GET /schemas/ids/{id}` (the writer
schema of an id; ids are immutable, so a schema is fetched once per process) and, for a schema
with `references`, `GET /subjects/{subject}/versions/{version}` of each (framework/ods/avro_refs.py).
Confluent's Schema Registry, Apicurio's `/apis/ccompat/v7` and Karapace answer them alike.

A registry that cannot be reached, refuses the credentials or does not answer as a registry is an
:class:`EnvironmentProblem` (the run stops with the fix, before any table of the micro-batch
commits); only an id the registry says it does not have (HTTP 404, error code 40403) is the
message's own problem (`None`: its messages go to the dead letter). Credentials go into the
`Authorization` header only: never into a message, a log line or a file.
"""

from __future__ import annotations

import base64
import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from typing import Any

from framework.errors import EnvironmentProblem
from framework.ods.avro_refs import inline
from models.registry import SchemaRegistryConfig

# Confluent's "Schema not found" (Apicurio's ccompat API answers it too).
SCHEMA_NOT_FOUND = 40403


def auth_header(cfg: SchemaRegistryConfig, environ: Mapping[str, str] | None = None) -> str | None:
    """The `Authorization` header for `cfg`: `basic_auth`/`bearer_token` (from `${VAR}`), else the
    variables `basic_auth_env`/`bearer_token_env` when set; None without credentials."""
    env = os.environ if environ is None else environ
    basic = cfg.basic_auth.get_secret_value() if cfg.basic_auth else env.get(cfg.basic_auth_env) or None
    bearer = cfg.bearer_token.get_secret_value() if cfg.bearer_token else env.get(cfg.bearer_token_env) or None
    if basic and not cfg.bearer_token:
        if ":" not in basic:
            raise EnvironmentProblem(f"the environment variable {cfg.basic_auth_env} is not `user:password`",
                                     fix=f"set {cfg.basic_auth_env}=user:password for the schema registry")
        return "Basic " + base64.b64encode(basic.encode()).decode()
    if bearer:
        return f"Bearer {bearer}"
    return None


class SchemaRegistry:
    """Writer schemas by id from the registry at `cfg.url`, each fetched once (module docstring)."""

    def __init__(self, cfg: SchemaRegistryConfig, environ: Mapping[str, str] | None = None) -> None:
        self.cfg = cfg
        self.url = cfg.url
        self._auth = auth_header(cfg, environ)
        self._schemas: dict[int, str] = {}
        self.requests = 0  # HTTP requests made (tests: one per schema id)

    def _get(self, path: str) -> tuple[int, Any]:
        """(status, parsed JSON body or None) of GET `path`; raises on a transport failure."""
        req = urllib.request.Request(self.url + path, headers={"Accept": "application/vnd.schemaregistry.v1+json, application/json"})
        if self._auth:
            req.add_unredirected_header("Authorization", self._auth)
        self.requests += 1
        try:
            with urllib.request.urlopen(req, timeout=self.cfg.timeout_seconds) as r:
                return r.status, _json(r.read())
        except urllib.error.HTTPError as e:
            return e.code, _json(e.read())

    def _request(self, path: str, what: str, retry_seconds: float) -> tuple[int, Any]:
        """GET with retries on transport errors and 5xx for up to `retry_seconds`, then an
        EnvironmentProblem naming the registry and the fix."""
        deadline = time.monotonic() + retry_seconds
        delay = 0.5
        while True:
            try:
                status, body = self._get(path)
                problem = None if status < 500 else f"HTTP {status}"
            except (OSError, urllib.error.URLError) as e:
                reason = getattr(e, "reason", e)
                status, body, problem = 0, None, f"{getattr(reason, 'strerror', None) or reason}"
            if problem is None:
                return status, body
            if time.monotonic() + delay > deadline:
                raise EnvironmentProblem(
                    f"the schema registry at {self.url} did not answer {what} ({problem})",
                    fix="start the registry or fix ods.source.schema_registry.url in lake.yaml "
                    "(schema_registry.timeout_seconds sets how long each request may take)",
                )
            time.sleep(delay)
            delay = min(delay * 2, 5.0)

    def _refused(self, status: int, what: str) -> EnvironmentProblem:
        if status in (401, 403):
            return EnvironmentProblem(
                f"the schema registry at {self.url} refused {what} (HTTP {status}: credentials missing or wrong)",
                fix=f"set `basic_auth: ${{VAR}}` or `bearer_token: ${{VAR}}` under ods.source.schema_registry in lake.yaml, "
                f"or the environment variable {self.cfg.basic_auth_env} (user:password) / {self.cfg.bearer_token_env}",
            )
        detail = f"HTTP {status}" if status != 200 else "HTTP 200 with a body that is not a registry's answer"
        return EnvironmentProblem(
            f"{self.url} does not answer {what} as a Confluent-compatible schema registry ({detail})",
            fix="point ods.source.schema_registry.url in lake.yaml at the registry's base URL: Confluent "
            "`http://host:8081`, Apicurio `http://host:8080/apis/ccompat/v7`",
        )

    def check(self, retry_seconds: float) -> None:
        """Fail with a clear error unless the registry answers `GET /subjects` with a list."""
        status, body = self._request("/subjects", "GET /subjects", retry_seconds)
        if status != 200 or not isinstance(body, list):
            raise self._refused(status, "GET /subjects")

    def schema(self, schema_id: int) -> str | None:
        """The writer schema (Avro JSON text) of `schema_id`; None when the registry has no such id."""
        if schema_id in self._schemas:
            return self._schemas[schema_id]
        what = f"GET /schemas/ids/{schema_id}"
        status, body = self._request(f"/schemas/ids/{schema_id}", what, self.cfg.timeout_seconds)
        if status == 404 and isinstance(body, dict) and body.get("error_code") in (SCHEMA_NOT_FOUND, 404):
            return None
        if status != 200 or not isinstance(body, dict) or not isinstance(body.get("schema"), str):
            raise self._refused(status, what)
        kind = body.get("schemaType", "AVRO")
        if kind != "AVRO":
            raise EnvironmentProblem(f"schema id {schema_id} in the registry at {self.url} is a {kind} schema, not Avro",
                                     fix="lake reads Avro (format: debezium-avro); set the connector's converters to Avro")
        text = inline(body["schema"], self._references(body.get("references"), f"schema id {schema_id}", set()))
        self._schemas[schema_id] = text
        return text

    def _references(self, refs: Any, of: str, seen: set[tuple[str, int]]) -> dict[str, Any]:
        """The named types a schema references (`references`: [{name, subject, version}]), each
        fetched from its subject's version with its own references inlined: full name -> schema."""
        out: dict[str, Any] = {}
        for ref in refs or []:
            name, subject, version = ref.get("name"), ref.get("subject"), ref.get("version")
            if not isinstance(name, str) or not isinstance(subject, str) or (subject, version) in seen:
                continue
            path = f"/subjects/{urllib.parse.quote(subject, safe='')}/versions/{version}"
            status, body = self._request(path, f"GET {path}", self.cfg.timeout_seconds)
            if status != 200 or not isinstance(body, dict) or not isinstance(body.get("schema"), str):
                raise EnvironmentProblem(
                    f"{of} in the registry at {self.url} references {name} ({subject} version {version}), which the registry "
                    f"does not serve (HTTP {status})",
                    fix="register the referenced subject again, or have the converter write self-contained schemas")
            inner = self._references(body.get("references"), f"{subject} version {version}", seen | {(subject, version)})
            out[name] = json.loads(inline(body["schema"], inner))
        return out


def _json(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return None
