"""TLS and bearer-token authentication for what mastwatch serves (OTLP gRPC and HTTP, /metrics), configured as the
OpenTelemetry Collector configures its servers: `tls` as `configtls` (cert_file, key_file, client_ca_file for
client certificates, min_version), `auth` as the `bearertokenauth` extension (a static token, or a file holding it,
read again when it changes)."""

from __future__ import annotations

import hmac
import os
import ssl
import threading
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator

SCHEME = "Bearer"  # as clients send it: `Authorization: Bearer <token>` (the scheme in any case)


class TLSConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    cert_file: str = Field(description="the server's certificate (PEM), with its chain")
    key_file: str = Field(description="its private key (PEM)")
    client_ca_file: str | None = Field(None, description="CA certificates (PEM) client certificates must chain "
                                       "to; set, a client without one is refused (mutual TLS)")
    min_version: Literal["1.2", "1.3"] = "1.2"

    @model_validator(mode="after")
    def _files(self) -> TLSConfig:
        for name in ("cert_file", "key_file", "client_ca_file"):
            path = getattr(self, name)
            if path is not None and not os.path.isfile(path):
                raise ValueError(f"tls.{name}: no file {path}")
        return self

    def read(self, name: str) -> bytes:
        with open(getattr(self, name), "rb") as f:
            return f.read()

    def ssl_context(self) -> ssl.SSLContext:
        """A server context for HTTP (aiohttp)."""
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.minimum_version = ssl.TLSVersion.TLSv1_3 if self.min_version == "1.3" else ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(self.cert_file, self.key_file)
        if self.client_ca_file:
            context.load_verify_locations(self.client_ca_file)
            context.verify_mode = ssl.CERT_REQUIRED
        return context


class AuthConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    token: SecretStr | None = Field(None, description="the token clients send as `Authorization: Bearer <token>`")
    filename: str | None = Field(None, description="a file holding the token instead (read again when it changes)")

    @model_validator(mode="after")
    def _one(self) -> AuthConfig:
        if (self.token is None) == (self.filename is None):
            raise ValueError("auth: set one of token or filename")
        if self.filename is not None and not os.path.isfile(self.filename):
            raise ValueError(f"auth.filename: no file {self.filename}")
        return self


class BearerCheck:
    """Whether a request's `Authorization` value carries the configured token (compared in constant time)."""

    def __init__(self, config: AuthConfig) -> None:
        self.config = config
        self._lock = threading.Lock()
        self._mtime = -1.0
        self._expected = b""
        if config.token is not None:
            self._expected = config.token.get_secret_value().encode()

    def _current(self) -> bytes:
        filename = self.config.filename
        if filename is None:
            return self._expected
        try:
            mtime = os.stat(filename).st_mtime
        except OSError:
            return self._expected  # the last token read stays in force while the file is being replaced
        with self._lock:
            if mtime != self._mtime:
                with open(filename, encoding="utf-8") as f:
                    self._expected = f.read().strip().encode()
                self._mtime = mtime
            return self._expected

    def allows(self, authorization: str | None) -> bool:
        if not authorization:
            return False
        scheme, _, token = authorization.strip().partition(" ")
        expected = self._current()
        return scheme.lower() == SCHEME.lower() and bool(expected) and hmac.compare_digest(token.strip().encode(),
                                                                                           expected)
