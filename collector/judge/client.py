"""A client for any OpenAI-compatible chat completions endpoint (stdlib HTTP, no SDK).

429 and 5xx answers, timeouts and connection failures are retried with exponential backoff, or after the
server's Retry-After when it gives one; a wait longer than `max_retry_wait` ends the attempt instead.
"""

from __future__ import annotations

import http.client
import json
import random
import threading
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from time import time

# outcomes of a call, as counted in mastwatch_judge_requests_total (ok and rejected are the judge's)
RATE_LIMITED = "rate_limited"
HTTP_ERROR = "http_error"
UNREACHABLE = "unreachable"
BAD_RESPONSE = "bad_response"
STOPPED = "stopped"


@dataclass(frozen=True, slots=True)
class ChatResult:
    content: str
    input_tokens: int | None  # from the response's usage, None when it has none
    output_tokens: int | None


class CallFailed(Exception):
    def __init__(self, outcome: str, detail: str) -> None:
        super().__init__(f"{outcome}: {detail}")
        self.outcome = outcome


def retry_after(value: str | None) -> float | None:
    """Seconds to wait from a Retry-After header: delta-seconds or an HTTP date."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        return max(parsedate_to_datetime(value).timestamp() - time(), 0.0)
    except (TypeError, ValueError):
        return None


def _usage(doc: dict, key: str) -> int | None:
    usage = doc.get("usage")
    value = usage.get(key) if isinstance(usage, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


class ChatClient:
    def __init__(self, base_url: str, model: str, api_key: str | None, timeout: float, max_retries: int,
                 backoff: float, max_retry_wait: float, max_output_tokens: int, json_mode: bool,
                 stop: threading.Event | None = None, on_retry: Callable[[], None] | None = None) -> None:
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.headers = {"Content-Type": "application/json"}
        if api_key:
            self.headers["Authorization"] = f"Bearer {api_key}"
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff = backoff
        self.max_retry_wait = max_retry_wait
        self.max_output_tokens = max_output_tokens
        self.json_mode = json_mode
        self.stop = stop or threading.Event()
        self.on_retry = on_retry or (lambda: None)

    def body(self, messages: list[dict[str, str]]) -> bytes:
        doc: dict = {"model": self.model, "messages": messages, "temperature": 0,
                     "max_tokens": self.max_output_tokens}
        if self.json_mode:
            doc["response_format"] = {"type": "json_object"}
        return json.dumps(doc, ensure_ascii=False).encode()

    def complete(self, messages: list[dict[str, str]]) -> ChatResult:
        body = self.body(messages)
        attempt = 0
        while True:
            try:
                return self._send(body)
            except _Retryable as e:
                wait = e.wait if e.wait is not None else self.backoff * 2 ** attempt * (0.5 + random.random() / 2)
                if attempt >= self.max_retries or wait > self.max_retry_wait:
                    raise CallFailed(e.outcome, str(e)) from None
            attempt += 1
            self.on_retry()
            if self.stop.wait(wait):
                raise CallFailed(STOPPED, "shutting down")

    def _send(self, body: bytes) -> ChatResult:
        request = urllib.request.Request(self.url, data=body, headers=self.headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                raw = response.read()
        except urllib.error.HTTPError as e:
            detail = f"HTTP {e.code} from {self.url}"
            if e.code == 429:
                raise _Retryable(RATE_LIMITED, detail, retry_after(e.headers.get("Retry-After"))) from None
            if e.code >= 500:
                raise _Retryable(HTTP_ERROR, detail, retry_after(e.headers.get("Retry-After"))) from None
            raise CallFailed(HTTP_ERROR, detail) from None
        except (urllib.error.URLError, http.client.HTTPException, TimeoutError, ConnectionError) as e:
            raise _Retryable(UNREACHABLE, f"{self.url}: {getattr(e, 'reason', e)}", None) from None
        try:
            doc = json.loads(raw)
            content = doc["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError):
            raise CallFailed(BAD_RESPONSE, "not a chat completion") from None
        if not isinstance(content, str):
            raise CallFailed(BAD_RESPONSE, "the completion has no text content")
        return ChatResult(content, _usage(doc, "prompt_tokens"), _usage(doc, "completion_tokens"))


class _Retryable(Exception):
    def __init__(self, outcome: str, detail: str, wait: float | None) -> None:
        super().__init__(detail)
        self.outcome = outcome
        self.wait = wait
