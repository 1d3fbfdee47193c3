"""Template settings from answers (strategies/template-settings.yaml, advisor/model/template_settings.py):
every rule against the real template, the rules' conditions, the filtering by strategy, explicit
answers winning, and the CLI (recommend text/--json, generate --answers, its .copier-answers.yml)."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
import yaml

from advisor.cli import main
from advisor.errors import CatalogError
from advisor.model.catalog import Catalog
from advisor.model.loader import load_catalog
from advisor.model.template_questions import template_questions
from advisor.model.template_settings import Setting, apply, implied, load_rules, settings_for

PLAIN_STRICT = {"external_effects": "plain_api", "duplicate_cost": "unacceptable"}
BATCH = {"work_shape": "record_batch", "duration": "hours", "recovery_point_store": "database"}


def run(capsys, *argv: str) -> tuple[int, str, str]:  # type: ignore[no-untyped-def]
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def asked(key: str, strategy: str = "checkpoint") -> bool:
    """Does the current template ask ``key`` for ``strategy``? (Branches add questions; the lead merges them.)"""
    return any(q.id == key for q in template_questions(strategy))


# --------------------------------------------------------------------- the rules against the template
def test_every_rule_names_a_template_question_and_one_of_its_choices(catalog: Catalog) -> None:
    questions = {q.id: q for q in template_questions()}
    not_yet: set[str] = set()
    for rule in load_rules(catalog):
        assert rule.reason and len(rule.reason) < 240, rule
        for key, value in rule.settings.items():
            if key not in questions:
                not_yet.add(key)
                continue
            choices = questions[key].choices
            assert choices, f"{key}: the rules set only questions with choices"
            assert value in choices, f"{key}={value}: not among the template's choices {choices}"
    if not_yet:  # fails above for a wrong value of an existing question; skips only for missing ones
        pytest.skip(f"templates/copier.yml does not define yet: {', '.join(sorted(not_yet))}")


# ------------------------------------------------------------------------ conditions (no template)
@pytest.mark.parametrize(
    ("answers", "expected"),
    [
        # plain API, duplicates unacceptable: never repeat a call in doubt
        (PLAIN_STRICT, {"effect_kind": "plain", "plain_policy": "at-most-once"}),
        # plain API, a duplicate can be lived with: re-send, count the possible duplicates
        ({"external_effects": "plain_api", "duplicate_cost": "annoying"},
         {"effect_kind": "plain", "plain_policy": "at-least-once"}),
        ({"external_effects": "plain_api", "duplicate_cost": "harmless"},
         {"effect_kind": "plain", "plain_policy": "at-least-once"}),
        # plain API, duplicate_cost unanswered: the kind only, the policy is the template's default
        ({"external_effects": "plain_api"}, {"effect_kind": "plain"}),
        ({"external_effects": "queryable_api", "duplicate_cost": "unacceptable"}, {"effect_kind": "queryable"}),
        ({"external_effects": "idempotent_api"}, {"effect_kind": "idempotent"}),
        # no external call: nothing to say about effects
        ({"external_effects": "none", "duplicate_cost": "unacceptable"}, {}),
        # several workers: tasks in the state table, one shared PostgreSQL database
        ({"workers": "many"}, {"checkpoint_store": "table", "state_store": "postgresql"}),
        ({"workers": "one"}, {}),
        # local disk: the progress file, even with several workers (the catalog warns of that conflict)
        ({"recovery_point_store": "local_disk", "workers": "many"},
         {"checkpoint_store": "file", "state_store": "postgresql"}),
        # RabbitMQ delivers the work: the template's RabbitMQ queue input
        ({"broker": "rabbitmq"}, {"input_source": "rabbitmq"}),
        # another broker or an orchestrator holds the position: never the RabbitMQ input (an
        # Airflow task was once told to verify itself with `--set input_source=rabbitmq`)
        ({"recovery_point_store": "broker_or_orchestrator", "runner": "airflow"}, {}),
        ({"recovery_point_store": "broker_or_orchestrator", "broker": "kafka"}, {}),
        ({"recovery_point_store": "broker_or_orchestrator"}, {}),
        ({}, {}),
    ],
)  # fmt: skip
def test_conditions(catalog: Catalog, answers: dict[str, str], expected: dict[str, str]) -> None:
    got = implied(load_rules(catalog), answers)
    assert {k: s.value for k, s in got.items()} == expected
    assert all(s.reason for s in got.values())


def test_the_in_doubt_reason_says_what_happens_to_a_call(catalog: Catalog) -> None:
    reason = implied(load_rules(catalog), PLAIN_STRICT)["plain_policy"].reason
    assert "listed for a person" in reason and "never repeated" in reason and "exactly" not in reason


# ----------------------------------------------------------------- filtering by the chosen template
def test_only_what_the_strategy_s_template_asks(catalog: Catalog) -> None:
    many = {**BATCH, "workers": "many"}
    checkpoint = {s.key: s.value for s in settings_for("checkpoint", many, catalog)}
    assert checkpoint["checkpoint_store"] == "table" and checkpoint["state_store"] == "postgresql"
    retry = {s.key for s in settings_for("idempotent-retry", many, catalog)}
    assert "checkpoint_store" not in retry and "state_store" in retry  # only checkpoint asks the store kind
    # The file variant keeps no database: state_store is not asked, so not set.
    local = {s.key: s.value for s in settings_for("checkpoint", {**many, "recovery_point_store": "local_disk"}, catalog)}
    assert local == {"checkpoint_store": "file"}
    # Explicit answers count: a file store asked for by hand drops the database setting too.
    explicit = {s.key for s in settings_for("checkpoint", many, catalog, {"checkpoint_store": "file"})}
    assert "state_store" not in explicit
    assert settings_for("no-such-strategy", many, catalog) == ()


def test_event_sourcing_gets_the_store_once_its_template_asks_it(catalog: Catalog) -> None:
    got = {s.key: s.value for s in settings_for("event-sourcing", {"workers": "many"}, catalog)}
    assert got.get("state_store") == ("postgresql" if asked("state_store", "event-sourcing") else None)


def test_the_effect_kind_follows_the_answers_where_the_template_asks_it(catalog: Catalog) -> None:
    if not asked("effect_kind"):
        pytest.skip("templates/copier.yml does not define effect_kind yet")
    got = {s.key: s.value for s in settings_for("checkpoint", PLAIN_STRICT, catalog)}
    assert got["effect_kind"] == "plain" and got["plain_policy"] == "at-most-once"
    # An explicit idempotent kind: plain_policy is no longer asked, so not set.
    got = {s.key for s in settings_for("checkpoint", PLAIN_STRICT, catalog, {"effect_kind": "idempotent"})}
    assert "plain_policy" not in got


def test_the_queue_input_only_where_a_message_is_a_unit_of_work(catalog: Catalog) -> None:
    if not asked("input_source", "idempotent-retry"):
        pytest.skip("templates/copier.yml does not define input_source yet")
    broker = {"recovery_point_store": "broker_or_orchestrator", "broker": "rabbitmq"}
    assert {s.key: s.value for s in settings_for("idempotent-retry", broker, catalog)}["input_source"] == "rabbitmq"
    assert "input_source" not in {s.key for s in settings_for("stream-checkpoint", broker, catalog)}
    local = {**broker, "workers": "one"}
    assert "input_source" not in {s.key for s in settings_for("checkpoint", local, catalog, {"checkpoint_store": "file"})}


def test_a_value_the_template_does_not_offer_is_dropped(catalog_copy: Path) -> None:
    (catalog_copy / "template-settings.yaml").write_text(
        "rules:\n  - when: {workers: many}\n    set: {state_store: mysql, checkpoint_store: table}\n"
        "    reason: a value no template offers\n"
    )
    catalog = load_catalog(catalog_copy)
    assert [s.key for s in settings_for("checkpoint", {"workers": "many"}, catalog)] == ["checkpoint_store"]


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("rules: {}\n", "rules"),
        ("rules:\n  - when: {workerz: [many]}\n    set: {state_store: postgresql}\n    reason: x\n", "rules[0].when.workerz"),
        ("rules:\n  - when: {workers: [lots]}\n    set: {state_store: postgresql}\n    reason: x\n", "rules[0].when.workers"),
        ("rules:\n  - when: {workers: [many]}\n    set: {state_store: 3}\n    reason: x\n", "rules[0].set"),
        ("rules:\n  - when: {workers: [many]}\n    set: {state_store: postgresql}\n", "rules[0]"),
        ("rules:\n  - when: {workers: [many]}\n    set: {state_store: postgresql}\n    reason: ''\n", "rules[0].reason"),
    ],
)  # fmt: skip
def test_a_bad_rules_file_names_its_path_and_key(catalog_copy: Path, text: str, key: str) -> None:
    (catalog_copy / "template-settings.yaml").write_text(text)
    with pytest.raises(CatalogError, match=re.escape(f"template-settings.yaml: {key}")):
        load_rules(load_catalog(catalog_copy))


def test_explicit_answers_win() -> None:
    settings = (Setting("checkpoint_store", "table", "many workers"), Setting("state_store", "postgresql", "shared"))
    result = apply(settings, {"state_store": "sqlite", "project_name": "x"})
    assert result.data == {"state_store": "sqlite", "project_name": "x", "checkpoint_store": "table"}
    assert [s.key for s in result.applied] == ["checkpoint_store"]
    assert [(s.key, v) for s, v in result.overridden] == [("state_store", "sqlite")]
    # The same value given by hand is neither applied nor overridden.
    same = apply(settings, {"state_store": "postgresql"})
    assert same.overridden == () and [s.key for s in same.applied] == ["checkpoint_store"]


# ---------------------------------------------------------------------------------------- the CLI
@pytest.fixture
def many_file(tmp_path: Path) -> Path:
    path = tmp_path / "job.yml"
    path.write_text("work_shape: record_batch\nduration: hours\nrecovery_point_store: database\nworkers: many\n")
    return path


def test_recommend_text_lists_the_settings_and_the_next_step_carries_them(capsys, many_file: Path) -> None:  # type: ignore[no-untyped-def]
    code, out, _ = run(capsys, "recommend", "--answers", str(many_file))
    assert code == 0 and "Template settings for your answers" in out
    assert "state_store = postgresql: several workers" in out
    assert f"Next: advisor generate checkpoint ./my-job --answers {shlex.quote(str(many_file))}" in out
    # Answers given by --set: the next step spells the settings out (template defaults go without saying).
    code, out, _ = run(capsys, "recommend", *[f"--set={k}={v}" for k, v in {**BATCH, "workers": "many"}.items()])
    assert "Next: advisor generate checkpoint ./my-job --set state_store=postgresql   (or:" in out
    # No answer that implies a setting: no section, the plain command.
    code, out, _ = run(capsys, "recommend", *[f"--set={k}={v}" for k, v in BATCH.items()])
    assert "Template settings" not in out and "Next: advisor generate checkpoint ./my-job   (or:" in out


def test_recommend_json_has_the_settings_with_reasons(capsys, many_file: Path) -> None:  # type: ignore[no-untyped-def]
    code, out, _ = run(capsys, "recommend", "--answers", str(many_file), "--json")
    settings = {s["key"]: s for s in json.loads(out)["template_settings"]}
    assert code == 0 and settings["state_store"]["value"] == "postgresql" and settings["state_store"]["reason"]
    code, out, _ = run(capsys, "recommend", "--set", "duration=hours", "--json")
    assert json.loads(out)["template_settings"] == []


def recorded(dest: Path) -> dict[str, object]:
    data = yaml.safe_load((dest / ".copier-answers.yml").read_text())
    assert isinstance(data, dict)
    return data


def test_generate_applies_the_settings_and_says_why(capsys, many_file: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    dest = tmp_path / "job"
    code, out, err = run(capsys, "generate", "checkpoint", str(dest), "--answers", str(many_file))
    assert code == 0, err
    assert "template settings from your answers" in out and "state_store = postgresql: several workers" in out
    answers = recorded(dest)
    assert answers["state_store"] == "postgresql" and answers["checkpoint_store"] == "table"
    assert "psycopg" in (dest / "pyproject.toml").read_text()  # the promise is wired, not just recorded


def test_generate_explicit_set_wins_and_no_settings_keeps_the_defaults(capsys, many_file: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    code, out, err = run(capsys, "generate", "checkpoint", str(tmp_path / "a"), "--answers", str(many_file),
                         "--set", "state_store=sqlite")  # fmt: skip
    assert code == 0, err
    assert "state_store = sqlite (yours; your answers suggest postgresql" in out
    assert recorded(tmp_path / "a")["state_store"] == "sqlite"
    code, out, err = run(capsys, "generate", "checkpoint", str(tmp_path / "b"), "--answers", str(many_file),
                         "--no-settings")  # fmt: skip
    assert code == 0 and "template settings" not in out and recorded(tmp_path / "b")["state_store"] == "sqlite"


def test_generate_with_a_mixed_file_and_the_effect_kind(capsys, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """One file: the advisor's answers, template answers and a review's context, side by side."""
    path = tmp_path / "job.yml"
    path.write_text("project_name: mailer\ncontext: nightly mails\nexternal_effects: plain_api\n"
                    "duplicate_cost: unacceptable\nrecovery_point_store: local_disk\n")  # fmt: skip
    code, out, err = run(capsys, "generate", "checkpoint", str(tmp_path / "m"), "--answers", str(path))
    assert code == 0, err
    answers = recorded(tmp_path / "m")
    assert answers["package_name"] == "mailer" and answers["checkpoint_store"] == "file"
    if asked("effect_kind"):
        assert answers["effect_kind"] == "plain" and answers["plain_policy"] == "at-most-once"
        assert "plain_policy = at-most-once: " in out


def test_generate_refuses_a_bad_answer_in_one_line(capsys, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "job.yml"
    path.write_text("workers: lots\n")
    code, out, err = run(capsys, "generate", "checkpoint", str(tmp_path / "x"), "--answers", str(path))
    assert code == 2 and "workers" in err and "lots" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "x").exists()


def test_a_catalog_without_a_rules_file_gives_no_settings(capsys, catalog_copy: Path, many_file: Path) -> None:  # type: ignore[no-untyped-def]
    (catalog_copy / "template-settings.yaml").unlink()
    code, out, _ = run(capsys, "--catalog", str(catalog_copy), "recommend", "--answers", str(many_file), "--json")
    assert code == 0 and json.loads(out)["template_settings"] == []


def test_every_setting_is_in_the_user_guide(catalog: Catalog) -> None:
    guide = (Path(__file__).resolve().parents[1] / "docs" / "user-guide.md").read_text()
    section = guide.split("### Template settings from your answers", 1)[1]
    for rule in load_rules(catalog):
        for qid, values in rule.when.items():
            assert f"`{qid}: {values[0]}`" in section, (qid, values)
        for key, value in rule.settings.items():
            assert f"`{key}={value}`" in section, (key, value)


def test_a_queue_project_s_next_steps_name_the_broker_instead_of_the_demo() -> None:
    """input_source=rabbitmq (set by the broker answer): `run` consumes the queue, so the steps start a local
    broker for it (`make broker`) and stop it at the end."""
    from advisor.scaffold.generation import next_commands

    queue = next_commands("payments", "./payments", "idempotent-retry", "rabbitmq")
    assert any(line.startswith("make broker && export AMQP_URL=$(cat .broker/amqp_url)") for line in queue)
    assert not any("submit-demo" in x for x in queue)
    assert any(line.startswith("python -m payments run ") for line in queue)
    # The local node started by the steps is stopped by the last of them (tests/test_newcomer.py walks them).
    assert queue[-1].startswith("make broker-stop") and queue.index(queue[-1]) > queue.index(
        next(x for x in queue if x.startswith("make test")))
    cli = next_commands("payments", "./payments", "idempotent-retry")
    assert any("submit-demo" in line for line in cli) and not any("AMQP_URL" in line for line in cli)


def test_the_review_generates_the_reference_with_the_settings(catalog: Catalog) -> None:
    from advisor.review.judge import decision_record

    many = decision_record({**BATCH, "workers": "many"}, catalog)
    assert "`advisor generate checkpoint ./continuity-job --set state_store=postgresql`" in many
    assert "`state_store=postgresql` — several workers" in many  # the build plan says why
    if not asked("effect_kind"):
        pytest.skip("templates/copier.yml does not define effect_kind yet")
    plain = decision_record({**BATCH, **PLAIN_STRICT}, catalog)
    assert "--set effect_kind=plain --set plain_policy=at-most-once`" in plain
