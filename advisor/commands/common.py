"""What every command shares: the catalog (``--catalog``), the answers (``--answers``, ``--set``)
and the way text and JSON are printed."""

from __future__ import annotations

import argparse
import json
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from advisor.model.catalog import Catalog


def catalog_for(args: argparse.Namespace) -> Catalog:
    """The bundled catalog, or the one the global ``--catalog DIR`` names."""
    from advisor.model.loader import load_catalog

    return load_catalog(Path(args.catalog) if args.catalog else None)


def answers_for(args: argparse.Namespace, catalog: Catalog) -> dict[str, str]:
    """Answers from --answers FILE, then --set flags on top (flags win; `--set ID=unknown` clears ID)."""
    from advisor.model.answers import apply_set_flags, load_answers_file

    answers = load_answers_file(Path(args.answers), catalog) if args.answers else {}
    return apply_set_flags(answers, args.set or [], catalog)


def print_json(data: object) -> None:
    print(json.dumps(data, indent=2, ensure_ascii=False))


def wrap(text: str, indent: str = "    ") -> str:
    return textwrap.fill(text, width=100, initial_indent=indent, subsequent_indent=indent)


def bullet(text: str, indent: str = "  ", mark: str = "- ") -> str:
    """A list item whose continuation lines align under its text."""
    return textwrap.fill(text, width=100, initial_indent=indent + mark, subsequent_indent=indent + " " * len(mark))
