"""Webhooks: a JSON POST to each configured endpoint when a run shows a selected failure mode (a loop, the turn
limit) or its repeated steps' spend or time passes a threshold, within moments of the span that shows it, so that an
agent's runtime can stop the run. Each endpoint has its own bounded queue and sender thread: a slow or failing endpoint
delays only its own deliveries, and never the processor (a full queue drops, counted). Bodies are signed with
HMAC-SHA256 when a secret is set (`X-Mastwatch-Signature: sha256=<hex>`, over the raw body). Each sender keeps its
HTTP/1.1 connection open between events (a new connection per event costs more than the event), except through a
proxy named in the environment (`https_proxy`, `http_proxy`, `no_proxy`), which urllib reaches anew each time."""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import http.client
import json
import logging
import queue
import ssl
import threading
import time
import urllib.error
import urllib.request
from collections import OrderedDict
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from prometheus_client import CollectorRegistry, Counter
from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from mastwatch.collector.durations import Duration
from mastwatch.collector.model.modes import MODES
from mastwatch.collector.model.published import LiveFindings
from mastwatch.collector.threads import name_os_thread

log = logging.getLogger(__name__)
SIGNATURE_HEADER = "X-Mastwatch-Signature"
SENT_MEMORY = 100_000  # (trace, event) pairs remembered so each is sent once


class WebhookConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    url: str = Field(description="where the JSON is POSTed (http or https)")
    name: str = Field("", description="the endpoint's name in metrics and logs (default: the URL's host)")
    modes: list[str] = Field(["FM-1.3", "FM-1.5"], description="failure modes that fire it (`*`: every mode)")
    wasted_cost_usd: float | None = Field(None, gt=0, description="fire once when a run's repeated-step spend "
                                          "passes this many USD")
    wasted_seconds: Duration | None = Field(None, gt=0, description="fire once when the time of a run's repeated "
                                            "steps (with the model calls that produced them) passes this")
    secret: SecretStr | None = Field(None, description="HMAC-SHA256 key signing each body")
    secret_file: str | None = Field(None, description="read the key from this file instead")
    timeout: Duration = Field(5.0, gt=0, description="per attempt")
    max_attempts: int = Field(5, ge=1, description="attempts per event (5xx, 408, 429 and network errors retry)")
    backoff: Duration = Field(0.5, gt=0, description="wait before the first retry; doubled each time, up to 30s")
    queue_size: int = Field(1000, ge=1, description="events waiting per endpoint; past it new ones are dropped")

    @field_validator("url")
    @classmethod
    def _http(cls, value: str) -> str:
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError("must be an http(s) URL, e.g. https://agents.example.com/hooks/mastwatch")
        return value

    @field_validator("modes")
    @classmethod
    def _codes(cls, value: list[str]) -> list[str]:
        unknown = [code for code in value if code != "*" and code not in MODES]
        if unknown:
            raise ValueError(f"not MAST failure mode codes: {', '.join(unknown)} (known: {', '.join(MODES)}, or *)")
        return value

    @model_validator(mode="after")
    def _one_secret(self) -> WebhookConfig:
        if self.secret is not None and self.secret_file is not None:
            raise ValueError("set secret or secret_file, not both")
        if not self.name:
            self.name = urlsplit(self.url).netloc
        return self

    def key(self) -> bytes | None:
        if self.secret_file is not None:
            return Path(self.secret_file).read_bytes().strip()
        return self.secret.get_secret_value().encode() if self.secret is not None else None


def _proxied(url: str) -> bool:
    """Whether the environment routes `url` through a proxy (as urllib reads it)."""
    parts = urlsplit(url)
    proxies = urllib.request.getproxies()
    return parts.scheme in proxies and not urllib.request.proxy_bypass(parts.hostname or "")


def sign(key: bytes, body: bytes) -> str:
    return "sha256=" + hmac.new(key, body, hashlib.sha256).hexdigest()


class WebhookMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.deliveries = Counter("mastwatch_webhook_deliveries", "Webhook events by outcome: delivered, failed "
                                  "(refused, or attempts exhausted), dropped (queue full), stopped (at shutdown)",
                                  ["webhook", "outcome"], registry=registry)
        self.retries = Counter("mastwatch_webhook_retries", "Webhook attempts sent again", ["webhook"],
                               registry=registry)


