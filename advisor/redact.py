"""Passwords never reach a screen, a log or a file: one redaction used wherever text leaves the advisor.

``postgresql://bob:s3cret@db/app`` → ``postgresql://bob:***@db/app`` (any ``scheme://user:password@``,
so ``amqp://`` and ``amqps://`` too) and ``password=s3cret`` (a key/value DSN, a URL query) →
``password=***``. Every :class:`~advisor.errors.AdvisorError` message passes through it, and so do
probe reports and decision records, which quote what a team typed.
"""

from __future__ import annotations

import re
from typing import Any

_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^\s:/@'\"]*:)[^\s/'\"]*@")
_KEYVALUE = re.compile(r"(?i)\b(password|passwd|pwd)(\s*=\s*)('[^']*'|\"[^\"]*\"|[^\s&;,'\"]*)")


def redact(text: str) -> str:
    """``text`` with the password of every URL or ``password=`` setting replaced by ``***``."""
    if "://" not in text and "=" not in text:
        return text
    text = _USERINFO.sub(r"\1***@", text)
    return _KEYVALUE.sub(r"\1\2***", text)


def redact_all(data: Any) -> Any:
    """The same for every text inside JSON-like data (reports, events)."""
    if isinstance(data, str):
        return redact(data)
    if isinstance(data, dict):
        return {k: redact_all(v) for k, v in data.items()}
    if isinstance(data, list):
        return [redact_all(v) for v in data]
    return data
