"""A local OpenAI-compatible chat endpoint (POST /v1/chat/completions) answering from a script: a queue of
replies, then a default. No model is reachable from the test machines; this stands in for one."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

SPAN_ID = re.compile(r"^\[([0-9a-f]{16})\]", re.M)
ASKED = re.compile(r"^Assess these modes: (.*)\.$", re.M)


@dataclass
class Reply:
    content: str | None = None  # the completion's text (None: the default answer)
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    body: bytes | None = None  # raw body instead of a chat completion
    usage: tuple[int, int] | None = (1200, 80)
    gate: threading.Event | None = None  # answer only once it is set


def user_message(request: dict) -> str:
    return next(m["content"] for m in request["messages"] if m["role"] == "user")


def asked(request: dict) -> list[str]:
    return ASKED.search(user_message(request)).group(1).split(", ")


def span_ids(request: dict) -> list[str]:
    return SPAN_ID.findall(user_message(request))


def answer(request: dict, yes: dict[str, str] | None = None) -> str:
    """A well-formed answer: yes (evidence: the last step) for the modes in `yes`, no for the others."""
    yes = yes or {}
    last = span_ids(request)[-1]
    return json.dumps({"modes": {code: {"answer": "yes", "confidence": 0.8, "evidence": [last], "reason": yes[code]}
                                 if code in yes else {"answer": "no", "confidence": 0.9, "evidence": [],
                                                      "reason": "not shown"} for code in asked(request)}})


class ChatServer:
    def __init__(self, default: Callable[[dict], Reply] | None = None) -> None:
        self.script: list[Reply] = []
        self.default = default or (lambda request: Reply(answer(request)))
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.in_flight = 0
        self._lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with owner._lock:
                    owner.requests.append(request)
                    owner.headers.append(dict(self.headers))
                    reply = owner.script.pop(0) if owner.script else owner.default(request)
                    owner.in_flight += 1
                try:
                    if self.path != "/v1/chat/completions":
                        reply = Reply(status=404, body=b"{}")
                    time.sleep(reply.delay)
                    if reply.gate is not None:
                        reply.gate.wait(30)
                    body = reply.body
                    if body is None and reply.status == 200:
                        doc: dict[str, Any] = {"id": "chatcmpl-test", "object": "chat.completion",
                                               "model": request.get("model"), "choices": [{
                                                   "index": 0, "finish_reason": "stop", "message": {
                                                       "role": "assistant",
                                                       "content": reply.content if reply.content is not None
                                                       else answer(request)}}]}
                        if reply.usage:
                            doc["usage"] = {"prompt_tokens": reply.usage[0], "completion_tokens": reply.usage[1],
                                            "total_tokens": sum(reply.usage)}
                        body = json.dumps(doc).encode()
                    body = body or b'{"error": {"message": "scripted failure"}}'
                    self.send_response(reply.status)
                    for name, value in reply.headers.items():
                        self.send_header(name, value)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout)
                    pass
                finally:
                    with owner._lock:
                        owner.in_flight -= 1

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
