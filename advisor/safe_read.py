"""Bounded reading of every file the advisor is handed: answers, template answers, the catalog,
probe reports, drill events, context texts.

A file someone else wrote is input, not code: it is read with a size limit, decoded as strict
UTF-8, and parsed with a nesting limit — YAML with the safe loader and no aliases (``&a``/``*a``,
the "billion laughs"), JSON with a depth check (Python's parser raises RecursionError on deep
input). Every refusal is one :class:`~advisor.errors.InputError` naming the file (and the line,
where there is one), which the CLI prints as one line with exit code 2 and the TUI shows in place.

Limits (stated in the user guide): see the constants below.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from advisor.errors import InputError

MAX_YAML_BYTES = 1 << 20  # 1 MiB: an answers file is a few hundred bytes, a catalog file ~30 KB
MAX_JSON_BYTES = 32 << 20  # 32 MiB: a probe report with thousands of kills stays far below
MAX_TEXT_BYTES = 1 << 20  # 1 MiB: a --context-file (the incident, in the team's words)
MAX_DEPTH = 32  # nesting of mappings/lists: the catalog needs 7, an answers file 3
MAX_NODES = 200_000  # YAML scalars + collections in one file


def read_text(path: Path, what: str, *, limit: int = MAX_TEXT_BYTES) -> str:
    """The file's text: at most ``limit`` bytes, strict UTF-8, no NUL bytes (binary)."""
    path = Path(path)
    try:
        with path.open("rb") as fh:
            raw = fh.read(limit + 1)
    except FileNotFoundError:
        raise InputError(f"{path}: no such {what}.") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory; the {what} must be a file.") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read the {what} ({exc.strerror or exc}).") from None
    if len(raw) > limit:
        raise InputError(f"{path}: too large for the {what} (over {_size(limit)}).")
    return decode(raw, path, what)


def decode(raw: bytes, path: Path | str, what: str) -> str:
    """Strict UTF-8 without NUL bytes, or an InputError naming the line of the first bad byte."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise InputError(f"{path}: line {line}: not UTF-8 text (a binary file, or another encoding"
                         f" — save the {what} as UTF-8).") from None
    if "\x00" in text:
        line = text.count("\n", 0, text.index("\x00")) + 1
        raise InputError(f"{path}: line {line}: a NUL byte: binary data cannot be the {what}.")
    return text


def load_yaml(path: Path, what: str, *, limit: int = MAX_YAML_BYTES) -> Any:
    """Read and parse a YAML file: bounded size, nesting and node count, no aliases."""
    return parse_yaml(read_text(path, what, limit=limit), path, what)


def parse_yaml(text: str, path: Path | str, what: str) -> Any:
    """Parse YAML text with the safe loader after checking its events (no recursion involved)."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    depth = nodes = 0
    try:
        for event in yaml.parse(text, Loader=loader):
            if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
                raise InputError(f"{path}: line {_line(event)}: YAML anchors and aliases (&name, *name) are"
                                 f" not accepted in the {what}; write the value out.")
            if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                depth += 1
                if depth > MAX_DEPTH:
                    raise InputError(f"{path}: line {_line(event)}: nested more than {MAX_DEPTH} levels deep"
                                     f" (the limit for the {what}).")
            elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                depth -= 1
            if isinstance(event, (yaml.ScalarEvent, yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                nodes += 1
                if nodes > MAX_NODES:
                    raise InputError(f"{path}: more than {MAX_NODES} YAML values (the limit for the {what}).")
        return yaml.load(text, Loader=loader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}:" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise InputError(f"{path}:{where} not valid YAML ({problem}) in the {what}.") from None
    except (RecursionError, ValueError, OverflowError) as exc:  # a timestamp or number YAML cannot build
        raise InputError(f"{path}: cannot be read as the {what} ({type(exc).__name__}: {exc}).") from None


def load_json(path: Path, what: str, *, limit: int = MAX_JSON_BYTES) -> Any:
    """Read and parse a JSON file: bounded size and nesting."""
    return parse_json(read_text(path, what, limit=limit), path, what)


def parse_json(text: str, path: Path | str, what: str) -> Any:
    """``json.loads`` that never raises anything but InputError (deep input included)."""
    try:
        data = json.loads(text)
    except RecursionError:
        raise InputError(f"{path}: nested more than {MAX_DEPTH} levels deep (the limit for the {what}).") from None
    except ValueError as exc:
        where = f" line {exc.lineno}:" if isinstance(exc, json.JSONDecodeError) else ""
        reason = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
        raise InputError(f"{path}:{where} not valid JSON ({reason}) in the {what}.") from None
    if depth(data) > MAX_DEPTH:
        raise InputError(f"{path}: nested more than {MAX_DEPTH} levels deep (the limit for the {what}).")
    return data


def depth(data: Any) -> int:
    """Nesting depth of lists and mappings, measured without recursion."""
    deepest, stack = 0, [(data, 0)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            item = list(item.values())
        if isinstance(item, list):
            level += 1
            deepest = max(deepest, level)
            if deepest > MAX_DEPTH:
                return deepest
            stack.extend((child, level) for child in item)
    return deepest


def _line(event: Any) -> int:
    mark = getattr(event, "start_mark", None)
    return mark.line + 1 if mark is not None else 1


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB"
