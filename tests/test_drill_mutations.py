"""The drill, tested by mutation (issue 16).

Every entry of tests/mutations.yaml plants one bug a real developer could write
(in a strategy module, the shared store, or the user's job.py) into a freshly
generated project, runs that project's crash drill as a user would, and requires
the DRILL to fail: exit 1, ``"ok": false``, the expected check ids among the
report's ``failures``, each with a message. A unit test catching the bug does
not count: the drill is what the product shows as PASSED.

The unmutated project of every option set must pass the very same drill, so a
broken baseline cannot make every mutation "caught".

`make test` drills a sample: for every check id, the first mutation in the catalogue
that names it (so each check is shown able to fail), and the unmutated baselines
those mutations run against. The whole catalogue and every baseline are marked
``soak`` and run in `make soak`.

Projects are rendered once per option set and session (per xdist worker) and
copied per case; the drill runs with the toolkit's interpreter and
``PYTHONPATH=<project>/src`` (nothing installed). ``python
tests/test_drill_mutations.py [ID...]`` runs mutations outside pytest and prints
each verdict (for working on the catalogue).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from advisor import scaffold
from verdict_checks import check_ids

pytestmark = pytest.mark.slow

CATALOGUE = Path(__file__).with_name("mutations.yaml")
#: A sweep restarts the worker at every point it crashes at (about a minute on a loaded machine).
DRILL_TIMEOUT_S = 300
#: Servers an option set may need (`needs:`): started once per session, on first use.
SERVICES = ("postgresql", "rabbitmq")
#: The check ids of the drill's verdict (a check added to the template is usable at once).
CHECK_IDS = frozenset(check_ids())


@dataclass(frozen=True)
class OptionSet:
    name: str
    strategy: str
    answers: Mapping[str, Any]
    drill: tuple[str, ...]
    needs: tuple[str, ...] = ()


@dataclass(frozen=True)
class Edit:
    file: str
    find: str
    replace: str


@dataclass(frozen=True)
class Mutation:
    id: str
    option_set: str
    edits: tuple[Edit, ...]
    checks: tuple[str, ...]
    drill: tuple[str, ...]
    bug: str


def load_catalogue(path: Path = CATALOGUE) -> tuple[dict[str, OptionSet], list[Mutation]]:
    """The option sets and mutations, validated (a malformed entry fails every test, loudly)."""
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    option_sets = {name: OptionSet(name, spec["strategy"], dict(spec.get("answers") or {}),
                                   tuple(str(a) for a in spec.get("drill") or ()), tuple(spec.get("needs") or ()))
                   for name, spec in doc["option_sets"].items()}
    for name, spec in option_sets.items():
        assert set(spec.needs) <= set(SERVICES), f"option set {name}: needs {spec.needs}, known: {SERVICES}"
    mutations, seen = [], set()
    for entry in doc["mutations"]:
        mid = entry["id"]
        assert mid not in seen, f"duplicate mutation id {mid}"
        seen.add(mid)
        unknown = set(entry) - {"id", "option_set", "file", "find", "replace", "edits", "checks", "drill", "bug"}
        assert not unknown, f"{mid}: unknown keys {sorted(unknown)}"
        assert entry["option_set"] in option_sets, f"{mid}: unknown option set {entry['option_set']}"
        checks = tuple(entry["checks"])
        assert checks and set(checks) <= CHECK_IDS, f"{mid}: checks {checks} must be ids of {sorted(CHECK_IDS)}"
        assert str(entry.get("bug", "")).strip(), f"{mid}: say what bug a developer would have written"
        edits = [Edit(entry["file"], entry["find"], entry["replace"])]
        edits += [Edit(e.get("file", entry["file"]), e["find"], e["replace"]) for e in entry.get("edits") or ()]
        drill = entry.get("drill")
        mutations.append(Mutation(mid, entry["option_set"], tuple(edits), checks,
                                  tuple(str(a) for a in drill) if drill else option_sets[entry["option_set"]].drill,
                                  entry["bug"]))
    return option_sets, mutations


OPTION_SETS, MUTATIONS = load_catalogue()


def sample(mutations: list[Mutation]) -> list[Mutation]:
    """One mutation per check id: the first in catalogue order that names a check not yet shown."""
    shown: set[str] = set()
    chosen = []
    for mutation in mutations:
        if set(mutation.checks) - shown:
            chosen.append(mutation)
            shown.update(mutation.checks)
    return chosen


SAMPLE = {m.id for m in sample(MUTATIONS)}


# ------------------------------------------------------------------------ helpers
class Renders:
    """One pristine render per option set (per process), copied per test case."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.cache: dict[str, tuple[Path, str]] = {}

    def copy(self, option_set: str, dest: Path) -> tuple[Path, str]:
        if option_set not in self.cache:
            spec = OPTION_SETS[option_set]
            generated = scaffold.generate(spec.strategy, self.root / option_set, dict(spec.answers))
            self.cache[option_set] = (generated.dest, generated.package)
        pristine, package = self.cache[option_set]
        shutil.copytree(pristine, dest, ignore=shutil.ignore_patterns("data", "__pycache__"))
        return dest, package


