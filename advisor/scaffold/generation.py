"""Scaffold: generate a project from the Copier template and run its crash drill.

The template (``templates/copier.yml``) is the single source of truth: its
questions, defaults and validators are read from the YAML here (no Copier import,
so listing questions or validating answers is fast), and :func:`generate` runs
Copier's own ``run_copy`` so the template's validators run again on the real
thing. Every user-facing failure is a :class:`ScaffoldError` or
:class:`DrillError`.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from advisor.errors import AdvisorError, DrillError, InputError, ScaffoldError
from advisor.paths import templates_dir
from advisor.redact import redact_all
from advisor.safe_read import load_yaml, parse_json

_TYPES: dict[str, type] = {"str": str, "int": int, "float": float, "bool": bool}


@dataclass(frozen=True)
class TemplateQuestion:
    id: str
    help: str
    type: str
    default: object
    choices: tuple[str, ...]


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


# ------------------------------------------------------------------ questions
@lru_cache(maxsize=4)
def _config(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ScaffoldError(f"{path}: cannot read the template configuration ({exc})") from None
    if not isinstance(data, dict):
        raise ScaffoldError(f"{path}: expected a mapping of questions")
    return data


def _copier_yml() -> dict[str, Any]:
    return _config(templates_dir() / "copier.yml")


def _raw_questions() -> dict[str, dict[str, Any]]:
    """Prompt questions in order (configuration keys start with '_')."""
    out: dict[str, dict[str, Any]] = {}
    for key, spec in _copier_yml().items():
        if key.startswith("_"):
            continue
        out[key] = spec if isinstance(spec, dict) else {"default": spec}
    return out


def _is_computed(spec: Mapping[str, Any]) -> bool:
    # `when: false` (literally) marks a value the template computes and never asks.
    return spec.get("when") is False


def _choice_values(spec: Mapping[str, Any]) -> tuple[str, ...]:
    choices = spec.get("choices") or ()
    if isinstance(choices, dict):
        return tuple(str(v["value"] if isinstance(v, dict) else v) for v in choices.values())
    return tuple(str(c) for c in choices)


def template_questions(strategy: str | None = None, given: Mapping[str, object] | None = None) -> list[TemplateQuestion]:
    """The questions a user answers (computed values excluded), in template order.

    With ``strategy``, only those the template asks for it (their ``when`` holds with
    the ``given`` answers and the defaults), e.g. ``checkpoint_store`` only for ``checkpoint``.
    """
    asked = _asked_for(strategy, given) if strategy is not None else None
    return [
        TemplateQuestion(
            id=key,
            help=" ".join(str(spec.get("help", "")).split()),
            type=str(spec.get("type", "str")),
            default=spec.get("default"),
            choices=_choice_values(spec),
        )
        for key, spec in _raw_questions().items()
        if not _is_computed(spec) and (asked is None or key in asked)
    ]


def _asked_for(strategy: str, given: Mapping[str, object] | None = None) -> set[str]:
    """Question ids whose ``when`` holds for ``strategy`` with the ``given`` answers and every
    other answer at its default (``input_source`` is asked of a checkpoint project only while
    ``checkpoint_store`` is ``table``)."""
    env, context, asked = _jinja_env(), _context(None), set[str]()
    given = given or {}
    for qid, spec in _raw_questions().items():
        kind = str(spec.get("type", "str"))
        if qid == "strategy":
            value: object = strategy
        elif qid in given:
            value = _coerce(qid, kind, given[qid])
        else:
            value = _coerce(qid, kind, _render(env, spec.get("default"), context))
        context[qid] = value
        if str(_render(env, spec.get("when", True), context)).strip().lower() not in ("false", "0", "no", ""):
            asked.add(qid)
    return asked


def generated_strategies() -> frozenset[str]:
    """Strategies the template can generate now: choices of `strategy` without a disabling validator."""
    choices = _raw_questions().get("strategy", {}).get("choices") or {}
    if not isinstance(choices, dict):
        return frozenset(str(c) for c in choices)
    return frozenset(
        str(v["value"] if isinstance(v, dict) else v)
        for v in choices.values()
        if not (isinstance(v, dict) and str(v.get("validator", "")).strip())
    )


# ----------------------------------------------------------------- validation
def _jinja_env() -> Any:
    """A sandboxed Jinja environment with the two regex filters the template uses."""
    from jinja2.sandbox import SandboxedEnvironment

    env = SandboxedEnvironment()
    env.filters["regex_search"] = _regex_search
    env.filters["regex_replace"] = lambda value, pattern, repl="": re.sub(pattern, repl, str(value))
    return env


def _regex_search(value: object, pattern: str) -> str | None:
    """Like Ansible's filter (which Copier ships): the match, or None."""
    match = re.search(pattern, str(value))
    return match.group(0) if match else None


