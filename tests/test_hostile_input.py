"""Hostile and careless input to the advisor: every file it reads is bounded (advisor/safe_read.py)
and no password it is handed comes back out (advisor/redact.py).

Property tests (Hypothesis) feed arbitrary bytes and arbitrary YAML/JSON structures to each parser:
the only failure allowed is the project's own error (one line, exit 2 in the CLI), and valid
input round-trips. Examples are bounded so that the whole file runs in a few seconds.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from advisor import safe_read
from advisor.cli import main
from advisor.errors import AdvisorError, CatalogError, InputError
from advisor.model.answers import load_review_file
from advisor.model.parsed_cache import parse_catalog_file
from advisor.probe.report import load_report
from advisor.redact import redact

PASSWORD = "s3cretpw"
URL = f"postgresql://bob:{PASSWORD}@127.0.0.1:1/db"

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

# JSON-like values, the shape of every file the advisor reads.
scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6), st.text(max_size=20))
documents = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=25,
)


def one_line_exit_2(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    """Run the CLI in-process: exit 2, one line on stderr, no traceback; return that line."""
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 2, (code, out, err)
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


def deep_yaml(n: int = 5000) -> str:
    return "a: " + "[" * n + "]" * n + "\n"


def deep_block_yaml(n: int = 200) -> str:
    return "a:\n" + "".join("  " * i + "- \n" for i in range(1, n))


BILLION_LAUGHS = "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 9)}]\n" for i in range(8)
)

# Each case: the file's bytes and a word the one-line error must contain.
HOSTILE = [
    (deep_yaml().encode(), "YAML"),  # 5,000 deep in flow style: libyaml's own limit
    (deep_block_yaml().encode(), "nested more than"),  # 200 deep in block style: ours
    (BILLION_LAUGHS.encode(), "aliases"),  # a billion laughs
    (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "UTF-8"),  # binary
    ("duration: hours\ncontext: caf\xe9\n".encode("latin-1"), "line 2"),  # another encoding
    (b"duration: hours\x00\n", "NUL"),  # a NUL byte in otherwise valid text
    (b"x: " + b"a" * (safe_read.MAX_YAML_BYTES + 10), "too large"),  # over the size limit
    (b"duration: [hours\n", "not valid YAML"),  # malformed
]


# ---- the CLI: one line, exit 2, nothing written ------------------------------------
@pytest.mark.parametrize("content, word", HOSTILE, ids=[w for _, w in HOSTILE])
@pytest.mark.parametrize("command", ["recommend", "review"])
def test_hostile_answers_files_exit_2_with_one_line(tmp_path, capsys, content, word, command):
    bad = tmp_path / "answers.yml"
    bad.write_bytes(content)
    out = tmp_path / "decision.md"
    argv = [command, "--answers", str(bad)] + (["--out", str(out)] if command == "review" else [])
    err = one_line_exit_2(capsys, argv)
    assert str(bad) in err and word in err
    assert not out.exists()  # nothing half written


@pytest.mark.parametrize("content, word", HOSTILE[:4], ids=[w for _, w in HOSTILE[:4]])
def test_hostile_template_answers_exit_2_and_generate_nothing(tmp_path, capsys, content, word):
    bad = tmp_path / "template.yml"
    bad.write_bytes(content)
    dest = tmp_path / "job"
    err = one_line_exit_2(capsys, ["generate", "checkpoint", str(dest), "--answers", str(bad)])
    assert str(bad) in err and word in err and not dest.exists()


def test_hostile_context_file_exit_2(tmp_path, capsys):
    bad = tmp_path / "incident.txt"
    bad.write_bytes(b"\xff\xfe" + "the job died".encode("utf-16-le"))
    err = one_line_exit_2(capsys, ["review", "--set", "duration=hours", "--context-file", str(bad),
                                   "--out", str(tmp_path / "d.md")])
    assert "UTF-8" in err and not (tmp_path / "d.md").exists()


@pytest.mark.parametrize("content, word", [
    (b"[" * 100_000 + b"]" * 100_000, "nested more than"),  # RecursionError inside json.loads
    (('{"kind": "advisor-probe", "x": ' + "[" * 40 + "1" + "]" * 40 + "}").encode(),
     "nested more than"),  # parses, but deeper than the limit
    (b"\x00\x01\x02", "NUL"),
    (b'{"kind": "advisor-probe"', "not valid JSON"),
])
def test_hostile_probe_reports_exit_2(tmp_path, capsys, content, word):
    bad = tmp_path / "probe.json"
    bad.write_bytes(content)
    err = one_line_exit_2(capsys, ["review", "--set", "duration=hours", "--probe", str(bad),
                                   "--out", str(tmp_path / "d.md")])
    assert str(bad) in err and word in err and not (tmp_path / "d.md").exists()


def test_the_issue_reproduction_in_a_subprocess(tmp_path):
    """The report's own case, as a user runs it: 5,000 deep, one line, exit 2 (was 1,000 lines, exit 1)."""
    bad = tmp_path / "deep.yml"
    bad.write_text(deep_yaml())
    done = subprocess.run([sys.executable, "-m", "advisor", "recommend", "--answers", str(bad)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr


def test_catalog_file_too_deep_or_with_aliases_names_file_and_line(catalog_copy):
    path = catalog_copy / "checkpoint.yaml"
    path.write_text(path.read_text() + "\nextra: &x [1]\nmore: *x\n")
    with pytest.raises(CatalogError) as info:
        parse_catalog_file(path, path.read_text())
    assert info.value.path == str(path) and info.value.key.startswith("line ")
    with pytest.raises(CatalogError, match="nested more than"):
        parse_catalog_file(path, deep_block_yaml())


# ---- properties ----------------------------------------------------------------------
@FAST
@given(raw=st.binary(max_size=300))
def test_arbitrary_bytes_never_escape_the_answers_loader(tmp_path_factory, catalog, raw):
    path = tmp_path_factory.mktemp("p") / "a.yml"
    path.write_bytes(raw)
    try:
        load_review_file(path, catalog)
    except AdvisorError as exc:
        assert "\n" not in str(exc).strip() or "YAML" in str(exc)


@FAST
@given(raw=st.binary(max_size=300))
def test_arbitrary_bytes_never_escape_the_probe_report_loader(tmp_path_factory, raw):
    path = tmp_path_factory.mktemp("p") / "r.json"
    path.write_bytes(raw)
    try:
        load_report(path)
    except AdvisorError:
        pass


@FAST
@given(doc=documents)
def test_yaml_documents_round_trip_or_are_refused_cleanly(doc):
    text = yaml.safe_dump(doc, allow_unicode=True)
    try:
        # Bounded parsing reads exactly what PyYAML reads (PyYAML's own dump/load round trip
        # loses a few control characters such as U+0085, hence the comparison with safe_load).
        assert safe_read.parse_yaml(text, "x.yml", "test file") == yaml.safe_load(text)
    except InputError:
        assert safe_read.depth(doc) > safe_read.MAX_DEPTH


@FAST
@given(doc=documents, wrap=st.integers(0, 60))
def test_json_documents_round_trip_below_the_depth_limit(doc, wrap):
    for _ in range(wrap):
        doc = [doc]
    text = json.dumps(doc)
    if safe_read.depth(doc) > safe_read.MAX_DEPTH:
        with pytest.raises(InputError, match="nested more than"):
            safe_read.parse_json(text, "x.json", "test file")
    else:
        assert safe_read.parse_json(text, "x.json", "test file") == doc


@FAST
@given(doc=documents)
def test_arbitrary_yaml_structures_in_an_answers_file_give_only_answers_errors(tmp_path_factory, catalog, doc):
    path = tmp_path_factory.mktemp("p") / "a.yml"
    path.write_text(yaml.safe_dump({"duration": doc, "current": doc, "context": doc}))
    try:
        load_review_file(path, catalog)
    except AdvisorError:
        pass


@FAST
@given(answers=st.fixed_dictionaries({}, optional={
    "duration": st.sampled_from(["seconds", "minutes", "hours"]),
    "workers": st.sampled_from(["one", "many"]),
    "audit": st.sampled_from(["none", "required"]),
}), context=st.one_of(st.none(), st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs", "Cc"]),
                                         min_size=1, max_size=40).filter(str.strip)))
def test_valid_answers_files_round_trip(tmp_path_factory, catalog, answers, context):
    from advisor.model.answers import dump_answers

    path = tmp_path_factory.mktemp("p") / "a.yml"
    path.write_text(dump_answers(answers, catalog, context=context), encoding="utf-8")
    loaded = load_review_file(path, catalog)
    assert loaded.answers == answers
    assert loaded.context == (context.strip() if context else None)


# ---- secrets -------------------------------------------------------------------------
@pytest.mark.parametrize("text, shown", [
    (f"cannot connect to {URL}: refused", "postgresql://bob:***@127.0.0.1:1/db"),
    ("amqps://guest:pa55@broker:5671/vh", "amqps://guest:***@broker:5671/vh"),
    ("amqp://guest:pa55@broker/vh", "amqp://guest:***@broker/vh"),
    ("host=db user=bob password=pa55 dbname=jobs", "password=***"),
    ("postgresql://db/jobs?sslmode=verify-full&password=pa55", "password=***"),
    ("postgresql://bob:p@55@db/jobs", "postgresql://bob:***@db/jobs"),  # an unescaped @ in the password
])
def test_redact_hides_the_password_and_keeps_the_rest(text, shown):
    assert shown in redact(text) and "pa55" not in redact(text) and PASSWORD not in redact(text)


def test_redact_leaves_urls_without_password_alone():
    url = "postgresql://bob@db/jobs?sslmode=verify-full&sslrootcert=/etc/ca.pem"
    assert redact(url) == url


def test_advisor_commands_never_echo_a_planted_password(tmp_path, capsys):
    answers = tmp_path / "answers.yml"
    answers.write_text(f"duration: hours\ncontext: 'the job lost its connection to {URL}'\n")
    out = tmp_path / "decision.md"
    assert main(["review", "--answers", str(answers), "--out", str(out)]) == 0
    seen = capsys.readouterr()
    record = out.read_text()
    assert "postgresql://bob:***@127.0.0.1:1/db" in record
    # An invalid value, a --set flag, a bad --current: each error quotes what was typed.
    for argv in (["recommend", "--set", f"duration={URL}"],
                 ["review", "--set", "duration=hours", "--current", URL, "--out", str(tmp_path / "x.md")],
                 ["generate", "checkpoint", str(tmp_path / "job"), "--set", f"project_name={URL}"]):
        main(argv)
        more = capsys.readouterr()
        seen = (seen[0] + more.out, seen[1] + more.err)
    bad = tmp_path / "bad.yml"
    bad.write_text(f"duration: {URL}\n")
    main(["recommend", "--answers", str(bad)])
    more = capsys.readouterr()
    assert PASSWORD not in record + seen[0] + seen[1] + more.out + more.err
    assert "***" in more.err


def test_probe_reports_and_their_evidence_never_carry_the_password(tmp_path, capsys):
    from advisor.probe.report import build_report, evidence_lines, summary

    run = f"DATABASE_URL={URL} python etl.py"
    options = {"run": run, "verify": f"psql {URL} -c 'select 1'", "progress": None, "reset": None, "cwd": "/srv",
               "kills": 1, "sigterm": False, "grace_s": 30.0, "min_s": 1.0, "max_s": 2.0, "seed": 1,
               "timeout_s": 60.0, "baseline": False, "sample_s": 0.2}
    report = build_report(options, date="2026-11-30T10:00:00Z", baseline=None,
                          runs=[{"n": 1, "ended": "killed"}, {"n": 2, "ended": "exited", "exit_code": 0}],
                          kills=[{"n": 1, "signal": "SIGKILL", "after_s": 1.0, "exit_code": -9, "recovery_ms": 5.0}],
                          outcome="finished", wall_s=3.0, progress=None, progress_errors=[],
                          verify={"command": options["verify"], "exit_code": 1, "passed": False,
                                  "tail": [f"could not connect to {URL}"]})
    assert PASSWORD not in json.dumps(report) + summary(report) + "\n".join(evidence_lines(report))
    # A report written before redaction existed: loading it redacts, so the decision record does too.
    old = {**report, "options": {**options}, "verify": {**report["verify"], "tail": [URL]}}
    path = tmp_path / "probe.json"
    path.write_text(json.dumps(old))
    out = tmp_path / "decision.md"
    assert main(["review", "--set", "duration=hours", "--probe", str(path), "--out", str(out)]) == 0
    assert PASSWORD not in out.read_text() + "".join(capsys.readouterr())


def test_advisor_drill_refuses_a_hostile_copier_answers_file(tmp_path, capsys):
    (tmp_path / ".copier-answers.yml").write_text(deep_block_yaml())
    err = one_line_exit_2(capsys, ["drill", str(tmp_path)])
    assert ".copier-answers.yml" in err and "nested more than" in err
