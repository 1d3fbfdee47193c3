"""The parsed catalog files, kept as JSON in the user's cache: YAML is parsed only when a file changed.

Every catalog file is read here, bounded (``advisor.safe_read``): too large, not UTF-8, too
deeply nested or with aliases, it is a :class:`CatalogError` naming the file (and the line).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from advisor.errors import CatalogError, InputError
from advisor.safe_read import MAX_YAML_BYTES, decode


def parse_catalog_file(path: Path, text: str) -> object:
    """Bounded nesting, no aliases (advisor/safe_read.py); a refusal names the file and the line."""
    from advisor.safe_read import parse_yaml  # imports yaml: only on a cache miss (start-up time)

    try:
        return parse_yaml(text, path, "catalog file")
    except InputError as exc:
        where, _, reason = str(exc).removeprefix(f"{path}: ").partition(": ")
        if not where.startswith("line "):
            where, reason = "(file)", str(exc).removeprefix(f"{path}: ")
        raise CatalogError(path, where, reason) from None


def cache_path(root: Path) -> Path:
    """Where the parsed form of the catalog in ``root`` is kept: the user's cache directory
    (``$XDG_CACHE_HOME``, else ``~/.cache``), one file per catalog directory — never inside the
    catalog itself, which may be a read-only install or a team's own folder."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    name = hashlib.blake2b(str(root.resolve()).encode(), digest_size=8).hexdigest()
    return base / "continuity-advisor" / f"catalog-{name}.json"


class _ParsedCache:
    """Parsed YAML of one catalog directory, kept as JSON in the user's cache and keyed by each file's content hash.

    Parsing the catalog's YAML dominates `advisor recommend`'s start-up; JSON loads ~20x faster.
    A stale entry can't be used (the hash changes with the content); a directory that can't be
    written just goes uncached. Validation always runs on the data, cached or not.
    """

    def __init__(self, root: Path) -> None:
        self.path = cache_path(root)
        self.dirty = False
        try:
            loaded = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError):  # a damaged cache is only a slower start
            loaded = {}
        self.entries: dict[str, Any] = loaded if isinstance(loaded, dict) else {}

    def read(self, path: Path) -> object:
        try:
            with path.open("rb") as fh:
                raw = fh.read(MAX_YAML_BYTES + 1)
        except OSError as exc:
            raise CatalogError(path, "(file)", f"cannot be read: {exc.strerror or exc}") from None
        if len(raw) > MAX_YAML_BYTES:
            raise CatalogError(path, "(file)", f"too large (over {MAX_YAML_BYTES >> 20} MiB) for a catalog file")
        try:
            text = decode(raw, path, "catalog file")
        except InputError as exc:
            raise CatalogError(path, "(file)", str(exc).removeprefix(f"{path}: ")) from None
        key = hashlib.blake2b(raw, digest_size=16).hexdigest()
        hit = self.entries.get(path.name)
        if isinstance(hit, list) and len(hit) == 2 and hit[0] == key:
            return hit[1]
        data = parse_catalog_file(path, text)
        try:
            if json.loads(json.dumps(data)) == data:  # only what JSON keeps exactly (str keys, no dates)
                self.entries[path.name] = [key, data]
                self.dirty = True
        except (TypeError, ValueError):
            pass
        return data

    def save(self) -> None:
        if not self.dirty:
            return
        tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
        try:
            tmp.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_text(json.dumps(self.entries, ensure_ascii=False), encoding="utf-8")
            os.replace(tmp, self.path)
        except OSError:
            tmp.unlink(missing_ok=True)


_caches: dict[Path, _ParsedCache] = {}


def read_yaml(path: Path) -> object:
    """One catalog file's data: from the cache while its content is unchanged, else parsed (and kept)."""
    root = path.parent.resolve()
    cache = _caches.get(root)
    if cache is None:
        cache = _caches[root] = _ParsedCache(root)
    return cache.read(path)


def save_cache(root: Path) -> None:
    """Write what was parsed under ``root`` to the cache, once: called for a catalog that validated."""
    cache = _caches.pop(root.resolve(), None)
    if cache is not None:
        cache.save()
