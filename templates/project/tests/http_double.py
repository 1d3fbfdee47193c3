"""A test double for a real HTTP service: keep it, and point it at your own API's shape.

A tiny server (``http.server``, on 127.0.0.1, an ephemeral port, in a thread) that
behaves like one of the three kinds of service (``idempotent``, ``queryable``,
``plain``), keeps what it applied in memory, and can be told to misbehave:

* ``fail_next = n``: answer the next n calls with 503 before applying anything;
* ``stall_next = n``: apply the next n calls, then answer only after ``stall_s``
  (longer than the client's timeout: the client cannot know the call got through).

Use it as a context manager (the server is stopped and its port closed on exit)::

    with HttpDouble("queryable") as double:
        service = HttpService(double.url, "queryable", timeout_s=0.5)
        ...
        assert double.applied == [...]
"""

from __future__ import annotations

import json
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class HttpDouble:
    def __init__(self, kind: str, *, stall_s: float = 1.0) -> None:
        assert kind in ("idempotent", "queryable", "plain"), kind
        self.kind, self.stall_s = kind, stall_s
        #: Every applied effect, in order: {"record_id", "step", "payload", "key", "reference"}.
        self.applied: list[dict[str, Any]] = []
        self.requests = 0
        self.fail_next = self.stall_next = 0
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="http-double", daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> HttpDouble:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    # ---- what the server does
    def post(self, body: dict[str, Any], key: str | None) -> tuple[int, dict[str, Any], float]:
        with self._lock:
            self.requests += 1
            if self.fail_next > 0:
                self.fail_next -= 1
                return 503, {"error": "unavailable (simulated)"}, 0.0
            if self.kind == "idempotent":
                if not key:
                    return 400, {"error": "Idempotency-Key header required"}, 0.0
                if any(e["key"] == key for e in self.applied):
                    return 200, {"status": "duplicate"}, 0.0  # answered from memory, not applied again
            effect = {"record_id": body.get("record_id"), "step": body.get("step", ""),
                      "payload": body.get("payload"), "key": key if self.kind == "idempotent" else None,
                      "reference": body.get("reference") if self.kind == "queryable" else None}
            self.applied.append(effect)
            stall = 0.0
            if self.stall_next > 0:
                self.stall_next -= 1
                stall = self.stall_s
            return 201, {"status": "applied"}, stall

    def get(self, reference: str) -> tuple[int, dict[str, Any]]:
        if self.kind != "queryable":
            return 405, {"error": f"a {self.kind} service has no lookup"}
        with self._lock:
            found = next((e for e in self.applied if e["reference"] == reference), None)
        return (200, found) if found else (404, {"error": "no such reference"})

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        double = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                if self.path != "/effects":
                    return self._answer(404, {"error": "not found"})
                length = int(self.headers.get("Content-Length") or 0)
                try:
                    body = json.loads(self.rfile.read(length) or b"{}")
                except ValueError:
                    return self._answer(400, {"error": "not JSON"})
                status, answer, stall = double.post(body, self.headers.get("Idempotency-Key"))
                if stall:
                    time.sleep(stall)  # applied, but the client gives up waiting
                self._answer(status, answer)

            def do_GET(self) -> None:  # noqa: N802
                if not self.path.startswith("/effects/"):
                    return self._answer(404, {"error": "not found"})
                self._answer(*double.get(urllib.parse.unquote(self.path[len("/effects/"):])))

            def _answer(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode("utf-8")
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client timed out and left

            def log_message(self, *args: Any) -> None:
                pass  # quiet tests

        return Handler
