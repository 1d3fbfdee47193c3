"""Generate a project from the Copier template: render, replace an earlier variant, say what to type next.

:func:`generate` checks the answers against the template first (``advisor.model.template_questions``,
no Copier import), then runs Copier's own ``run_copy`` so the template's validators run again on
the real thing; nothing is left behind on failure. Every user-facing failure is a
:class:`ScaffoldError`.
"""

from __future__ import annotations

import shlex
import shutil
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import yaml

from advisor.errors import DrillError, ScaffoldError
from advisor.model.template_questions import validate_answers
from advisor.paths import templates_dir
from advisor.scaffold.drill import drill_size
from advisor.scaffold.project import ANSWERS_FILE, package_of
from advisor.scaffold.template_release import Release, record_release, template_release


@dataclass(frozen=True)
class Generated:
    dest: Path
    package: str
    files: tuple[str, ...]
    #: With ``force`` over an earlier generated project: the earlier variant's files the new one
    #: does not have, deleted (``checkpoint_file.py`` when a file-variant project becomes a table one).
    removed: tuple[str, ...] = ()
    #: Files in ``dest`` that are not the template's (``data/``, ``.venv/``, the user's own), left alone.
    kept: tuple[str, ...] = ()
    #: The template version recorded for `copier update` (None: the folder, `copier recopy` only).
    release: Release | None = None


def _is_empty_dir(path: Path) -> bool:
    return path.is_dir() and not any(path.iterdir())


def generate(
    strategy: str, dest: Path, answers: Mapping[str, object] | None = None, *, force: bool = False
) -> Generated:
    """Render the template into ``dest`` with Copier (validators run); nothing is left on failure."""
    dest = Path(dest)
    data = validate_answers(strategy, answers or {}, dest)
    if dest.exists() and not dest.is_dir():
        raise ScaffoldError(f"destination {dest} exists and is not a directory")
    existed = dest.exists()
    if existed and not _is_empty_dir(dest) and not force:
        raise ScaffoldError(f"destination {dest} is not empty; choose a new directory or pass --force to overwrite")
    start_empty = not existed or _is_empty_dir(dest)
    # Over an earlier generated project: what its variant wrote, to delete what the new one will not.
    previous = _previous_files(dest) if force and not start_empty else None
    from copier import run_copy  # imported here: CLI start-up time matters

    removed: tuple[str, ...] = ()
    kept: tuple[str, ...] = ()
    try:
        if start_empty:
            run_copy(str(templates_dir()), str(dest), data=dict(data), defaults=True, unsafe=False, quiet=True)
        else:
            # Rendered apart, then copied over: Copier would take the answers recorded in dest as
            # defaults (the earlier variant again); what was asked for here is a fresh project.
            with tempfile.TemporaryDirectory(prefix="advisor-generate-") as tmp:
                fresh = Path(tmp) / dest.resolve().name
                run_copy(str(templates_dir()), str(fresh), data=dict(data), defaults=True, unsafe=False, quiet=True)
                ours = {p.relative_to(fresh).as_posix() for p in fresh.rglob("*") if p.is_file()}
                shutil.copytree(fresh, dest, dirs_exist_ok=True)
            removed = _remove_stale(dest, sorted((previous or set()) - ours))
            kept = _not_the_templates(dest, ours)
    except Exception as exc:  # Copier's errors: validation (ValueError), UserMessageError, ...
        if start_empty:
            _remove_contents(dest, remove_dir=not existed)
        message = " ".join(str(exc).split()) or type(exc).__name__
        raise ScaffoldError(f"cannot generate {strategy} project in {dest}: {message}") from None
    release = template_release(templates_dir())
    record_release(dest, release)
    files = tuple(sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file()))
    return Generated(dest=dest, package=package_of(dest), files=files, removed=removed, kept=kept, release=release)