def apply_mutation(project: Path, package: str, mutation: Mutation) -> None:
    """Apply every edit; each `find` must occur exactly once (else the template drifted)."""
    for edit in mutation.edits:
        path = project / edit.file.format(package=package)
        assert path.is_file(), f"{mutation.id}: no file {edit.file} in the generated project"
        text = path.read_text(encoding="utf-8")
        count = text.count(edit.find)
        assert count == 1, (f"{mutation.id}: `find` occurs {count} times in {edit.file} (must be exactly once: "
                            f"the template drifted; update the mutation):\n{edit.find}")
        path.write_text(text.replace(edit.find, edit.replace), encoding="utf-8")


@dataclass
class DrillRun:
    returncode: int
    report: dict[str, Any] | None
    stdout: str
    stderr: str
    seconds: float
    workers_log: str

    def describe(self) -> str:
        report = self.report or {}
        keys = ("ok", "failures", "lost", "duplicate_effects", "redone_calls", "lookups", "incomplete_records",
                "kills", "worker_failures", "durability")
        shown = {k: report[k] for k in keys if k in report}
        return (f"exit {self.returncode} after {self.seconds:.1f} s; report: {json.dumps(shown, default=str)}\n"
                f"stderr: {self.stderr[-1500:]}\nworkers log: {self.workers_log[-1500:]}")


class Services:
    """The servers option sets need (``needs:``), each started on first use and stopped with the
    session: PostgreSQL with fsync ON (a drill must pass its durability check there) and a RabbitMQ
    node, both on loopback ports (tests/pg_server.py, tests/rabbitmq_server.py)."""

    def __init__(self, stack: ExitStack) -> None:
        self.stack = stack
        self.started: dict[str, Any] = {}

    def env(self, needs: tuple[str, ...]) -> dict[str, str]:
        """The variables a drill of an option set with these needs runs with (a new database each)."""
        env: dict[str, str] = {}
        if "postgresql" in needs:
            from pg_server import create_database, postgres_server

            if "postgresql" not in self.started:
                self.started["postgresql"] = self.stack.enter_context(postgres_server(fsync=True))
            env["DATABASE_URL"] = create_database(self.started["postgresql"], "mutant")
        if "rabbitmq" in needs:
            from rabbitmq_server import rabbitmq_server

            if "rabbitmq" not in self.started:
                self.started["rabbitmq"] = self.stack.enter_context(rabbitmq_server())
            env["AMQP_URL"] = self.started["rabbitmq"].url
        return env


def run_drill(project: Path, package: str, data_dir: Path, flags: tuple[str, ...],
              extra_env: Mapping[str, str] | None = None) -> DrillRun:
    """`python -m <pkg> drill --json --data-dir DIR FLAGS` as a user runs it (not installed)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "DATABASE_URL", "AMQP_URL") and not k.startswith(("PYTEST_", "COV_"))}
    env["PYTHONPATH"] = str(project / "src")
    env.update(extra_env or {})
    started = time.monotonic()
    # Own session: on a timeout the drill AND its workers are killed, nothing is left running.
    # --no-shrink: a failing drill would otherwise look for a smaller failing schedule (more drills).
    proc = subprocess.Popen([sys.executable, "-m", package, "drill", "--json", "--no-shrink", "--data-dir",
                             str(data_dir), *flags],
                            cwd=project, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=DRILL_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        stderr += f"\n[test] the drill did not finish within {DRILL_TIMEOUT_S} s and was killed"
    seconds = time.monotonic() - started
    try:
        report = json.loads(stdout)
    except ValueError:
        report = None
    log = data_dir / "drill-workers.log"
    workers_log = log.read_text(encoding="utf-8", errors="replace") if log.exists() else ""
    return DrillRun(proc.returncode, report, stdout, stderr, seconds, workers_log)


def failed_checks(report: Mapping[str, Any]) -> list[str]:
    return [f.get("check") for f in report.get("failures") or [] if isinstance(f, dict)]


def text_verdict(project: Path, package: str, report: Mapping[str, Any]) -> str:
    """The drill's text output for this report (drill/report.py: summary), without running the drill again."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "DATABASE_URL")}
    env["PYTHONPATH"] = str(project / "src")
    code = f"import json, sys; from {package}.drill.report import summary; print(summary(json.load(sys.stdin)))"
    result = subprocess.run([sys.executable, "-c", code], input=json.dumps(report), capture_output=True, text=True,
                            env=env, timeout=60)
    assert result.returncode == 0, f"drill.report.summary failed on the report: {result.stderr[-2000:]}"
    return result.stdout


