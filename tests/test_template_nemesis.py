"""The drill's fault schedule end to end, as a user meets it: a planted bug makes the default drill
fail, the failure is shrunk to a smaller schedule, and the one command printed for it reruns that
schedule from a fresh shell and fails the same way.

Every strategy's own suite (test_template_generated.py) runs the generated tests/test_nemesis.py:
a default drill mixing every fault kind that applies, seeded and replayable. This file adds what a
generated suite cannot do to itself: plant a bug and follow the printed next step.
"""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path

import pytest

from advisor import scaffold
from test_template_generated import clean_env, generated_python, install, shared_root  # noqa: F401 (fixtures)

pytestmark = pytest.mark.slow

#: The bug: a submission's dedupe turned into an upsert, so a redelivered submission queues its work
#: twice (tests/mutations.yaml: nem-ck-submissions-upsert). Only the resubmit-same fault shows it.
DEDUPE = 'ON CONFLICT (correlation_id) DO NOTHING"""'
UPSERT = 'ON CONFLICT (correlation_id) DO UPDATE SET records = excluded.records"""'


def test_a_failing_drill_is_shrunk_to_one_command_that_fails_the_same_way(
        tmp_path: Path, generated_python: Path, shared_root: Path) -> None:  # noqa: F811
    generated = scaffold.generate("checkpoint", tmp_path / "job", {"project_name": "Shrink Probe Job"})
    correlation = generated.dest / "src" / generated.package / "runtime" / "correlation.py"
    text = correlation.read_text(encoding="utf-8")
    assert text.count(DEDUPE) == 1, "the template drifted: update DEDUPE"
    correlation.write_text(text.replace(DEDUPE, UPSERT), encoding="utf-8")
    install(generated_python, generated.dest, shared_root)

    drill = subprocess.run([str(generated_python), "-m", generated.package, "drill", "--records", "400", "--kills",
                            "3", "--seed", "3", "--json", "--data-dir", str(tmp_path / "drill")],
                           cwd=tmp_path, capture_output=True, text=True, timeout=900, env=clean_env())
    report = json.loads(drill.stdout)
    assert drill.returncode == 1 and report["ok"] is False, drill.stderr[-2000:]
    checks = {f["check"] for f in report["failures"]}
    assert {"resubmission", "duplicate_effects"} <= checks, report["failures"]
    assert "looking for a smaller failing schedule" in drill.stderr  # said before the extra drills

    shrunk = report["shrunk"]
    assert shrunk["check"] in checks and shrunk["tries"] >= 1, shrunk
    assert shrunk["records"] <= 400 and shrunk["events"] < shrunk["from_events"], shrunk
    assert shrunk["records"] < 400 or shrunk["events"] <= 2, shrunk  # smaller in work or in faults
    minimal = json.loads(Path(shrunk["file"]).read_text(encoding="utf-8"))
    assert minimal["records"] == shrunk["records"] and len(minimal["events"]) == shrunk["events"]
    assert any(e["kind"] == "resubmit-same" for e in minimal["events"]), minimal["events"]

    # The printed next step, in a fresh shell elsewhere: it fails again, with the same check.
    command = shrunk["command"]
    assert command.split()[1:4] == ["-m", generated.package, "drill"] and "--replay" in command, command
    assert shlex.split(command)[0] == str(generated_python)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    again = subprocess.run(["bash", "-c", command], cwd=elsewhere, capture_output=True, text=True, timeout=600,
                           env=clean_env())
    assert again.returncode == 1, again.stdout[-2000:] + again.stderr[-2000:]
    assert f"FAILED: {shrunk['check']}: " in again.stdout, again.stdout[-2000:]
    assert "rerun this schedule: " in again.stdout  # a replay is not shrunk again; it says how to rerun
    assert list((elsewhere / "data").glob("drill-*")), "the replay wrote its drill under ./data"