def _previous_files(dest: Path) -> set[str] | None:
    """The files the template wrote for the project already in ``dest`` (its recorded answers,
    rendered again); None when ``dest`` holds no generated project or its answers no longer render."""
    try:
        recorded = yaml.safe_load((dest / ANSWERS_FILE).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return None
    if not isinstance(recorded, dict) or not isinstance(recorded.get("strategy"), str):
        return None
    answers = {k: v for k, v in recorded.items() if not str(k).startswith("_") and k != "strategy"}
    try:
        return set(preview(recorded["strategy"], answers, dest))
    except (ScaffoldError, DrillError):
        return None


def _remove_stale(dest: Path, stale: list[str]) -> tuple[str, ...]:
    """Delete the earlier variant's files (and their bytecode), then the folders they leave empty."""
    removed = []
    for rel in stale:
        path = dest / rel
        if not path.is_file():
            continue
        path.unlink()
        removed.append(rel)
        for pyc in (path.parent / "__pycache__").glob(f"{path.stem}.*.pyc"):
            pyc.unlink(missing_ok=True)
        folder = path.parent
        while folder != dest and folder.is_dir():
            cache = folder / "__pycache__"
            if cache.is_dir() and not any(cache.iterdir()):
                cache.rmdir()
            if any(folder.iterdir()):
                break
            folder.rmdir()
            folder = folder.parent
    return tuple(removed)


def _not_the_templates(dest: Path, ours: set[str]) -> tuple[str, ...]:
    """Files in ``dest`` the template did not write, a folder holding none of its files as ``folder/``."""
    template_dirs = {str(Path(f).parent) for f in ours}
    shown: set[str] = set()
    for path in dest.rglob("*"):
        rel = path.relative_to(dest).as_posix()
        if not path.is_file() or rel in ours or "__pycache__" in path.parts:
            continue
        top = rel.split("/", 1)[0]
        shown.add(rel if top == rel or top in template_dirs or any(d.startswith(top + "/") for d in template_dirs)
                  else top + "/")
    return tuple(sorted(shown))


def _remove_contents(dest: Path, *, remove_dir: bool) -> None:
    if not dest.exists():
        return
    if remove_dir:
        shutil.rmtree(dest, ignore_errors=True)
        return
    for child in dest.iterdir():
        shutil.rmtree(child, ignore_errors=True) if child.is_dir() else child.unlink(missing_ok=True)


def preview(strategy: str, answers: Mapping[str, object] | None = None, dest: Path | None = None) -> list[str]:
    """Relative paths the generation into ``dest`` would write (rendered into a temporary directory
    of the same name: without a project name, the package is named after it)."""
    with tempfile.TemporaryDirectory(prefix="advisor-preview-") as tmp:
        name = Path(dest).resolve().name if dest is not None else "continuity-job"
        return list(generate(strategy, Path(tmp) / name, answers).files)


def next_commands(package: str, shown_dest: str, strategy: str | None = None, input_source: str = "cli") -> list[str]:
    """What to type after generating, in a fresh shell, each with what it does (shell comments).

    ``make setup`` makes ``.venv`` (the project and its dependencies, from PyPI); activating it
    puts that ``python`` first on PATH for the rest of the shell session. A project whose input
    is a RabbitMQ queue (``input_source``) starts a throwaway local broker first (``make broker``,
    loopback ports only; its run, drill and tests use it) and stops it at the end.
    """
    pkg = f"python -m {package}"
    drill = drill_size(strategy)
    aim = f" --aim {drill['aim']}" if drill["aim"] else ""
    queue = input_source == "rabbitmq"
    if queue:
        work = ["make broker && export AMQP_URL=$(cat .broker/amqp_url)"
                "   # a throwaway local RabbitMQ (or export AMQP_URL for yours)",
                f"{pkg} run                  # consume the queue until it is drained, then exit 0"]  # fmt: skip
    else:
        work = [f"{pkg} submit-demo --records 2000 && {pkg} run"]
    return [
        f"cd {shlex.quote(shown_dest)}",
        "make setup                 # .venv: the project and its dependencies (from PyPI)",
        ". .venv/bin/activate       # this shell's python is now the project's",
        *work,
        f"{pkg} drill --records {drill['records']} --kills {drill['kills']} --seed 1{aim}"
        + (f"   # kill -9 aimed at the {drill['aim']} window, then verify" if drill["aim"]
           else "   # kill -9 at random moments, then verify"),
        "make test                  # its own tests, the drills included",
        "make deploy-check          # deploy/: Kubernetes, systemd, Dockerfile, alert rules (checked) to commit",
        *(["make broker-stop           # stops the local RabbitMQ node and its epmd"] if queue else []),
    ]


def update_commands(generated: Generated) -> list[str]:
    """How the project takes later template changes: shell lines run in the project, in a fresh
    shell (Copier by the advisor's own interpreter, which has it), each saying what it does."""
    copier = f"{shlex.quote(sys.executable)} -m copier"
    release = generated.release
    if release is None or not release.updatable:
        why = release.why_not if release else "no template version was recorded"
        return [f"# the template was read as a folder ({why}); later, re-render from the recorded answers:",
                f"{copier} recopy --defaults --overwrite   # template files rewritten, your edits to them not merged"]
    return [f"# the project records the advisor's template at {release.commit}; to take later template changes:",
            "git init -q && git add -A && git commit -qm Generated   # once: copier update merges through git",
            f"{copier} update --defaults --vcs-ref HEAD   # the advisor checkout's template now, your edits kept"]