# -------------------------------------------------------------------------- tests
@pytest.fixture(scope="session")
def renders(tmp_path_factory: pytest.TempPathFactory) -> Renders:
    return Renders(tmp_path_factory.mktemp("pristine"))


@pytest.fixture(scope="session")
def services() -> Iterator[Services]:
    with ExitStack() as stack:
        yield Services(stack)


def test_the_sample_shows_every_check_of_the_catalogue() -> None:
    assert {c for m in MUTATIONS if m.id in SAMPLE for c in m.checks} == {c for m in MUTATIONS for c in m.checks}
    assert len(SAMPLE) < len(MUTATIONS)


def test_catalogue_covers_every_strategy_and_kind() -> None:
    assert len(MUTATIONS) >= 20
    strategies = {OPTION_SETS[m.option_set].strategy for m in MUTATIONS}
    assert strategies >= {"checkpoint", "idempotent-retry", "state-machine", "event-sourcing",
                          "event-sourcing-idempotent"}
    assert any(OPTION_SETS[m.option_set].answers.get("checkpoint_store") == "file" for m in MUTATIONS)
    assert any(e.file.endswith("/job.py") for m in MUTATIONS for e in m.edits)  # the user's own bugs
    used = {m.option_set for m in MUTATIONS}
    assert used == set(OPTION_SETS), f"option sets without a mutation: {sorted(set(OPTION_SETS) - used)}"


def _baselines() -> list[Any]:
    """Every (option set, drill flags) a mutation uses: the unmutated project must pass each
    (those of the sampled mutations in `make test`, the rest in `make soak`). A sampled one that
    is a plain random-kill drill (no mode flag) is left to `make soak` too: the generated suites
    run that drill on every strategy in `make test`."""
    def moded(flags: tuple[str, ...]) -> bool:
        return any(f.startswith("--") and f not in ("--records", "--kills", "--seed") for f in flags)
    quick = {(m.option_set, m.drill) for m in MUTATIONS if m.id in SAMPLE and moded(m.drill)}
    return [pytest.param(o, f, id=f"{o}:{' '.join(f)}".replace(" ", "_"),
                         marks=() if (o, f) in quick else pytest.mark.soak)
            for o, f in sorted({(m.option_set, m.drill) for m in MUTATIONS})]


@pytest.mark.parametrize(("option_set", "flags"), _baselines())
def test_unmutated_project_passes_the_drill(option_set: str, flags: tuple[str, ...], renders: Renders,
                                            services: Services, tmp_path: Path) -> None:
    project, package = renders.copy(option_set, tmp_path / "project")
    run = run_drill(project, package, tmp_path / "drill", flags, services.env(OPTION_SETS[option_set].needs))
    assert run.report is not None, f"no JSON report: {run.describe()}"
    assert run.returncode == 0 and run.report["ok"] is True, run.describe()
    assert run.report.get("failures") == [], run.describe()


