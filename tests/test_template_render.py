"""The Copier template rendered with fixed answers: files, answers file, validators.

Rendering is fast (no install); the generated projects' own suites run in
test_template_generated.py.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from advisor import scaffold
from advisor.errors import ScaffoldError
from advisor.paths import templates_dir

ALL_STRATEGIES = {"idempotent-retry", "checkpoint", "stream-checkpoint", "state-machine", "event-sourcing",
                  "event-sourcing-idempotent"}
#: Inside src/<package>/: the user's files at the top, the shared runtime, the drill, the operations.
SHARED_RUNTIME = ["cli.py", "settings.py", "job.py", "__main__.py", "runtime/store.py", "runtime/shutdown.py",
                  "runtime/state.py", "runtime/external.py", "runtime/strategy.py", "runtime/errors.py",
                  "runtime/faults.py", "drill/command.py", "drill/runner.py", "ops/status.py"]


def copier_cli(*args: str) -> subprocess.CompletedProcess[str]:
    """The plain Copier CLI (`copier ...`), from the toolkit's environment."""
    return subprocess.run([sys.executable, "-m", "copier", *args], capture_output=True, text=True, timeout=120)


def answers_of(dest: Path) -> dict:
    return yaml.safe_load((dest / ".copier-answers.yml").read_text())


# ---- the plain Copier CLI -------------------------------------------------------
def test_plain_copier_cli_renders_the_checkpoint_project(tmp_path: Path) -> None:
    dest = tmp_path / "nightly-sync"  # no project name given: the folder's name is the project's
    result = copier_cli("copy", str(templates_dir()), str(dest), "--data", "strategy=checkpoint", "--defaults")
    assert result.returncode == 0, result.stderr
    pkg = dest / "src" / "nightly_sync"
    for name in SHARED_RUNTIME + ["checkpoint/__init__.py", "schema.sql"]:
        assert (pkg / name).is_file(), name
    assert not (pkg / "checkpoint_file").exists()
    for name in ("pyproject.toml", "README.md", "Makefile", "tests/test_drill.py", "tests/test_checkpoint.py"):
        assert (dest / name).is_file(), name
    answers = answers_of(dest)
    assert answers["strategy"] == "checkpoint" and answers["package_name"] == "nightly_sync"
    assert answers["checkpoint_store"] == "table" and "runtime_module" not in answers
    schema = (pkg / "schema.sql").read_text()
    assert "processed_offset" in schema and "INSERT INTO schema_version (version) VALUES (4)" in schema
    assert "CREATE TABLE submissions" in schema  # correlation ids (schema version 3)
    assert "CREATE TABLE task_inputs" in schema  # the input out of the row updated per batch (version 4)
    readme = (dest / "README.md").read_text()
    assert "synchronous=FULL" in readme and "kill -9" in readme and "busy_timeout" in readme


def test_plain_copier_cli_renders_the_file_variant(tmp_path: Path) -> None:
    dest = tmp_path / "job"
    result = copier_cli("copy", str(templates_dir()), str(dest), "--data", "strategy=checkpoint",
                        "--data", "checkpoint_store=file", "--data", "project_name=Photo Uploader", "--defaults")
    assert result.returncode == 0, result.stderr
    pkg = dest / "src" / "photo_uploader"
    assert (pkg / "checkpoint_file" / "__init__.py").is_file()
    assert not (pkg / "checkpoint").exists() and not (pkg / "schema.sql").exists()
    assert (dest / "tests" / "test_checkpoint_file.py").is_file()
    assert answers_of(dest)["checkpoint_store"] == "file"
    assert "os.replace" in (dest / "README.md").read_text()


@pytest.mark.parametrize("data", [
    "package_name=Bad-Name",          # not an identifier
    "package_name=import",            # a keyword
    "project_name=../escape",         # path trick
    "project_name=a/b",               # path separator
    "grace_period_s=0",               # must be positive (every strategy has a template now)
    "strategy=teleport",              # not a strategy at all
    "batch_size=0",                   # must be positive
])
def test_plain_copier_cli_rejects_bad_answers(tmp_path: Path, data: str) -> None:
    dest = tmp_path / "job"
    result = copier_cli("copy", str(templates_dir()), str(dest), "--data", data, "--defaults")
    assert result.returncode != 0
    assert not dest.exists()


