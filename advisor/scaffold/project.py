"""A generated project on disk: its package and the answers ``.copier-answers.yml`` recorded."""

from __future__ import annotations

from pathlib import Path

from advisor.errors import AdvisorError, DrillError
from advisor.safe_read import load_yaml

#: Where Copier records a project's answers and its template's source.
ANSWERS_FILE = ".copier-answers.yml"


def package_of(dest: Path) -> str:
    """The Python package a generated project holds under ``src/`` (named by its recorded answers)."""
    answers_file = Path(dest) / ANSWERS_FILE
    if not answers_file.is_file():
        raise DrillError(f"{dest} is not a generated project (no .copier-answers.yml)")
    answers = load_yaml(answers_file, "template answers file") or {}
    package = answers.get("package_name") if isinstance(answers, dict) else None
    if not isinstance(package, str) or not (Path(dest) / "src" / package).is_dir():
        raise DrillError(f"{dest}: .copier-answers.yml names no package under src/")
    return package


def strategy_of(dest: Path) -> str:
    """The strategy a generated project implements ('' when its answers file can't tell)."""
    return recorded_answer(dest, "strategy")


def recorded_answer(dest: Path, key: str) -> str:
    """One answer recorded in a generated project's ``.copier-answers.yml`` ('' when it can't tell)."""
    try:
        answers = load_yaml(Path(dest) / ANSWERS_FILE, "template answers file") or {}
    except AdvisorError:
        return ""
    return str(answers.get(key, "")) if isinstance(answers, dict) else ""