#: The soak's seeds of every drill mode (SOAK_SEEDS=3 for a shorter soak).
SOAK_SEEDS = range(1, int(os.environ.get("SOAK_SEEDS", "10")) + 1)
#: The drill modes an unmutated project must pass on every seed (the sweep, the upgrade drill and
#: the power cut have their own seeded soaks: test_sweep_drills.py, test_power_loss_drill.py).
MODES = {"random": (), "sigterm": ("--sigterm",), "workers-3": ("--workers", "3"), "aim-all": ("--aim", "all")}
#: One option set per strategy and effect kind, and the two that need a server (PostgreSQL, RabbitMQ).
SOAKED = ("checkpoint-table", "checkpoint-file", "idempotent-retry", "state-machine", "event-sourcing",
          "event-sourcing-idempotent", "checkpoint-table-queryable", "idempotent-retry-plain-at-most-once",
          "checkpoint-table-plain-at-most-once", "checkpoint-table-postgresql", "checkpoint-table-queue")
#: Modes an option set's project refuses (exit 2, with why): not part of its soak.
NOT_APPLICABLE = {("checkpoint-file", "workers-3"): "one worker per data directory (the checkpoint file's lock)"}


def in_mode(flags: tuple[str, ...], mode: str, seed: int) -> tuple[str, ...]:
    """An option set's own drill flags (its size and work) in another mode and seed: its own
    mode flags (--aim X, --sigterm, --workers N, --seed N) give way to the mode's."""
    kept, skip = [], 0
    for flag in flags:
        if skip:
            skip -= 1
        elif flag in ("--aim", "--workers", "--seed"):
            skip = 1
        elif flag != "--sigterm":
            kept.append(flag)
    return (*kept, *MODES[mode], "--seed", str(seed))


@pytest.mark.soak
@pytest.mark.parametrize(("option_set", "mode", "seed"),
                         # seed by seed: a soak cut short has still run every mode on its first seeds
                         [pytest.param(o, m, s, id=f"{o}:{m}:{s}") for s in SOAK_SEEDS for o in SOAKED for m in MODES
                          if (o, m) not in NOT_APPLICABLE])
def test_unmutated_project_passes_every_seed_of_every_mode(option_set: str, mode: str, seed: int, renders: Renders,
                                                           services: Services, tmp_path: Path) -> None:
    """Zero false alarms: a correct project passes each drill mode on every seed, not on the one
    seed its mutations use."""
    project, package = renders.copy(option_set, tmp_path / "project")
    flags = in_mode(OPTION_SETS[option_set].drill, mode, seed)
    run = run_drill(project, package, tmp_path / "drill", flags, services.env(OPTION_SETS[option_set].needs))
    assert run.report is not None, f"no JSON report for {' '.join(flags)}: {run.describe()}"
    assert run.returncode == 0 and run.report["ok"] is True, f"{' '.join(flags)}: {run.describe()}"


def test_the_soak_modes_replace_an_option_sets_own_mode() -> None:
    assert set(SOAKED) <= set(OPTION_SETS)
    own = ("--records", "200", "--aim", "x", "--seed", "3", "--sigterm", "--work-ms", "0")
    assert in_mode(own, "workers-3", 7) == ("--records", "200", "--work-ms", "0", "--workers", "3", "--seed", "7")
    assert in_mode(own, "random", 1) == ("--records", "200", "--work-ms", "0", "--seed", "1")


@pytest.mark.parametrize("mutation", [pytest.param(m, id=m.id, marks=() if m.id in SAMPLE else pytest.mark.soak)
                                      for m in MUTATIONS])
def test_the_drill_catches_the_mutation(mutation: Mutation, renders: Renders, services: Services,
                                       tmp_path: Path) -> None:
    project, package = renders.copy(mutation.option_set, tmp_path / "project")
    apply_mutation(project, package, mutation)
    run = run_drill(project, package, tmp_path / "drill", mutation.drill,
                    services.env(OPTION_SETS[mutation.option_set].needs))
    assert run.report is not None, f"{mutation.id}: the drill gave no JSON report: {run.describe()}"
    assert run.returncode == 1 and run.report["ok"] is False, \
        f"{mutation.id} NOT CAUGHT ({mutation.bug}): {run.describe()}"
    reported = failed_checks(run.report)
    missing = [c for c in mutation.checks if c not in reported]
    assert not missing, f"{mutation.id}: the drill failed, but without {missing} (reported {reported}): {run.describe()}"
    for failure in run.report["failures"]:
        assert str(failure.get("message") or "").strip(), f"{mutation.id}: a failure without a message: {failure}"
    # The text verdict (what a user reads) names the problem too: one FAILED line per check.
    lines = text_verdict(project, package, run.report).splitlines()
    for check in mutation.checks:
        named = [line for line in lines if line.startswith(f"FAILED: {check}: ")]
        assert named and all(line.split(": ", 2)[2].strip() for line in named), \
            f"{mutation.id}: the text verdict has no 'FAILED: {check}: <message>' line:\n" + "\n".join(lines[-8:])


