"""The design under review as input: `context:` and `current:` in answers files, the review flags,
and the catalog's `controls:` sections. Bad input exits 2 with the valid choices; nothing is written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from advisor.cli import main
from advisor.errors import AnswersError, CatalogError
from advisor.model.answers import (
    CurrentDesign,
    dump_answers,
    load_answers_file,
    load_review_file,
    review_input,
)
from advisor.model.loader import load_catalog


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


REVIEW_FILE = """\
context: |
  The nightly sync was redeployed mid-run; two workers both processed batch 41.
duration: hours
work_shape: record_batch
workers: many
current:
  strategy: checkpoint
  controls:
    optimistic-progress-update: no        # YAML reads this as false
    results-and-progress-together: yes    # ... and this as true
    sigterm-within-grace: unknown
"""


@pytest.fixture
def review_file(tmp_path: Path) -> Path:
    path = tmp_path / "job.yml"
    path.write_text(REVIEW_FILE)
    return path


# --- answers files ------------------------------------------------------------------------


def test_an_answers_file_carries_context_and_the_current_design(catalog, review_file):
    given = load_review_file(review_file, catalog)
    assert given.answers == {"duration": "hours", "work_shape": "record_batch", "workers": "many"}
    assert given.context.startswith("The nightly sync was redeployed")
    assert given.current == CurrentDesign(
        "checkpoint",
        {"results-and-progress-together": "yes", "optimistic-progress-update": "no", "sigterm-within-grace": "unknown"},
    )
    assert given.current.status("stale-tasks-reclaimed") == "unknown"  # not mentioned = unknown


def test_recommend_reads_the_same_file_and_old_files_still_work(catalog, review_file, tmp_path, capsys):
    assert load_answers_file(review_file, catalog) == {"duration": "hours", "work_shape": "record_batch",
                                                       "workers": "many"}  # fmt: skip
    code, out, _ = run(capsys, "recommend", "--answers", str(review_file), "--json")
    assert code == 0 and json.loads(out)["top"] == "checkpoint"
    old = tmp_path / "old.yml"
    old.write_text("duration: hours\nwork_shape: record_batch\n")
    assert load_review_file(old, catalog).current is None


def test_current_may_name_just_the_strategy(catalog, tmp_path):
    path = tmp_path / "a.yml"
    path.write_text("current: state-machine\n")
    assert load_review_file(path, catalog).current == CurrentDesign("state-machine")


@pytest.mark.parametrize(
    "text,expected",
    [
        ("current: {strategy: saga}\n", "Valid: idempotent-retry, checkpoint"),  # unknown strategy
        ("current: {strategy: checkpoint, controls: {lock: no}}\n", "Valid controls: results-and-progress-together"),
        ("current: {strategy: checkpoint, controls: {stale-tasks-reclaimed: maybe}}\n", "Valid values: yes, no, unknown"),
        ("current: {strategy: checkpoint, control: {}}\n", "Valid keys: strategy, controls"),  # a typo'd key
        ("current: {strategy: checkpoint, controls: [a, b]}\n", "mapping of `control_id: yes|no|unknown`"),
        ("current: [checkpoint]\n", "expected `strategy: ID`"),
        ("context: 42\n", "context: expected a text"),
    ],
)
def test_bad_current_input_names_the_valid_choices(catalog, tmp_path, text, expected):
    path = tmp_path / "a.yml"
    path.write_text(text)
    with pytest.raises(AnswersError, match=expected.replace("|", r"\|").replace("[", r"\[")):
        load_review_file(path, catalog)


def test_dump_answers_round_trips_context_and_current(catalog, review_file, tmp_path):
    given = load_review_file(review_file, catalog)
    text = dump_answers(given.answers, catalog, context=given.context, current=given.current)
    again = tmp_path / "again.yml"
    again.write_text(text)
    reloaded = load_review_file(again, catalog)
    assert reloaded.answers == given.answers and reloaded.context == given.context
    assert reloaded.current is not None and dict(reloaded.current.controls) == {
        c.id: given.current.status(c.id) for c in catalog.strategy("checkpoint").controls
    }


# --- flags ----------------------------------------------------------------------------------


def test_flags_win_over_the_file(catalog, review_file):
    given = review_input(catalog, answers_file=review_file, control_flags=["optimistic-progress-update=yes"],
                         context="In our words.")  # fmt: skip
    assert given.current.status("optimistic-progress-update") == "yes"
    assert given.current.status("results-and-progress-together") == "yes"  # kept from the file
    assert given.context == "In our words."
    other = review_input(catalog, answers_file=review_file, current="state-machine")
    assert other.current == CurrentDesign("state-machine")  # the file's controls belonged to checkpoint


def test_control_flags_need_a_current_strategy(catalog):
    with pytest.raises(AnswersError, match="--current"):
        review_input(catalog, control_flags=["sigterm-within-grace=no"])


def test_review_cli_leads_with_the_missing_control(capsys, tmp_path, review_file):
    out_file = tmp_path / "decision.md"
    code, out, _ = run(capsys, "review", "--answers", str(review_file), "--out", str(out_file))
    assert code == 0 and "missing: optimistic-progress-update" in out
    text = out_file.read_text()
    assert "The nightly sync was redeployed mid-run" in text
    first = next(line for line in text.splitlines() if line.startswith("1. "))
    assert "`optimistic-progress-update`" in first and first.startswith("1. **Missing:")


def test_review_cli_flags(capsys, tmp_path):
    context = tmp_path / "incident.txt"
    context.write_text("Webhooks redelivered after a timeout charged 14 customers twice.\n")
    out_file = tmp_path / "d.md"
    code, out, err = run(
        capsys, "review", "--set", "work_shape=single_task", "--set", "duration=seconds",
        "--set", "duplicate_cost=unacceptable", "--current", "idempotent-retry",
        "--control", "key-from-input=no", "--control", "unique-key-with-effect=yes",
        "--context-file", str(context), "--out", str(out_file),
    )  # fmt: skip
    assert code == 0, err
    text = out_file.read_text()
    assert "charged 14 customers twice" in text
    code, _, err = run(capsys, "review", "--context", f"@{context}", "--out", str(tmp_path / "e.md"))
    assert code == 0 and "charged 14 customers twice" in (tmp_path / "e.md").read_text()
    assert "1. **Missing: Is the key derived from the input" in text


@pytest.mark.parametrize(
    "argv,expected",
    [
        (["--current", "saga"], "idempotent-retry"),
        (["--current", "checkpoint", "--control", "lock=no"], "optimistic-progress-update"),
        (["--current", "checkpoint", "--control", "sigterm-within-grace=maybe"], "yes, no, unknown"),
        (["--current", "checkpoint", "--control", "sigterm-within-grace"], "CONTROL=yes|no|unknown"),
        (["--control", "sigterm-within-grace=no"], "--current"),
        (["--context", "  "], "--context"),
        (["--context-file", "/no/such/file.txt"], "cannot be read"),
    ],
)
def test_bad_review_flags_exit_2_and_write_nothing(capsys, tmp_path, argv, expected):
    out_file = tmp_path / "d.md"
    code, _, err = run(capsys, "review", *argv, "--out", str(out_file))
    assert code == 2 and expected in err and "Traceback" not in err
    assert not out_file.exists()


def test_bad_current_in_a_file_exits_2(capsys, tmp_path):
    path = tmp_path / "a.yml"
    path.write_text("current: {strategy: checkpoint, controls: {lock: no}}\n")
    out_file = tmp_path / "d.md"
    code, _, err = run(capsys, "review", "--answers", str(path), "--out", str(out_file))
    assert code == 2 and "Valid controls:" in err and not out_file.exists()
    code, _, err = run(capsys, "recommend", "--answers", str(path))  # recommend checks it too
    assert code == 2 and "lock" in err


def test_explain_lists_the_controls(capsys):
    code, out, _ = run(capsys, "explain", "checkpoint")
    assert code == 0 and "Essential controls" in out and "optimistic-progress-update" in out
    code, out, _ = run(capsys, "explain", "checkpoint", "--json")
    assert "optimistic-progress-update" in {c["id"] for c in json.loads(out)["controls"]}


# --- the catalog's controls -----------------------------------------------------------------------


def test_every_strategy_declares_its_essential_controls(catalog):
    for s in catalog.strategies:
        assert len(s.controls) >= 4, s.id
        for c in s.controls:
            assert c.question.endswith("?"), (s.id, c.id)
            assert c.reference is None or c.reference.startswith("https://"), (s.id, c.id)
    shared = {"sigterm-within-grace"}
    for s in catalog.strategies:
        assert shared <= {c.id for c in s.controls}, s.id  # the same control keeps its id across strategies


def _break(catalog_copy: Path, old: str, new: str) -> None:
    path = catalog_copy / "checkpoint.yaml"
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


@pytest.mark.parametrize(
    "old,new,control,key,reason",
    [
        ("  - id: stale-tasks-reclaimed\n", "  - id: intent-before-call\n", "stale-tasks-reclaimed", "id",
         "duplicate control id"),
        ("  - id: stale-tasks-reclaimed\n", "  - id: Stale Tasks\n", "stale-tasks-reclaimed", "id", "not a control id"),
        ("    reference: https://www.postgresql.org", "    reference: www.postgresql.org", "optimistic-progress-update",
         "reference", "public URL"),
        ("    covers: [zombie-tasks]\n", "    covers: [ghosts]\n", "stale-tasks-reclaimed", "covers[0]", "not a pitfall"),
        ("    applies_when: {workers: [many]}\n", "    applies_when: {workers: [dozens]}\n", "optimistic-progress-update",
         "applies_when.workers", "unknown value"),
        ("  - id: stale-tasks-reclaimed\n", "  - id: stale-tasks-reclaimed\n    owner: ops\n", "stale-tasks-reclaimed",
         "owner", "unknown key"),
    ],
)  # fmt: skip
def test_a_broken_control_names_file_key_and_reason(catalog, catalog_copy, old, new, control, key, reason):
    index = [c.id for c in catalog.strategy("checkpoint").controls].index(control)
    _break(catalog_copy, old, new)
    with pytest.raises(CatalogError) as info:
        load_catalog(catalog_copy)
    assert info.value.path.endswith("checkpoint.yaml") and reason in info.value.reason
    assert info.value.key == f"controls[{index}].{key}"


def test_a_control_needs_its_why(catalog_copy):
    path = catalog_copy / "checkpoint.yaml"
    data = yaml.safe_load(path.read_text())
    del data["controls"][0]["why"]
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(CatalogError, match=r"controls\[0\]\.why: is required"):
        load_catalog(catalog_copy)


# --- docs kept true ---------------------------------------------------------------------------------

GUIDE = Path(__file__).resolve().parents[1] / "docs" / "user-guide.md"


def test_the_user_guides_answers_file_example_loads(catalog, tmp_path):
    import re

    blocks = re.findall(r"```yaml\n(# job\.yml.*?)```", GUIDE.read_text(), re.S)
    assert len(blocks) == 2, "the user guide shows job.yml and its review continuation"
    path = tmp_path / "job.yml"
    path.write_text("".join(blocks))
    given = load_review_file(path, catalog)
    assert given.context and given.current is not None and given.current.status("optimistic-progress-update") == "no"


def test_every_review_flag_is_in_the_user_guide():
    from advisor.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    review = sub.choices["review"]
    guide = GUIDE.read_text().split("## `advisor review`", 1)[1].split("\n## ", 1)[0]
    for action in review._actions:
        for flag in action.option_strings:
            if flag.startswith("--") and flag != "--help":
                assert f"`{flag}" in guide, flag


def test_every_control_the_user_guide_names_exists(catalog):
    import re

    ids = {c.id for s in catalog.strategies for c in s.controls}
    named = set(re.findall(r"`([a-z]+(?:-[a-z0-9]+)+)`", GUIDE.read_text())) - set(catalog.strategy_ids)
    named = {n for n in named if not n.startswith(("advisor", "context-file", "continuity-"))}
    assert named and named <= ids, named - ids
