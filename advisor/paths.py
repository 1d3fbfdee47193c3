"""Where the catalog and the template live: inside the wheel, or at the repository root."""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


def data_path(name: str) -> Path:
    """Return ``strategies`` or ``templates``.

    A wheel carries them under ``advisor/_data/`` (see pyproject's force-include);
    a source checkout or editable install finds them beside the package.
    """
    bundled = _PACKAGE / "_data" / name
    if bundled.is_dir():
        return bundled
    return _PACKAGE.parent / name


def strategies_dir() -> Path:
    return data_path("strategies")


def templates_dir() -> Path:
    return data_path("templates")
