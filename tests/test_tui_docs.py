"""docs/tui.md stays true: every key a screen shows in its footer, and every command palette
entry, is in the guide."""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

import pytest
from textual.screen import Screen

import advisor.tui.screens
from advisor.tui.app import AdvisorApp
from advisor.tui.commands import ACTIONS

GUIDE = (Path(__file__).parent.parent / "docs" / "tui.md").read_text(encoding="utf-8")
DISPLAY = {"left": "←", "right": "→", "question_mark": "?"}


def screens() -> list[type[Screen]]:  # type: ignore[type-arg]
    found = []
    for info in pkgutil.iter_modules(advisor.tui.screens.__path__):
        module = importlib.import_module(f"advisor.tui.screens.{info.name}")
        found += [v for v in vars(module).values() if isinstance(v, type) and issubclass(v, Screen)
                  and v.__module__ == module.__name__]  # fmt: skip
    return found


@pytest.mark.parametrize("screen", screens(), ids=lambda s: s.__name__)
def test_every_shown_key_of_every_screen_is_in_the_guide(screen: type[Screen]) -> None:  # type: ignore[type-arg]
    for binding in [*screen.BINDINGS, *AdvisorApp.BINDINGS]:
        if isinstance(binding, tuple) or not binding.show:
            continue
        keys = [k.strip() for k in binding.key.split(",")]
        spelled = {f"`{DISPLAY.get(k, k)}`" for k in keys} | {f"`{k}`" for k in keys}
        if binding.key_display:
            spelled |= {f"`{part}`" for part in binding.key_display.split("/")}
        assert any(s in GUIDE for s in spelled), f"{screen.__name__}: key {binding.key!r} ({binding.description})"


def test_every_palette_entry_is_in_the_guide() -> None:
    for name, _, _ in ACTIONS:
        assert f"**{name}**" in GUIDE, name
