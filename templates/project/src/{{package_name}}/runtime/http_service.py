"""A real external service over HTTP, with the simulated service's interface.

An example adapter to start from when the job's external call goes to a real
HTTP API instead of ``external.db`` (docs: "Wiring a real service" in the README).
It has the three methods the strategies use through effects.py::

    apply(record_id, step, key, payload) -> dict   # one call
    lookup(reference) -> dict | None                # queryable kind only
    close()

and maps each kind of service onto HTTP the usual way:

* ``idempotent``: ``POST {base}/effects`` with an ``Idempotency-Key: <key>``
  header; the server applies a key once and answers a repeat from its memory
  (``201`` applied, ``200`` with ``"status": "duplicate"`` for a repeat).
* ``queryable``: ``POST {base}/effects`` with ``"reference": <key>`` in the body
  (your own id for the call: an order number, a ``client_reference_id``), and
  ``GET {base}/effects/<reference>`` (``200`` found, ``404`` never got through).
* ``plain``: ``POST {base}/effects``, nothing else: no key, no lookup.

Errors: a refused connection, ``429`` and ``5xx`` mean the server did NOT apply the
call (TransientError: the strategy's retry policy sends it again, as a fresh call).
A timeout after the request was sent means nobody knows: :class:`effects.InDoubt`,
which effects.py treats like a crash right after the call (looked up, re-sent with
the key, or held in doubt, by kind). A ``4xx`` is the record's fault (BadRecord).

Only the standard library (``urllib``); with httpx the same is
``httpx.post(url, json=body, headers={"Idempotency-Key": key}, timeout=...)``.
Use it by returning it from ``Context.external()`` (strategy.py), e.g. when an
environment variable names the base URL.
"""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from .effects import InDoubt
from .errors import BadRecord, TransientError
from .external import KINDS, NoLookup


class HttpService:
    def __init__(self, base_url: str, kind: str, *, timeout_s: float = 10.0) -> None:
        if kind not in KINDS:
            raise ValueError(f"unknown service kind {kind!r}; valid: {', '.join(KINDS)}")
        self.base_url, self.kind, self.timeout_s = base_url.rstrip("/"), kind, timeout_s

    def apply(self, record_id: str, step: str, key: str | None, payload: Any = None) -> dict[str, Any]:
        body: dict[str, Any] = {"record_id": record_id, "step": step, "payload": payload}
        headers = {"Content-Type": "application/json"}
        if self.kind == "idempotent" and key is not None:
            headers["Idempotency-Key"] = key
        elif self.kind == "queryable" and key is not None:
            body["reference"] = key
        status, answer = self._request("POST", "/effects", body, headers)
        if status not in (200, 201):
            raise BadRecord(f"the service refused {record_id} {step!r}: HTTP {status} {answer}")
        return {"status": answer.get("status", "applied"), "record_id": record_id, "step": step,
                "idempotency_key": key if self.kind != "plain" else None}

    def lookup(self, reference: str) -> dict[str, Any] | None:
        if self.kind != "queryable":
            raise NoLookup(f"the service is {self.kind}: it cannot be asked whether a call got through (lookup)")
        status, answer = self._request("GET", "/effects/" + urllib.parse.quote(reference, safe=""), None, {})
        if status == 404:
            return None
        if status != 200:
            raise TransientError(f"lookup of {reference}: HTTP {status}")
        return {"status": "found", "record_id": answer.get("record_id"), "step": answer.get("step", ""),
                "idempotency_key": reference}

    def close(self) -> None:
        """Nothing to release: urllib opens a connection per request."""

    def _request(self, method: str, path: str, body: Any, headers: dict[str, str]) -> tuple[int, dict[str, Any]]:
        data = json.dumps(body).encode("utf-8") if body is not None else None
        request = urllib.request.Request(self.base_url + path, data=data, headers=headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                return response.status, _json(response.read())
        except urllib.error.HTTPError as exc:
            if exc.code == 429 or exc.code >= 500:  # refused before applying: safe to send again
                raise TransientError(f"{method} {path}: HTTP {exc.code}") from None
            return exc.code, _json(exc.read())
        except (TimeoutError, socket.timeout) as exc:
            if method == "GET":
                raise TransientError(f"{method} {path}: timed out") from None
            # The request went out; whether it was applied is unknown.
            raise InDoubt(f"{method} {path}: no answer within {self.timeout_s} s ({exc})") from None
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, (TimeoutError, socket.timeout)) and method != "GET":
                raise InDoubt(f"{method} {path}: no answer within {self.timeout_s} s") from None
            raise TransientError(f"{method} {path}: {exc.reason}") from None  # not connected: not applied


def _json(raw: bytes) -> dict[str, Any]:
    try:
        value = json.loads(raw or b"{}")
    except ValueError:
        return {"body": raw[:200].decode("utf-8", "replace")}
    return value if isinstance(value, dict) else {"body": value}