class _Endpoint:
    """One endpoint's queue and sender thread."""

    def __init__(self, config: WebhookConfig, metrics: WebhookMetrics) -> None:
        self.config, self.metrics = config, metrics
        self.key = config.key()
        self.queue: queue.Queue[bytes | None] = queue.Queue(config.queue_size)
        self.stopping = threading.Event()
        target = urlsplit(config.url)
        self._https = target.scheme == "https"
        self._host, self._port = target.hostname or "", target.port
        self._path = (target.path or "/") + (f"?{target.query}" if target.query else "")
        self._proxied = _proxied(config.url)
        self._connection: http.client.HTTPConnection | None = None  # kept open between events (the thread's own)
        self.thread = threading.Thread(target=self._run, name=f"mw-webhook-{config.name}", daemon=True)
        self.thread.start()

    def offer(self, body: bytes) -> None:
        try:
            self.queue.put_nowait(body)
        except queue.Full:
            self.metrics.deliveries.labels(self.config.name, "dropped").inc()

    def _run(self) -> None:
        name_os_thread()
        while True:
            body = self.queue.get()
            if body is None:
                self._close()
                return
            self.metrics.deliveries.labels(self.config.name, self._deliver(body)).inc()

    def _deliver(self, body: bytes) -> str:
        config, wait = self.config, self.config.backoff
        headers = {"Content-Type": "application/json", "User-Agent": "mastwatch"}
        if self.key is not None:
            headers[SIGNATURE_HEADER] = sign(self.key, body)
        for attempt in range(config.max_attempts):
            if attempt:
                self.metrics.retries.labels(config.name).inc()
                if self.stopping.wait(wait):
                    return "stopped"
                wait = min(wait * 2, 30.0)
            try:
                status = self._post(body, headers)
            except OSError as e:
                error: str = str(e)
            else:
                if 200 <= status < 300:
                    return "delivered"
                if status < 500 and status not in (408, 429):
                    log.warning("webhook %s refused an event: HTTP %d", config.name, status)
                    return "failed"
                error = f"HTTP {status}"
            log.debug("webhook %s: attempt %d failed (%s)", config.name, attempt + 1, error)
        log.warning("webhook %s: an event was not delivered after %d attempts", config.name, config.max_attempts)
        return "failed"

    def _post(self, body: bytes, headers: dict[str, str]) -> int:
        """POST one event; its HTTP status. On the kept connection: one the endpoint closed while idle is opened
        again at once (that is no failed attempt); any other failure closes it and raises OSError."""
        if self._proxied:
            request = urllib.request.Request(self.config.url, body, headers, method="POST")
            try:
                with urllib.request.urlopen(request, timeout=self.config.timeout) as response:
                    response.read()
                    return int(response.status)
            except urllib.error.HTTPError as e:
                return e.code
        while True:
            connection, reused = self._connection, self._connection is not None
            if connection is None:
                connection = self._connection = self._connect()
            try:
                connection.request("POST", self._path, body, headers)
                response = connection.getresponse()
                response.read()
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError) as e:
                self._close()
                if reused:
                    continue  # closed by the endpoint while idle: the event was not taken
                raise OSError(str(e) or type(e).__name__) from e
            except http.client.HTTPException as e:  # not HTTP in reply: the connection is not reusable
                self._close()
                raise OSError(f"{type(e).__name__}: {e}") from e
            except OSError:
                self._close()
                raise
            if response.will_close:
                self._close()
            return response.status

    def _connect(self) -> http.client.HTTPConnection:
        timeout = self.config.timeout
        if self._https:
            return http.client.HTTPSConnection(self._host, self._port, timeout=timeout,
                                               context=ssl.create_default_context())
        return http.client.HTTPConnection(self._host, self._port, timeout=timeout)

    def _close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def stop(self, timeout: float) -> None:
        self.stopping.set()
        with contextlib.suppress(queue.Full):  # full: the sender ends when the process does
            self.queue.put_nowait(None)
        self.thread.join(timeout)


class WebhookNotifier:
    """Implements the processor's LiveListener: decides which changes are events, and hands each endpoint its
    events. An event is sent once per trace (a mode first shown; a spend or time threshold first passed)."""

    def __init__(self, configs: list[WebhookConfig], registry: CollectorRegistry) -> None:
        self.metrics = WebhookMetrics(registry)
        self.endpoints = [_Endpoint(config, self.metrics) for config in configs]
        self._sent: OrderedDict[tuple[int, bytes, str], None] = OrderedDict()

    def _first(self, index: int, trace_id: bytes, event: str) -> bool:
        key = (index, trace_id, event)
        if key in self._sent:
            return False
        self._sent[key] = None
        if len(self._sent) > SENT_MEMORY:
            self._sent.popitem(last=False)
        return True

    def findings_changed(self, changes: list[LiveFindings]) -> None:
        now = time.time()
        for index, endpoint in enumerate(self.endpoints):
            config = endpoint.config
            every = "*" in config.modes
            for change in changes:
                for finding in change.findings:
                    if (every or finding.code in config.modes) and self._first(index, change.trace_id, finding.code):
                        endpoint.offer(_body("failure_mode", change, now, finding))
                threshold = config.wasted_cost_usd
                if threshold is not None and change.wasted_cost >= threshold and \
                        self._first(index, change.trace_id, "wasted_cost"):
                    endpoint.offer(_body("wasted_cost", change, now, None, {"threshold_usd": threshold}))
                took = config.wasted_seconds
                if took is not None and change.wasted_seconds >= took and \
                        self._first(index, change.trace_id, "wasted_time"):
                    endpoint.offer(_body("wasted_time", change, now, None, {"threshold_seconds": took}))

    def shutdown(self, timeout: float = 5.0) -> None:
        for endpoint in self.endpoints:
            endpoint.stop(timeout)


def _body(event: str, change: LiveFindings, now: float, finding: Any = None,
          threshold: dict[str, float] | None = None) -> bytes:
    body: dict[str, Any] = {"event": event, "trace_id": change.trace_id.hex(), "service": change.service,
                            "agent": change.agent, **change.release(), "run_ended": change.final,
                            "wasted_tokens": change.wasted_tokens, "wasted_cost_usd": round(change.wasted_cost, 6),
                            "wasted_seconds": round(change.wasted_seconds, 6), "time": now}
    if finding is not None:
        mode = MODES[finding.code]
        body.update({"failure_mode": finding.code, "name": mode.name, "category": mode.category,
                     "confidence": finding.confidence, "evidence": [s.hex() for s in finding.evidence],
                     "reason": finding.reason, "basis": finding.basis})
    if threshold is not None:
        body.update(threshold)
    return json.dumps(body, separators=(",", ":")).encode()