# ------------------------------------------------------------- command line (dev)
def _verdict_line(label: str, checks: tuple[str, ...], run: DrillRun) -> str:
    report = run.report or {}
    reported = failed_checks(report)
    if checks:
        caught = run.returncode == 1 and report.get("ok") is False and all(c in reported for c in checks)
        tag = "CAUGHT" if caught else "MISSED"
    else:
        tag = {0: "SURVIVED", 1: "killed"}.get(run.returncode, f"exit {run.returncode}")
    return (f"{tag:8} {label:48} want {','.join(checks) or '-':22} got {','.join(map(str, reported)) or '-':30} "
            f"exit {run.returncode} {run.seconds:5.1f}s lost {report.get('lost')} dup {report.get('duplicate_effects')} "
            f"redone {report.get('redone_calls')} incomplete {report.get('incomplete_records')} kills {report.get('kills')}")


def _sweep(root: Path, option_set: str, file: str, functions: set[str]) -> None:
    """Statement deletion over the named functions (each simple statement -> `pass`), one drill each:
    SURVIVED lines are equivalent mutants, paths the drill never takes, or candidates for the catalogue."""
    import ast
    from concurrent.futures import ThreadPoolExecutor

    base, package = Renders(root / "pristine").copy(option_set, root / "base")
    rel = file.format(package=package)
    lines = (base / rel).read_text(encoding="utf-8").splitlines(keepends=True)
    spans = sorted({(st.lineno, st.end_lineno or st.lineno)
                    for fn in ast.walk(ast.parse("".join(lines)))
                    if isinstance(fn, ast.FunctionDef) and fn.name in functions
                    for st in ast.walk(fn)
                    if isinstance(st, (ast.Expr, ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Return))
                    and not (isinstance(st, ast.Expr) and isinstance(st.value, ast.Constant))})

    def one(span: tuple[int, int]) -> str:
        first, last = span
        mutated = list(lines)
        indent = lines[first - 1][:len(lines[first - 1]) - len(lines[first - 1].lstrip())]
        mutated[first - 1:last] = [indent + "pass  # SWEEP\n"]
        label = f"L{first} " + " ".join("".join(lines[first - 1:last]).split())[:40]
        try:
            compile("".join(mutated), rel, "exec")
        except SyntaxError:
            return f"{'syntax':8} {label}"
        case = root / f"sweep-{first}"
        shutil.copytree(base, case)
        (case / rel).write_text("".join(mutated), encoding="utf-8")
        return _verdict_line(label, (), run_drill(case, package, case / "drill", OPTION_SETS[option_set].drill))

    with ThreadPoolExecutor(2) as pool:
        for line in pool.map(one, spans):
            print(line, flush=True)


def _main(argv: list[str]) -> int:
    """``[ID|OPTION_SET ...]``: run those mutations (default: all), one verdict line each.
    ``--sweep OPTION_SET FILE FUNC[,FUNC...]``: a statement-deletion sweep (see _sweep)."""
    import tempfile

    sys.path.insert(0, str(Path(__file__).parent))  # pg_server, rabbitmq_server
    with tempfile.TemporaryDirectory(prefix="mutations-") as tmp, ExitStack() as stack:
        root = Path(tmp)
        if argv[:1] == ["--sweep"]:
            _sweep(root, argv[1], argv[2], set(argv[3].split(",")))
            return 0
        repeat = 1
        if argv[:1] == ["--repeat"]:  # each mutation N times (is it caught every time?)
            repeat, argv = int(argv[1]), argv[2:]
        wanted = set(argv)
        renders, services = Renders(root / "pristine"), Services(stack)
        chosen = [m for m in MUTATIONS if not wanted or m.id in wanted or m.option_set in wanted]
        for n, mutation in enumerate(m for m in chosen for _ in range(repeat)):
            project, package = renders.copy(mutation.option_set, root / f"case-{n}" / "project")
            apply_mutation(project, package, mutation)
            run = run_drill(project, package, root / f"case-{n}" / "drill", mutation.drill,
                            services.env(OPTION_SETS[mutation.option_set].needs))
            print(_verdict_line(mutation.id, mutation.checks, run), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