def _render(env: Any, template: object, context: Mapping[str, Any]) -> object:
    if not isinstance(template, str) or "{" not in template:
        return template
    return env.from_string(template).render(**context)


def _coerce(qid: str, kind: str, value: object) -> object:
    target = _TYPES.get(kind, str)
    if target is bool:
        if isinstance(value, bool):
            return value
        if str(value).lower() in ("true", "yes", "1", "on"):
            return True
        if str(value).lower() in ("false", "no", "0", "off"):
            return False
    else:
        try:
            if target is int and isinstance(value, float) and not value.is_integer():
                raise ValueError
            if isinstance(value, bool) and target is not str:
                raise ValueError
            return target(value)
        except (TypeError, ValueError):
            pass
    raise ScaffoldError(f"template answer {qid}={value!r}: expected a {kind}")


def _context(dest: Path | None) -> dict[str, object]:
    """What Copier offers every default before the first answer: ``_folder_name``, the destination's name."""
    return {"_folder_name": Path(dest).resolve().name if dest is not None else ""}


def validate_answers(strategy: str, answers: Mapping[str, object], dest: Path | None = None) -> dict[str, object]:
    """Check answers against the template without running Copier.

    Unknown keys, wrong types, values outside the choices, a strategy that is not
    generated yet and anything the template's own ``validator`` expressions reject
    raise :class:`ScaffoldError`. Returns the answers given (typed) plus ``strategy``.
    """
    raw = _raw_questions()
    asked = {k: v for k, v in raw.items() if not _is_computed(v)}
    unknown = sorted(set(answers) - set(asked))
    if unknown:
        raise ScaffoldError(
            f"unknown template question(s): {', '.join(unknown)}; valid ids: {', '.join(asked)}"
        )
    if "strategy" in answers and answers["strategy"] != strategy:
        raise ScaffoldError(f"answers say strategy={answers['strategy']!r} but {strategy!r} was asked for")
    available = generated_strategies()
    all_strategies = _choice_values(raw.get("strategy", {}))
    if strategy not in all_strategies:
        raise ScaffoldError(f"unknown strategy {strategy!r}; valid: {', '.join(all_strategies)}")
    if strategy not in available:
        raise ScaffoldError(
            f"strategy {strategy!r} is not yet generated by the template; available: {', '.join(sorted(available))}"
        )
    given: dict[str, object] = {"strategy": strategy}
    for qid, value in answers.items():
        if qid != "strategy":
            given[qid] = _coerce(qid, str(asked[qid].get("type", "str")), value)
    # Walk the questions in order like Copier: defaults chain from earlier answers.
    env, context = _jinja_env(), _context(dest)
    for qid, spec in raw.items():
        kind = str(spec.get("type", "str"))
        if qid in given:
            value = given[qid]
        else:
            value = _coerce(qid, kind, _render(env, spec.get("default"), context))
        when = _render(env, spec.get("when", True), context)
        context[qid] = value
        if qid in given and str(when).strip().lower() in ("false", "0", "no", ""):
            continue  # not asked for this strategy; Copier ignores it too
        values = _choice_values(spec)
        if values and str(value) not in values:
            raise ScaffoldError(f"template answer {qid}={value!r}: choose one of {', '.join(values)}")
        message = str(_render(env, spec.get("validator", ""), context) or "").strip()
        if message:
            raise ScaffoldError(f"template answer {qid}={value!r}: {' '.join(message.split())}")
    return given


# ----------------------------------------------------------------- generation
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
    files = tuple(sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file()))
    return Generated(dest=dest, package=_package_of(dest), files=files, removed=removed, kept=kept)


def _previous_files(dest: Path) -> set[str] | None:
    """The files the template wrote for the project already in ``dest`` (its recorded answers,
    rendered again); None when ``dest`` holds no generated project or its answers no longer render."""
    try:
        recorded = yaml.safe_load((dest / ".copier-answers.yml").read_text(encoding="utf-8"))
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
    drill = {"records": 2000, "kills": 10, "aim": None, **DRILL_DEFAULTS.get(strategy or "", {})}
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
        "   # kill -9 at random moments, then verify",
        "make test                  # its own tests, the drills included",
        *(["make broker-stop           # stops the local RabbitMQ node and its epmd"] if queue else []),
    ]