def test_copier_recopy_reuses_the_recorded_answers(tmp_path: Path) -> None:
    dest = tmp_path / "job"
    scaffold.generate("checkpoint", dest, {"project_name": "Nightly Sync", "batch_size": 42})
    (dest / "src" / "nightly_sync" / "job.py").unlink()
    result = copier_cli("recopy", "--defaults", "--overwrite", str(dest))
    assert result.returncode == 0, result.stderr
    assert (dest / "src" / "nightly_sync" / "job.py").is_file()
    assert "batch_size: int = 42" in (dest / "src" / "nightly_sync" / "settings.py").read_text()


# ---- advisor.scaffold -----------------------------------------------------------
OPTION_SETS = {
    "table": {},
    "file": {"checkpoint_store": "file"},
    "tuned": {"project_name": "Nightly Sync", "batch_size": 50, "checkpoint_interval_s": 2.5,
              "grace_period_s": 10, "state_store": "postgresql"},
}


@pytest.mark.parametrize("name", sorted(OPTION_SETS))
def test_generate_renders_each_option_set(tmp_path: Path, name: str) -> None:
    answers = OPTION_SETS[name]
    generated = scaffold.generate("checkpoint", tmp_path / name, answers)
    assert generated.dest == tmp_path / name
    recorded = answers_of(generated.dest)
    assert recorded["strategy"] == "checkpoint"
    for key, value in answers.items():
        assert recorded[key] == value
    assert generated.package == recorded["package_name"]
    assert f"src/{generated.package}/cli.py" in generated.files and ".copier-answers.yml" in generated.files
    module = "checkpoint_file/__init__.py" if answers.get("checkpoint_store") == "file" else "checkpoint/__init__.py"
    assert f"src/{generated.package}/{module}" in generated.files
    settings = (generated.dest / "src" / generated.package / "settings.py").read_text()
    if name == "tuned":
        assert generated.package == "nightly_sync"
        assert "batch_size: int = 50" in settings and "grace_period_s: float = 10.0" in settings
        assert "psycopg" in (generated.dest / "pyproject.toml").read_text()


def test_generate_never_copies_runtime_code_across_strategies() -> None:
    runtime = templates_dir() / "project" / "src" / "{{package_name}}"
    names = [p.relative_to(runtime).as_posix() for p in runtime.rglob("*") if "__pycache__" not in p.parts]
    for name in SHARED_RUNTIME:  # the shared runtime exists once
        assert names.count(name) + names.count(name + ".jinja") == 1, name
    for module in ("checkpoint", "checkpoint_file"):  # strategy code comes by conditional folder names
        assert f"{{% if runtime_module == '{module}' %}}{module}{{% endif %}}/__init__.py" in names
    # No function body of five statements or more appears in two files.
    seen: dict[str, str] = {}
    for path in sorted(runtime.rglob("*")):
        if not path.name.endswith((".py", ".py{% endif %}")):
            continue  # *.jinja files hold Jinja as well as Python: not parseable as they are
        name = path.relative_to(runtime).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and len(node.body) >= 5:
                body = ast.dump(ast.Module(body=node.body, type_ignores=[]))
                assert body not in seen or seen[body] == name, (
                    f"{node.name} in {name} repeats code of {seen.get(body)}; share it instead")
                seen[body] = name


def test_no_package_name_may_shadow_the_standard_library_or_a_dependency() -> None:
    """A package named like a module it imports (gc, statemachine, eventsourcing, ...) shadows it and the
    generated project cannot start: copier.yml's validator refuses every standard-library module, every
    keyword and the import names of the template's dependencies."""
    import keyword
    import re
    import sys

    validator = yaml.safe_load((templates_dir() / "copier.yml").read_text())["package_name"]["validator"]
    refused = set(re.findall(r"'([a-z][a-z0-9_]*)'", validator.split("package_name in [", 1)[1].split("]", 1)[0]))
    identifier = re.compile(r"[a-z][a-z0-9_]{0,62}")
    std = {n for n in sys.stdlib_module_names if identifier.fullmatch(n)}
    words = {k.lower() for k in keyword.kwlist + keyword.softkwlist if identifier.fullmatch(k.lower())}
    dependencies = {"prometheus_client", "tenacity", "statemachine", "eventsourcing", "psycopg", "psycopg_pool",
                    "pika", "pyspark", "py4j", "pytest", "yaml"}
    assert not (std | words | dependencies) - refused, sorted((std | words | dependencies) - refused)


