"""Plain calls, at most once, after a drill with kills: many calls in doubt. The drill's text says why
that passes and prints the commands that settle them; those commands, followed from a fresh shell
elsewhere, settle every call (`reconcile --from-export`) and send the ones that never arrived (`run`).
`reconcile --file IDS --applied|--not-applied` answers a list at once, all or nothing; bad input is
one line and exit 2."""

from __future__ import annotations

import json
import shlex
import sqlite3
import subprocess
from pathlib import Path

import pytest

from advisor import scaffold
from test_template_generated import clean_env, generated_python, install, shared_root  # noqa: F401 (fixtures)

pytestmark = pytest.mark.slow


def test_calls_in_doubt_settled_in_bulk(tmp_path: Path, generated_python: Path, shared_root: Path) -> None:  # noqa: F811
    generated = scaffold.generate("checkpoint", tmp_path / "payouts", {
        "project_name": "payouts", "effect_kind": "plain", "plain_policy": "at-most-once"})
    install(generated_python, generated.dest, shared_root)
    py, pkg = str(generated_python), generated.package

    def cli(*args: str, cwd: Path = tmp_path) -> subprocess.CompletedProcess[str]:
        return subprocess.run([py, "-m", pkg, *args], cwd=cwd, capture_output=True, text=True, timeout=600,
                              env=clean_env())

    # --no-reconcile: the drill's own person would answer every call in doubt before this test can
    drill = cli("drill", "--records", "600", "--kills", "3", "--seed", "1", "--no-reconcile",
                "--data-dir", str(tmp_path / "drill"))
    assert drill.returncode == 0, drill.stdout[-3000:] + drill.stderr[-2000:]
    out = drill.stdout
    data = Path(next(line for line in out.splitlines() if line.startswith("data: ")).split(": ", 1)[1])
    listing = json.loads(cli("reconcile", "--json", "--data-dir", str(data)).stdout)
    doubt = [c["id"] for c in listing["calls"] if c["status"] == "in_doubt"]
    assert len(doubt) >= 10, out  # the seeded kills and timeouts leave calls in doubt
    line = next(x for x in out.splitlines() if "allowed by at-most-once" in x)
    assert line.startswith(f"{len(doubt)} call(s) in doubt, allowed by at-most-once"), line
    settle = line.split("settle them against the service's log with: ", 1)[1]
    send = next(x for x in out.splitlines() if x.startswith("then send the ones that never arrived: ")).split(": ", 1)[1]

    # --file: five answered at once, as a person who checked them with the provider (they were applied:
    # a call in doubt may also be one that never went out); bad inputs change nothing.
    conn = sqlite3.connect(data / "external.db")
    applied = set(conn.execute("SELECT record_id, step FROM effects").fetchall())
    conn.close()
    checked = [c["id"] for c in listing["calls"] if c["status"] == "in_doubt" and (c["record_id"], c["step"]) in applied]
    assert len(checked) >= 5, listing
    ids = tmp_path / "checked.txt"
    ids.write_text("# checked with the provider\n" + "\n".join(checked[:5]) + "\n\n")
    for bad, says in [(["--file", str(ids)], "needs --applied or --not-applied"),
                      (["--applied"], "needs the call's ID"),
                      (["--file", str(tmp_path / "none.txt"), "--applied"], "no such file"),
                      (["--from-export", str(tmp_path / "none.txt")], "no such file")]:
        result = cli("reconcile", *bad, "--data-dir", str(data))
        assert result.returncode == 2 and result.stderr.count("\n") == 1, (bad, result.stderr)
        assert says in result.stderr and "Traceback" not in result.stderr, (bad, result.stderr)
    unknown = tmp_path / "unknown.txt"
    unknown.write_text(doubt[0] + "\nnot-a-call\n")
    result = cli("reconcile", "--file", str(unknown), "--not-applied", "--data-dir", str(data))
    assert result.returncode == 2 and "1 of 2 id(s) are not calls in doubt ('not-a-call')" in result.stderr
    assert "nothing was marked" in result.stderr
    result = cli("reconcile", "--file", str(ids), "--applied", "--data-dir", str(data))
    assert result.returncode == 0 and result.stdout.strip() == \
        "settled 5 call(s): 5 marked applied: it is never sent again", result.stdout + result.stderr

    # The printed commands, from a fresh shell elsewhere: every remaining call settled by the
    # service's log, then the ones that never arrived sent; nothing left in doubt, nothing doubled.
    assert shlex.split(settle)[:3] == [py, "-m", pkg] and "--from-export" in settle, settle
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    settled = subprocess.run(["bash", "-c", settle], cwd=elsewhere, capture_output=True, text=True, timeout=300,
                             env=clean_env())
    assert settled.returncode == 0 and f"settled {len(doubt) - 5} call(s)" in settled.stdout, settled
    sent = subprocess.run(["bash", "-c", send], cwd=elsewhere, capture_output=True, text=True, timeout=300,
                          env=clean_env())
    assert sent.returncode == 0 and "run done:" in sent.stdout, sent
    after = json.loads(cli("reconcile", "--json", "--data-dir", str(data)).stdout)
    assert after["in_doubt"] == 0 and after["calls"] == [], after
    conn = sqlite3.connect(data / "external.db")
    twice = conn.execute("SELECT COUNT(*) FROM (SELECT record_id FROM effects GROUP BY record_id, step "
                         "HAVING COUNT(*) > 1)").fetchone()[0]
    records = len(json.loads((data / "drill-input.json").read_text()))  # 600 and what the drill added
    missing = records - conn.execute("SELECT COUNT(DISTINCT record_id) FROM effects").fetchone()[0]
    conn.close()
    assert twice == 0 and missing == 0, (twice, missing)

    # An export as JSON Lines is read too (nothing left to settle now).
    export = tmp_path / "export.jsonl"
    export.write_text(json.dumps({"id": doubt[0]}) + "\n" + json.dumps({"record_id": "r0000001"}) + "\n")
    again = cli("reconcile", "--from-export", str(export), "--data-dir", str(data))
    assert again.returncode == 0 and again.stdout.strip() == "no call in doubt: nothing to settle", again
