"""`advisor probe`: real processes, real kills. Small jobs of each kind (tests/probe_jobs/job.py) get the
right verdict; bad input exits 2; the report carries into a decision record. No timed assertions:
kill moments are random, so every expectation holds whenever the kills land anywhere in the run."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from advisor.cli import main
from advisor.probe.report import build_report, evidence_lines, judge, load_report

JOBS = Path(__file__).parent / "probe_jobs"
PY = shlex.quote(sys.executable)
RECORDS = 100  # 2 s uninterrupted at 20 ms a record: every kill lands mid-run


@pytest.fixture
def job(tmp_path: Path) -> Path:
    """A folder with the job, its checks and an empty data folder."""
    for name in ("job.py", "check.py"):
        (tmp_path / name).write_text((JOBS / name).read_text())
    (tmp_path / "data").mkdir()
    return tmp_path


def probe(capsys, cwd: Path, mode: str, *extra: str, records: int = RECORDS) -> tuple[int, dict, str]:
    """Probe one mode of the job through the CLI; (exit code, JSON report, stderr)."""
    out = cwd / f"probe-{mode}.json"
    code = main([
        "probe", "--cwd", str(cwd), "--run", f"exec {PY} job.py {mode} {records} data",
        "--verify", f"{PY} check.py verify data {records}", "--progress", f"{PY} -S check.py count data",
        "--min-s", "0.6", "--max-s", "1.2", "--sample-s", "0.05", "--seed", "3", "--timeout", "120",
        "--out", str(out), *extra,
    ])  # fmt: skip
    _, err = capsys.readouterr()
    return code, (json.loads(out.read_text()) if out.exists() else {}), err


# --- the five kinds of job -----------------------------------------------------------


def test_a_job_that_resumes_from_its_checkpoint_survives(capsys, job):
    code, report, _ = probe(capsys, job, "checkpoint", "--kills", "3")
    assert code == 0, report["findings"]
    assert report["verdict"].startswith("SURVIVED ") and report["ok"]
    assert report["kills"] >= 1 and report["verify"]["passed"]
    # Progress counts committed results, which a resuming job never takes back.
    assert report["redone"]["max"] == 0
    assert report["recovery_ms"]["p50"] is not None


def test_a_job_that_restarts_from_zero_passes_but_reports_the_redone_work(capsys, job):
    # Kills late enough that the job has committed something to start over from (it pauses 0.3 s first).
    code, report, _ = probe(capsys, job, "zero", "--kills", "3", "--min-s", "0.9", "--max-s", "1.5")
    assert code == 0 and report["verify"]["passed"]
    assert report["verdict"].startswith("RESTARTS FROM ZERO"), report["findings"]
    measured = [k for k in report["kill_log"] if k.get("redone") is not None and k["progress_at_kill"]]
    assert measured and report["redone"]["per_kill"] > 0
    # Each kill's redone work is all the progress it had reached: the counter reads 0 after the restart.
    assert sum(k["redone"] == k["progress_at_kill"] for k in measured) >= len(measured) / 2


def test_a_job_that_moves_its_progress_before_its_results_loses_data(capsys, job):
    code, report, _ = probe(capsys, job, "lose", "--kills", "3")
    assert code == 1 and not report["ok"]
    assert report["verdict"].startswith("LOSES OR DOUBLES DATA")
    assert ": 0 missing" not in report["verify"]["tail"][-1]


def test_a_job_that_repeats_its_effects_after_a_kill_doubles_them(capsys, job):
    code, report, _ = probe(capsys, job, "double", "--kills", "3")
    assert code == 1 and report["verdict"].startswith("LOSES OR DOUBLES DATA")
    assert ", 0 duplicated" not in report["verify"]["tail"][-1]


def test_a_job_that_ignores_sigterm_is_flagged(capsys, job):
    code, report, _ = probe(capsys, job, "ignore-term", "--kills", "2", "--sigterm", "--grace", "0.3")
    assert code == 1 and not report["ok"]
    assert report["verify"]["passed"]  # its data is fine: only the stop is not graceful
    assert report["verdict"].startswith("IGNORES SIGTERM")
    first = report["kill_log"][0]  # the job needs 2 s; the first SIGTERM comes within 1.2 s and is ignored
    assert first["within_grace"] is False and first["exit_code"] == -signal.SIGKILL and not first["honoured"]


def test_a_job_that_stops_gracefully_on_sigterm_passes(capsys, job):
    code, report, _ = probe(capsys, job, "graceful", "--kills", "2", "--sigterm", "--grace", "20")
    assert code == 0, report["findings"]
    assert report["sigterm"]["honoured"] == report["sigterm"]["sent"] == report["kills"] >= 1
    assert all(k["exit_code"] == 0 for k in report["kill_log"])


# --- the run's edges -----------------------------------------------------------------


def test_baseline_and_events(capsys, job):
    """--baseline times an uninterrupted run after --reset (run again before the drill); --events prints
    JSON lines for live views, the report last."""
    code = main(["probe", "--cwd", str(job), "--run", f"exec {PY} job.py checkpoint 40 data",
                 "--verify", f"{PY} check.py verify data 40", "--progress", f"{PY} -S check.py count data",
                 "--reset", "rm -f data/out.db", "--baseline", "--kills", "1", "--min-s", "0.2", "--max-s", "0.4",
                 "--sample-s", "0.05", "--events"])  # fmt: skip
    events = [json.loads(line) for line in capsys.readouterr()[0].splitlines()]
    kinds = [e["event"] for e in events]
    assert kinds[0] == "start" and kinds[-1] == "report"
    assert kinds.index("baseline") < kinds.index("kill") < kinds.index("restart") < kinds.index("verify")
    assert kinds.count("reset") == 2 and "progress" in kinds and "recovered" in kinds
    report = events[-1]
    assert code == 0 and report["ok"], report["findings"]
    assert report["baseline"]["exit_code"] == 0 and report["baseline"]["verify"]["passed"]
    assert report["ratio"] == round(report["wall_s"] / report["baseline"]["wall_s"], 2)


def test_a_run_that_fails_on_its_own_is_restarted_then_reported(capsys, job):
    run = f"test -e data/failed-once || {{ touch data/failed-once; exit 3; }}; exec {PY} job.py checkpoint 40 data"
    code = main(["probe", "--cwd", str(job), "--run", run, "--verify", f"{PY} check.py verify data 40",
                 "--kills", "1", "--min-s", "0.2", "--max-s", "0.4", "--json"])  # fmt: skip
    report = json.loads(capsys.readouterr()[0])
    assert report["runs"][0] == {**report["runs"][0], "ended": "exited", "exit_code": 3}
    assert report["failures"] == 1 and any("exited non-zero on their own" in f for f in report["findings"])
    assert code == 0 and report["ok"]


@pytest.mark.parametrize(
    "run,verify,extra,headline",
    [
        ("exit 4", "true", [], "CANNOT RESTART"),  # fails every time: restarted a bounded number of times
        ("sleep 30", "true", ["--timeout", "1"], "TIMED OUT"),  # never finishes: the drill is bounded
        ("true", "true", [], "NOT TESTED"),  # finishes before the first kill moment
        ("sleep 0.3", None, ["--min-s", "0.05", "--max-s", "0.1"], "UNVERIFIED"),  # no --verify
        ("exit 4", "true", ["--reset", "true", "--baseline"], "FAILS WITHOUT KILLS"),  # broken before any kill
        ("true", "false", ["--reset", "true", "--baseline"], "VERIFY FAILS WITHOUT KILLS"),  # job or check wrong
    ],
)
def test_probes_that_prove_nothing_fail(capsys, tmp_path, run, verify, extra, headline):
    argv = ["probe", "--cwd", str(tmp_path), "--run", run, "--kills", "1", "--min-s", "2", "--max-s", "3", "--json"]
    code = main(argv + (["--verify", verify] if verify else []) + extra)
    report = json.loads(capsys.readouterr()[0])
    assert code == 1 and not report["ok"] and report["verdict"].startswith(headline), report["verdict"]


def _alive(pid: int) -> bool:
    """A process that exists and is not a zombie (this container's init may not reap orphans)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads process states from /proc")
def test_a_kill_stops_the_whole_group_grandchildren_too(capsys, job):
    run = f"sleep 120 & echo $! >> data/pids; {PY} job.py checkpoint 40 data"  # bash stays: a real group
    code = main(["probe", "--cwd", str(job), "--run", run, "--verify", f"{PY} check.py verify data 40",
                 "--kills", "2", "--min-s", "0.2", "--max-s", "0.4", "--json"])  # fmt: skip
    assert code == 0, capsys.readouterr()
    pids = [int(p) for p in (job / "data" / "pids").read_text().split()]
    assert len(pids) >= 2 and not any(_alive(pid) for pid in pids)


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads process states from /proc")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])  # a service manager; Ctrl-C
def test_stopping_the_probe_stops_the_job(tmp_path, sig):
    job = "import os, time; open('job.pid', 'w').write(str(os.getpid())); time.sleep(120)"
    cmd = [sys.executable, "-m", "advisor", "probe", "--cwd", str(tmp_path), "--verify", "true",
           "--run", f"exec {PY} -c {shlex.quote(job)}", "--min-s", "100", "--max-s", "110"]  # fmt: skip
    # As from a terminal: a runner that ignores SIGINT (a background job) must not pass that on.
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        pid_file = tmp_path / "job.pid"
        for _ in range(600):  # up to 60 s on a loaded machine
            if pid_file.exists() and pid_file.read_text():
                break
            time.sleep(0.1)
        pid = int(pid_file.read_text())
        assert _alive(pid)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130 and "Traceback" not in err
    assert not _alive(pid)


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads process states from /proc")
def test_closing_the_event_stream_early_stops_the_job(tmp_path):
    """What a live view does when its user leaves: close the generator; the job's group is stopped."""
    from advisor.probe.runner import ProbeOptions, probe_events

    job = "import os, time; open('job.pid', 'w').write(str(os.getpid())); time.sleep(120)"
    events = probe_events(ProbeOptions(run=f"exec {PY} -c {shlex.quote(job)}", cwd=tmp_path, min_s=100, max_s=110,
                                       progress="test -s job.pid && echo 1 || echo 0", sample_s=0.05, timeout_s=60))
    for event in events:
        if event["event"] == "progress" and event["done"] == 1:
            break
    pid = int((tmp_path / "job.pid").read_text())
    assert _alive(pid)
    events.close()
    assert not _alive(pid)


# --- bad input: one line, exit 2, nothing run or written ---------------------------------


@pytest.mark.parametrize(
    "argv,expect",
    [
        (["--run", " "], "--run is empty"),
        (["--run", "true", "--verify", ""], "--verify is empty"),
        (["--run", "true", "--cwd", "no/such/dir"], "no such folder"),
        (["--run", "true", "--kills", "0"], "at least 1 kill"),
        (["--run", "true", "--min-s", "5", "--max-s", "1"], "min-s <= max-s"),
        (["--run", "true", "--grace", "0"], "--grace 0.0"),
        (["--run", "true", "--baseline"], "--baseline needs --reset"),
        (["--run", "no-such-command-for-the-probe"], "cannot start"),
        (["--run", "true", "--reset", "exit 5"], "--reset exited 5"),
        (["--run", "sleep 1", "--verify", "no-such-verify-command", "--min-s", "0.1", "--max-s", "0.2"],
         "--verify 'no-such-verify-command' cannot start"),
    ],
)
def test_bad_input_exit_2(capsys, tmp_path, argv, expect):
    extra = [] if "--kills" in argv else ["--kills", "1"]
    code = main(["probe", "--cwd", str(tmp_path), *argv, *extra])
    err = capsys.readouterr()[1]
    assert code == 2 and expect in err and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1


def test_bad_flag_exit_2(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["probe", "--run", "true", "--kills", "many"])
    assert exit_.value.code == 2


def test_out_is_checked_before_the_job_runs_and_never_overwritten(capsys, tmp_path):
    out = tmp_path / "probe.json"
    out.write_text("keep me")
    code = main(["probe", "--cwd", str(tmp_path), "--run", "touch ran", "--out", str(out)])
    assert code == 2 and "already exists" in capsys.readouterr()[1]
    assert out.read_text() == "keep me" and not (tmp_path / "ran").exists()
    code = main(["probe", "--cwd", str(tmp_path), "--run", "true", "--out", str(tmp_path / "no" / "p.json")])
    assert code == 2 and "does not exist" in capsys.readouterr()[1]


# --- the report as evidence in a decision record -------------------------------------------


def _report(**measured) -> dict:
    """A report from made-up measurements (pure: no processes)."""
    options = {"run": "python etl.py", "verify": "python check.py", "progress": "wc -l < out.csv", "reset": None,
               "cwd": "/srv/etl", "kills": 3, "sigterm": False, "grace_s": 30.0, "min_s": 1.0, "max_s": 10.0,
               "seed": 1, "timeout_s": 600.0, "baseline": False, "sample_s": 0.2}  # fmt: skip
    options.update(measured.pop("options", {}))
    kills = measured.pop("kills", [
        {"n": n, "signal": "SIGKILL", "after_s": 2.0, "exit_code": -9, "progress_before": 100 * n,
         "progress_after": 100 * n - 5, "progress_at_kill": 100 * n - 5, "recovery_ms": 400.0 + n, "redone": 5}
        for n in (1, 2, 3)
    ])  # fmt: skip
    args = dict(date="2026-11-30T10:00:00Z", baseline=None, runs=[{"n": n, "ended": "killed"} for n in (1, 2, 3)]
                + [{"n": 4, "ended": "exited", "exit_code": 0}], kills=kills, outcome="finished", wall_s=12.0,
                verify={"command": "python check.py", "exit_code": 0, "passed": True, "seconds": 0.1,
                        "tail": ["300 rows"]}, progress=300, progress_errors=[])  # fmt: skip
    args.update(measured)
    return build_report(options, **args)


@pytest.mark.parametrize(
    "measured,ok,headline",
    [
        ({}, True, "SURVIVED 3 RANDOM KILL(S): verify passed after them; a kill cost ~5 records"),  # resumes
        ({"verify": {"command": "c", "exit_code": 1, "passed": False, "tail": ["3 missing"]}}, False,
         "LOSES OR DOUBLES DATA: verify failed after 3 kill(s) (exit 1: '3 missing')"),  # verify fails
        ({"kills": [{"n": 1, "signal": "SIGKILL", "exit_code": -9, "progress_before": 80, "progress_after": 80,
                     "progress_at_kill": 80, "recovery_ms": 900.0, "redone": 80}]},
         True, "RESTARTS FROM ZERO"),  # redid everything
        ({"options": {"sigterm": True}, "kills": [{"n": 1, "signal": "SIGTERM", "exit_code": -15, "exit_s": 0.01,
                                                   "within_grace": True, "honoured": False}]},
         False, "IGNORES SIGTERM: 1 of 1"),  # died of SIGTERM's default action
        ({"verify": None}, False, "UNVERIFIED"),  # nobody checked the data
        ({"outcome": "timed out"}, False, "TIMED OUT"),  # bounded
    ],
)
def test_verdicts(measured, ok, headline):
    report = _report(**measured)
    assert report["ok"] is ok and judge(report)[0] is ok
    assert report["verdict"].startswith(headline), report["verdict"]


def test_the_verdict_says_what_random_kills_covered_and_when_that_is_thin():
    """Kills by quarter of the work (progress against the uninterrupted run's total), the narrowest
    window they hit with even odds, and thin evidence named: a job whose bad window is a few ms per
    record passes random kills, and the verdict must not read stronger than that."""
    from advisor.probe.report import coverage, kills_for_odds

    baseline = {"exit_code": 0, "wall_s": 8.0, "progress": 400, "verify": None}
    early = [{"n": i, "signal": "SIGKILL", "exit_code": -9, "progress_at_kill": 10 + i, "progress_before": 10 + i,
              "progress_after": 10 + i, "recovery_ms": 100.0, "redone": 1} for i in range(3)]
    report = _report(kills=early, baseline=baseline)
    assert report["ok"] and report["coverage"]["phases"] == [3, 0, 0, 0]
    assert report["coverage"]["phases_missed"] == [2, 3, 4]
    assert report["verdict"].startswith("SURVIVED 3 RANDOM KILL(S)") and "thin evidence" in report["verdict"]
    text = " ".join(report["findings"])
    assert "none in quarter 2, 3, 4 of the work" in text and "drill --sweep" in text
    assert "more likely missed than hit by 3 kills" in text and "20.6%" in text  # 1 - 0.5 ** (1/3)
    spread = [dict(k, progress_at_kill=x) for k, x in zip(early * 10, range(5, 400, 14))]
    wide = coverage(spread, 400)
    assert wide["phases_missed"] == [] and wide["kills"] == 29 and wide["even_odds_share"] < 0.03
    assert "thin evidence" not in _report(kills=spread, baseline=baseline)["verdict"]
    assert kills_for_odds(0.01, 0.5) == 69 and kills_for_odds(0.01, 0.9) == 230


def test_evidence_lines_carry_the_figures():
    baseline = {"exit_code": 0, "wall_s": 8.0, "progress": 270, "verify": None}
    done = "\n".join(evidence_lines(_report(baseline=baseline)))
    assert done.startswith("- [x] Done: probe of the job on 2026-11-30")
    assert "3 × SIGKILL" in done and "`python check.py` passed" in done
    assert "p50 0.40 s" in done and "~5 records" in done and "x1.5" in done
    # The counter ended 30 above the uninterrupted run's 270: 10 repeated per kill.
    assert "ended 30 above the uninterrupted run's (300 against 270): ~10 repeated per kill" in done
    assert "Reproduce (in the job's folder): `advisor probe --run 'python etl.py'" in done
    failed = evidence_lines(_report(verify={"command": "c", "exit_code": 1, "passed": False, "tail": []}))
    assert failed[0].startswith("- [ ] Not yet:") and "LOSES OR DOUBLES DATA" in failed[0]


def test_review_puts_the_probe_into_the_verification_plan(capsys, tmp_path):
    report = tmp_path / "probe.json"
    report.write_text(json.dumps(_report()))
    record = tmp_path / "decision.md"
    code = main(["review", "--set", "work_shape=record_batch", "--probe", str(report), "--out", str(record)])
    assert code == 0, capsys.readouterr()
    plan = record.read_text().split("## Verification plan", 1)[1]
    assert plan.lstrip().startswith("Evidence from a crash drill of the team's own job:")
    assert "- [x] Done: probe of the job on 2026-11-30" in plan and "p50 0.40 s" in plan


def test_decision_record_probe_hook(catalog):
    """The hook the review offers (review/judge.py): ``probe`` lines lead the verification plan; without them nothing changes."""
    from advisor.review.judge import decision_record

    plain = decision_record({}, catalog)
    record = decision_record({}, catalog, probe=["- [x] Done: probe", "  - Recovery: p50 0.40 s."])
    assert record.replace("Evidence from a crash drill of the team's own job:\n\n- [x] Done: probe\n"
                          "  - Recovery: p50 0.40 s.\n\n", "") == plain
    plan = record.index("## Verification plan")
    assert plan < record.index("- [x] Done: probe") < record.index("\n1. ", plan)


@pytest.mark.parametrize(
    "content,expect",
    [
        (None, "no such probe report"),  # missing
        ("{not json", "not valid JSON"),  # corrupt
        ('{"kind": "advisor-drill"}', "not an advisor probe report"),  # foreign
        ('{"kind": "advisor-probe", "format": 1}', "incomplete probe report"),  # truncated by hand
    ],
)
def test_review_refuses_a_bad_probe_report(capsys, tmp_path, content, expect):
    report = tmp_path / "probe.json"
    if content is not None:
        report.write_text(content)
    record = tmp_path / "decision.md"
    code = main(["review", "--probe", str(report), "--out", str(record)])
    assert code == 2 and expect in capsys.readouterr()[1] and not record.exists()
    with pytest.raises(Exception, match=expect):
        load_report(report)


# --- a generated project --------------------------------------------------------------------


@pytest.mark.slow
def test_a_generated_checkpoint_project_passes(capsys, tmp_path, monkeypatch):
    from advisor.scaffold.generation import generate

    dest = tmp_path / "proj"
    pkg = generate("checkpoint", dest, {"project_name": "probe demo"}).package
    monkeypatch.setenv("PYTHONPATH", str(dest / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    (dest / "verify.py").write_text(
        "import sqlite3, sys\n"
        "db = sqlite3.connect('file:data/external.db?mode=ro', uri=True)\n"
        "total, distinct = db.execute('SELECT COUNT(*), COUNT(DISTINCT record_id) FROM effects').fetchone()\n"
        "print(f'{total} effects, {distinct} records, expected 600')\n"
        "sys.exit(0 if total == distinct == 600 else 1)\n"
    )
    progress = ("import sqlite3; db = sqlite3.connect('file:data/external.db?mode=ro', uri=True);"
                "print(db.execute('SELECT COUNT(*) FROM effects').fetchone()[0])")
    out = tmp_path / "probe.json"
    code = main(["probe", "--cwd", str(dest), "--run", f"exec {PY} -m {pkg} run --data-dir data",
                 "--reset", f"rm -rf data && {PY} -m {pkg} submit-demo --records 600 --work-ms 3 --data-dir data",
                 "--verify", f"{PY} verify.py", "--progress", f"{PY} -c {shlex.quote(progress)}",
                 "--kills", "3", "--min-s", "0.3", "--max-s", "1.0", "--sample-s", "0.1", "--baseline",
                 "--out", str(out)])  # fmt: skip
    text = capsys.readouterr()[0]
    report = load_report(out)
    assert code == 0 and report["verdict"].startswith("SURVIVED "), text
    assert report["kills"] >= 1 and report["ratio"] is not None
    assert report["extra_work"]["baseline"] == 600  # the effects counter: nothing applied twice
    assert report["extra_work"]["extra"] == 0


def test_the_probe_library_imports_neither_textual_nor_copier():
    code = ("import sys, advisor.probe.runner, advisor.probe.report;"
            "print([m for m in ('textual', 'copier', 'advisor.tui') if m in sys.modules])")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stderr
