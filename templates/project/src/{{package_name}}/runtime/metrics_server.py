"""The metrics endpoint: ``/metrics`` (Prometheus' text format) and ``/healthz`` (liveness).

prometheus_client's own ``start_http_server`` answers every path with the metrics; a
liveness probe needs an answer of its own, so this is the standard library's threading
HTTP server with two paths, in a daemon thread (it never holds ``run`` up at exit).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from .errors import JobError


def serve(registry: Any, healthy: Callable[[], bool], address: str, port: int) -> str:
    """Serve in the background; the ``host:port`` bound (port 0: one the system chose)."""
    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (the standard library's name)
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                self._answer(200, generate_latest(registry), CONTENT_TYPE_LATEST)
            elif path == "/healthz":
                ok = healthy()
                self._answer(200 if ok else 503, b"ok\n" if ok else b"no progress within the lease\n")
            else:
                self._answer(404, b"/metrics or /healthz\n")

        def _answer(self, status: int, body: bytes, content_type: str = "text/plain; charset=utf-8") -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            return None  # stderr is the job's log: a line per scrape would drown it

    try:
        server = ThreadingHTTPServer((address, port), Handler)
    except OSError as exc:
        raise JobError(f"cannot serve metrics on {address}:{port}: {exc.strerror or exc} "
                       "(another process on that port? choose another --metrics-port)") from None
    except (ValueError, OverflowError) as exc:  # not an address, or a port out of range
        raise JobError(f"--metrics-address {address!r}: {exc}") from None
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="metrics-server", daemon=True).start()
    host, bound = server.server_address[:2]
    return f"{'[' + str(host) + ']' if ':' in str(host) else host}:{bound}"
