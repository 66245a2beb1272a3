"""The schema registry of a Kafka source in Avro (`ods.source.schema_registry` in lake.yaml)."""

from __future__ import annotations

import re

from pydantic import Field, SecretStr, field_validator, model_validator

from models.base import StrictModel
from models.deploy import FIX_SEPARATOR


class SchemaRegistryConfig(StrictModel):
    """A Confluent-compatible schema registry (Confluent's, Apicurio's `/apis/ccompat/v7`, ...):
    `format: debezium-avro` fetches each writer schema from it by the id in the message.

    Credentials never go in YAML as text: `basic_auth` (`user:password`) or `bearer_token` take
    `${VAR}`, or the environment variables named by `basic_auth_env` / `bearer_token_env` hold
    them (by default LAKE_SCHEMA_REGISTRY_BASIC_AUTH / LAKE_SCHEMA_REGISTRY_BEARER_TOKEN, used when
    set). They are sent to the registry only, never logged or stored.
    """

    url: str = Field(min_length=1, description="The registry's base URL: Confluent `http://host:8081`, Apicurio "
                     "`http://host:8080/apis/ccompat/v7`.")
    basic_auth: SecretStr | None = Field(default=None, description="`user:password` as `${VAR}`; never the text itself.")
    bearer_token: SecretStr | None = Field(default=None, description="A bearer token as `${VAR}`; never the text itself.")
    basic_auth_env: str = Field(default="LAKE_SCHEMA_REGISTRY_BASIC_AUTH", description="The environment variable holding "
                                "`user:password`, used when set.")
    bearer_token_env: str = Field(default="LAKE_SCHEMA_REGISTRY_BEARER_TOKEN", description="The environment variable holding "
                                  "a bearer token, used when set.")
    # Each request to the registry; a registry that does not answer in time fails the run (never
    # a stalled stream), before any table of the micro-batch commits.
    timeout_seconds: float = Field(default=10.0, gt=0, le=300, description="How long one request to the registry may take; "
                                   "then the run stops before any table commits.")

    @field_validator("url")
    @classmethod
    def _url(cls, v: str) -> str:
        m = re.fullmatch(r"(https?)://([^/?#]+)(/[^?#]*)?", v.strip())
        if not m:
            raise ValueError(f"{v!r} is not an http(s) URL{FIX_SEPARATOR}give the registry's base URL, e.g. "
                             "`http://registry:8081` (Apicurio: `http://registry:8080/apis/ccompat/v7`)")
        if "@" in m.group(2):
            raise ValueError(f"the URL holds credentials{FIX_SEPARATOR}remove `user:password@` from it and set "
                             "`basic_auth: ${VAR}` (or the environment variable LAKE_SCHEMA_REGISTRY_BASIC_AUTH)")
        return v.strip().rstrip("/")

    @field_validator("basic_auth_env", "bearer_token_env")
    @classmethod
    def _env_name(cls, v: str) -> str:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", v):
            raise ValueError(f"{v!r} is not an environment variable name{FIX_SEPARATOR}give the variable's name, "
                             "e.g. `REGISTRY_AUTH`, not its value")
        return v

    @model_validator(mode="after")
    def _one_auth(self) -> SchemaRegistryConfig:
        if self.basic_auth is not None and self.bearer_token is not None:
            raise ValueError(f"both `basic_auth` and `bearer_token` are set{FIX_SEPARATOR}keep the one the registry takes")
        if self.basic_auth is not None and ":" not in self.basic_auth.get_secret_value():
            raise ValueError(f"`basic_auth` is not `user:password`{FIX_SEPARATOR}set the variable it names to `user:password`")
        return self