@pytest.mark.parametrize("strategy, answers, message", [
    ("checkpoint", {"package_name": "Bad-Name"}, "package_name"),
    ("checkpoint", {"package_name": "9lives"}, "package_name"),
    ("checkpoint", {"package_name": "class"}, "keyword"),
    ("checkpoint", {"package_name": "gc"}, "shadows a module"),                 # the standard library's
    ("state-machine", {"package_name": "statemachine"}, "shadows a module"),    # a dependency's import name
    ("checkpoint", {"project_name": "../../etc"}, "path tricks"),
    ("checkpoint", {"project_name": "~root"}, "path tricks"),
    ("checkpoint", {"project_name": ""}, "empty"),
    ("checkpoint", {"batch_size": -5}, "batch_size"),
    ("checkpoint", {"batch_size": "lots"}, "expected a int"),
    ("checkpoint", {"grace_period_s": 0}, "grace_period_s"),
    ("checkpoint", {"checkpoint_store": "cloud"}, "table, file"),
    ("checkpoint", {"colour": "blue"}, "valid ids: project_name"),
    ("checkpoint", {"strategy": "event-sourcing"}, "strategy"),
    ("event-sourcing", {"snapshot_every": 0}, "snapshot_every"),
    ("event-sourcing-idempotent", {"snapshot_every": "often"}, "expected a int"),
    ("teleport", {}, "unknown strategy"),
])
def test_generate_rejects_bad_answers_and_writes_nothing(tmp_path: Path, strategy: str, answers: dict,
                                                        message: str) -> None:
    dest = tmp_path / "job"
    with pytest.raises(ScaffoldError, match=message):
        scaffold.generate(strategy, dest, answers)
    assert not dest.exists()


def test_unsupported_strategies_say_not_yet_generated(tmp_path: Path) -> None:
    missing = ALL_STRATEGIES - scaffold.generated_strategies()
    for strategy in sorted(missing):
        with pytest.raises(ScaffoldError, match="not yet generated"):
            scaffold.generate(strategy, tmp_path / strategy)
        assert not (tmp_path / strategy).exists()


def test_copier_validators_are_the_last_line_of_defence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Even when the pre-check is bypassed, Copier's own validator refuses, by question id."""
    monkeypatch.setattr("advisor.scaffold.generation.validate_answers", lambda strategy, answers, dest=None: {**answers, "strategy": strategy})
    dest = tmp_path / "empty"
    dest.mkdir()
    with pytest.raises(ScaffoldError, match="package_name"):
        scaffold.generate("checkpoint", dest, {"package_name": "Not Valid"})
    assert dest.is_dir() and not any(dest.iterdir())  # the empty destination stays empty
    with pytest.raises(ScaffoldError, match="batch_size"):
        scaffold.generate("checkpoint", tmp_path / "new", {"batch_size": 0})
    assert not (tmp_path / "new").exists()


def test_generate_refuses_a_non_empty_destination(tmp_path: Path) -> None:
    dest = tmp_path / "occupied"
    dest.mkdir()
    (dest / "notes.txt").write_text("mine")
    with pytest.raises(ScaffoldError, match="not empty"):
        scaffold.generate("checkpoint", dest)
    assert sorted(p.name for p in dest.iterdir()) == ["notes.txt"]
    generated = scaffold.generate("checkpoint", dest, force=True)
    assert (dest / "notes.txt").read_text() == "mine" and "src/occupied/cli.py" in generated.files