def _package_of(dest: Path) -> str:
    answers_file = Path(dest) / ".copier-answers.yml"
    if not answers_file.is_file():
        raise DrillError(f"{dest} is not a generated project (no .copier-answers.yml)")
    answers = load_yaml(answers_file, "template answers file") or {}
    package = answers.get("package_name") if isinstance(answers, dict) else None
    if not isinstance(package, str) or not (Path(dest) / "src" / package).is_dir():
        raise DrillError(f"{dest}: .copier-answers.yml names no package under src/")
    return package


# ---------------------------------------------------------------------- drill
def strategy_of(dest: Path) -> str:
    """The strategy a generated project implements ('' when its answers file can't tell)."""
    return recorded_answer(dest, "strategy")


def recorded_answer(dest: Path, key: str) -> str:
    """One answer recorded in a generated project's ``.copier-answers.yml`` ('' when it can't tell)."""
    try:
        answers = load_yaml(Path(dest) / ".copier-answers.yml", "template answers file") or {}
    except AdvisorError:
        return ""
    return str(answers.get(key, "")) if isinstance(answers, dict) else ""


#: A drill's size when the caller does not say: a Spark restart is a JVM start (5-10 s),
#: so the stream project's drill kills 3 times, the first and third aimed at the window
#: between its sink's commit and Spark's commit log.
DRILL_DEFAULTS: dict[str, dict[str, Any]] = {
    "stream-checkpoint": {"records": 600, "kills": 3, "aim": "after_sink_commit"},
}


def drill_events(
    dest: Path,
    *,
    records: int | None = None,
    kills: int | None = None,
    seed: int = 1,
    sigterm: bool = False,
    work_ms: float | None = None,
    aim: str | None = None,
) -> Iterator[dict[str, Any]]:
    """Run the generated project's drill and yield its events; the last is the report.

    ``records``/``kills`` default to 2000/10 (DRILL_DEFAULTS per strategy); ``aim``
    is the drill's ``--aim WINDOW|all``."""
    dest = Path(dest)
    package = _package_of(dest)
    defaults = {"records": 2000, "kills": 10, "aim": None, **DRILL_DEFAULTS.get(strategy_of(dest), {})}
    records = defaults["records"] if records is None else records
    kills = defaults["kills"] if kills is None else kills
    aim = defaults["aim"] if aim is None else aim
    cmd = [sys.executable, "-m", package, "drill", "--records", str(records), "--kills", str(kills),
           "--seed", str(seed), "--events", "--json"]
    if aim and not sigterm:
        cmd += ["--aim", aim]
    if sigterm:
        cmd.append("--sigterm")
    if work_ms is not None:
        cmd += ["--work-ms", str(work_ms)]
    if aim is not None:  # a critical window of the strategy, or "all" (the project's `drill --help`)
        cmd += ["--aim", aim]
    env = dict(os.environ)
    src = str((dest / "src").resolve())
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    errors = tempfile.TemporaryFile(mode="w+")  # a file, not a pipe: it can never fill up and block
    try:
        proc = subprocess.Popen(cmd, cwd=dest, env=env, stdout=subprocess.PIPE, stderr=errors,
                                stdin=subprocess.DEVNULL, text=True)
    except OSError as exc:
        errors.close()
        raise DrillError(f"cannot start the drill of {dest}: {exc}") from None
    report = None
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            line = line.strip()
            if not line:
                continue
            try:
                event = parse_json(line, f"the drill of {dest}", "drill event")
            except InputError:
                continue  # not an event (a stray print, a line nested too deep); the report decides
            if isinstance(event, dict):
                event = redact_all(event)  # a generated project redacts its own; an edited one may not
                if event.get("event") == "report":
                    report = event
                yield event
        proc.wait()
    finally:
        if proc.poll() is None:
            # Stopped early (the consumer closed the generator): SIGTERM lets the drill
            # stop its own workers; SIGKILL only if it does not exit promptly.
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        errors.seek(0)
        err = errors.read().strip().splitlines()
        errors.close()
    if report is None:
        detail = err[-1] if err else f"exit code {proc.returncode}"
        raise DrillError(f"the drill of {dest} did not report: {detail}")


def run_drill(dest: Path, **options: Any) -> dict[str, Any]:
    """Run the drill to the end and return its report."""
    report: dict[str, Any] | None = None
    for event in drill_events(dest, **options):
        if event.get("event") == "report":
            report = event
    assert report is not None  # drill_events raises otherwise
    return report