def test_generate_refuses_a_file_as_destination(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    with pytest.raises(ScaffoldError, match="not a directory"):
        scaffold.generate("checkpoint", tmp_path / "f")


def test_preview_lists_files_without_writing(tmp_path: Path) -> None:
    files = scaffold.preview("checkpoint", {"project_name": "Nightly Sync"})
    assert "src/nightly_sync/checkpoint/__init__.py" in files and "README.md" in files and "tests/test_drill.py" in files
    assert "src/continuity_job/checkpoint_file/files.py" in scaffold.preview("checkpoint", {"checkpoint_store": "file"})
    with pytest.raises(ScaffoldError):
        scaffold.preview("checkpoint", {"package_name": "-x"})


# ---- questions ------------------------------------------------------------------
def test_template_questions_have_fixed_ids_help_and_choices() -> None:
    questions = {q.id: q for q in scaffold.template_questions()}
    assert list(questions)[:3] == ["project_name", "package_name", "strategy"]
    assert set(questions["strategy"].choices) == ALL_STRATEGIES
    assert questions["checkpoint_store"].choices == ("table", "file")
    assert "runtime_module" not in questions  # computed, never asked
    for question in questions.values():
        assert question.help, question.id
    assert questions["batch_size"].type == "int" and questions["batch_size"].default == 100


def test_generated_strategies_is_a_subset_with_checkpoint() -> None:
    available = scaffold.generated_strategies()
    assert "checkpoint" in available and available <= ALL_STRATEGIES


@pytest.mark.parametrize("project_name, package", [
    ("Nightly Sync", "nightly_sync"),        # spaces → _
    ("ETL--Job 2", "etl_job_2"),             # runs of non-alphanumerics collapse
    ("2fast", "fast"),                       # cannot start with a digit
])
def test_package_name_default_chains_from_project_name(project_name: str, package: str) -> None:
    assert scaffold.validate_answers("checkpoint", {"project_name": project_name}) == {
        "strategy": "checkpoint", "project_name": project_name}
    assert scaffold.preview("checkpoint", {"project_name": project_name})[0]  # renders
    assert f"src/{package}/cli.py" in scaffold.preview("checkpoint", {"project_name": project_name})


def test_scaffold_import_does_not_import_copier() -> None:
    code = "import sys, advisor.scaffold as s; s.template_questions(); s.validate_answers('checkpoint', {}); " \
           "print('copier' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    assert out.stdout.strip() == "False", out.stderr


def test_generated_status_piped_into_head_ends_quietly(tmp_path: Path) -> None:
    """`python -m <pkg> status | head -2` ends without a BrokenPipeError traceback."""
    from test_cli import to_a_closed_pipe

    generated = scaffold.generate("checkpoint", tmp_path / "pipe-job")
    env = {**os.environ, "PYTHONPATH": str(generated.dest / "src")}
    submit = subprocess.run([sys.executable, "-m", generated.package, "submit-demo", "--records", "50"],
                            cwd=generated.dest, env=env, capture_output=True, text=True, timeout=60)
    assert submit.returncode == 0, submit.stderr
    for command in (["status"], ["status", "--json"], ["--help"]):
        result = to_a_closed_pipe([sys.executable, "-m", generated.package, *command], cwd=generated.dest, env=env)
        assert result.stderr == "" and result.returncode == 0, (command, result.stderr)


@pytest.mark.parametrize("first, then, gone", [
    # the file variant becomes the table variant: no checkpoint_file/ beside checkpoint/
    (("checkpoint", {"checkpoint_store": "file"}), ("checkpoint", {}),
     ["src/swap_job/checkpoint_file/__init__.py", "src/swap_job/checkpoint_file/files.py",
      "tests/test_checkpoint_file.py"]),
    # another strategy, another package name: the old package goes entirely
    (("idempotent-retry", {"project_name": "Old Name"}), ("event-sourcing", {}),
     ["src/old_name/idempotent_retry/__init__.py", "src/old_name/cli.py", "tests/test_idempotent_retry.py"]),
])
def test_force_over_another_variant_leaves_none_of_its_files(tmp_path: Path, first, then, gone) -> None:
    dest = tmp_path / "swap-job"
    scaffold.generate(first[0], dest, first[1])
    (dest / "data").mkdir()
    (dest / "data" / "state.db").write_text("the user's data")
    (dest / "notes.txt").write_text("mine")
    generated = scaffold.generate(then[0], dest, then[1], force=True)
    for rel in gone:
        assert not (dest / rel).exists() and rel in generated.removed, rel
        assert not (dest / rel).parent.exists() or (dest / rel).parent.name in ("src", "tests", "swap_job"), rel  # no empty folder
    assert set(generated.files) == set(scaffold.preview(then[0], then[1], dest)) | {"data/state.db", "notes.txt"}
    assert (dest / "data" / "state.db").read_text() == "the user's data" and (dest / "notes.txt").is_file()
    assert generated.kept == ("data/", "notes.txt")
    if first[1].get("project_name"):
        assert not (dest / "src" / "old_name").exists()
    # and it still works: the new project's CLI answers
    env = {**os.environ, "PYTHONPATH": str(dest / "src")}
    helped = subprocess.run([sys.executable, "-m", generated.package, "--help"], cwd=dest, env=env,
                            capture_output=True, text=True, timeout=60)
    assert helped.returncode == 0, helped.stderr
