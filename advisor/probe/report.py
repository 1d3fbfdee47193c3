"""A probe's report: figures, the plain-language verdict, the text summary, and the evidence
lines a decision record carries. Pure functions over dicts (plus :func:`load_report`)."""

from __future__ import annotations

import math
import shlex
import statistics
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from advisor.errors import InputError, ProbeError
from advisor.redact import redact_all
from advisor.safe_read import load_json

KIND = "advisor-probe"
FORMAT = 1
FROM_ZERO = 0.75  # a kill that redid at least this share of the progress before it restarted from zero


def percentile(values: list[float], q: float) -> float | None:
    """Nearest rank: the smallest value with at least ``q`` of the values at or below it."""
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[max(1, math.ceil(q * len(ordered))) - 1], 1)


def _num(value: Any) -> str:
    if isinstance(value, float) and not value.is_integer():
        return f"{value:.1f}"
    return f"{value:g}" if isinstance(value, (int, float)) else "?"


def _seconds(ms: Any) -> str:
    return f"{ms / 1000:.2f} s" if isinstance(ms, (int, float)) else "n/a"


def build_report(options: Mapping[str, Any], *, date: str, baseline: dict[str, Any] | None,
                 runs: list[dict[str, Any]], kills: list[dict[str, Any]], outcome: str, wall_s: float,
                 verify: dict[str, Any] | None, progress: float | None, progress_errors: list[str]) -> dict[str, Any]:
    """Gather the measurements into the report (JSON-ready) and judge them."""
    recoveries = [k["recovery_ms"] for k in kills if isinstance(k.get("recovery_ms"), (int, float))]
    terms = [k for k in kills if k["signal"] == "SIGTERM"]
    base_s = baseline["wall_s"] if baseline and baseline.get("exit_code") == 0 else None
    report: dict[str, Any] = {
        "kind": KIND,
        "format": FORMAT,
        "date": date,
        "options": dict(options),
        "signal": "SIGTERM" if options.get("sigterm") else "SIGKILL",
        "kills_requested": options.get("kills"),
        "kills": len(kills),
        "restarts": max(0, len(runs) - 1),
        "outcome": outcome,
        "runs": runs,
        "kill_log": kills,
        "failures": sum(1 for r in runs if r.get("ended") == "exited" and r.get("exit_code") != 0),
        "verify": verify,
        "progress": None,
        "redone": _redone(kills),
        "recovery_ms": {"p50": percentile(recoveries, 0.5), "p95": percentile(recoveries, 0.95),
                        "max": max(recoveries) if recoveries else None,
                        "unrecovered": sum(1 for k in kills if k.get("recovery_ms") is None)},
        "sigterm": None,
        # The same shape as a generated project's drill, for views that show either.
        "graceful_exits": [{"exit_code": k["exit_code"], "exit_s": k["exit_s"], "within_grace": k["within_grace"]}
                           for k in terms],
        "extra_work": _extra_work(baseline, progress, len(kills)),
        "wall_s": wall_s,
        "baseline": baseline,
        "ratio": round(wall_s / base_s, 2) if base_s and outcome == "finished" else None,
    }
    if options.get("progress"):
        report["progress"] = {"command": options["progress"], "final": progress, "errors": len(progress_errors),
                              "last_error": progress_errors[-1] if progress_errors else None}
    if options.get("sigterm"):
        slowest = max((k["exit_s"] for k in terms), default=None)
        report["sigterm"] = {"sent": len(terms), "honoured": sum(1 for k in terms if k.get("honoured")),
                             "grace_s": options.get("grace_s"), "slowest_s": slowest}
    report["ok"], report["verdict"], report["findings"] = judge(report)
    report["notes"] = notes(report)
    return redact_all(report)  # type: ignore[no-any-return]  # the job's command line or its errors may carry a database password


def _redone(kills: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Redone work per kill, and the median share of the progress at a kill that it redid."""
    redone = [k["redone"] for k in kills if isinstance(k.get("redone"), (int, float))]
    if not redone:
        return None
    shares = [k["redone"] / k["progress_at_kill"] for k in kills
              if isinstance(k.get("redone"), (int, float)) and (k.get("progress_at_kill") or 0) > 0]
    return {"per_kill": round(statistics.fmean(redone), 1), "max": max(redone), "measured": len(redone),
            "share_median": round(statistics.median(shares), 2) if shares else None}


def _extra_work(baseline: Mapping[str, Any] | None, final: float | None, kills: int) -> dict[str, Any] | None:
    """Final progress against the uninterrupted run's: with a counter of work *attempted* (calls, rows
    read), the surplus is the work the kills made the job repeat."""
    if not baseline or not isinstance(baseline.get("progress"), (int, float)) or final is None or not kills:
        return None
    extra = final - baseline["progress"]
    return {"baseline": baseline["progress"], "drill": final, "extra": extra, "per_kill": round(extra / kills, 1)}


def _sigterm_finding(r: Mapping[str, Any]) -> str:
    """How the SIGTERMs that were not honoured went: ignored (too slow), died of it, or failed."""
    sig = r["sigterm"]
    missed = [k for k in r["kill_log"] if k["signal"] == "SIGTERM" and not k.get("honoured")]
    late = sum(1 for k in missed if not k.get("within_grace"))
    died = sum(1 for k in missed if k.get("within_grace") and k["exit_code"] == -15)
    failed = sorted({k["exit_code"] for k in missed if k.get("within_grace") and k["exit_code"] != -15})
    how = []
    if late:
        how.append(f"{late} still running after {_num(sig['grace_s'])} s (then SIGKILLed)")
    if died:
        how.append(f"{died} died of it (exit -15: no SIGTERM handler, or a shell in front of the job:"
                   " start it with `exec`)")
    if failed:
        how.append(f"exit code(s) {', '.join(map(str, failed))}")
    return (f"IGNORES SIGTERM: {len(missed)} of {sig['sent']} SIGTERMs were not honoured (exit 0 within"
            f" {_num(sig['grace_s'])} s): {'; '.join(how)}")


def notes(r: Mapping[str, Any]) -> list[str]:
    """Caveats about the measurements (not about the job): shown with the figures, not in records."""
    out = []
    if r["recovery_ms"]["unrecovered"] and r["kills"] and r["options"].get("progress"):
        out.append(f"{r['recovery_ms']['unrecovered']} kill(s) came before the job showed new progress"
                   " (no recovery time for them)")
    if r["progress"] and r["progress"]["errors"]:
        out.append(f"the progress command printed no number {r['progress']['errors']} time(s)"
                   f" (last: {r['progress']['last_error']})")
    return out


def judge(r: Mapping[str, Any]) -> tuple[bool, str, list[str]]:
    """(passed, the headline, every finding): plain language, worst news first."""
    kills, verify, baseline, opts = r["kills"], r["verify"], r["baseline"], r["options"]
    sig, redone, rec = r["sigterm"], r["redone"], r["recovery_ms"]
    findings: list[str] = []
    if sig and sig["honoured"] < sig["sent"]:
        findings.append(_sigterm_finding(r))
    from_zero = bool(redone and redone["share_median"] is not None and redone["share_median"] >= FROM_ZERO)
    if from_zero:
        findings.append(f"RESTARTS FROM ZERO: each kill redid ~{redone['share_median']:.0%} of the progress made"
                        f" (~{_num(redone['per_kill'])} records per kill)")
    if 0 < kills < (r["kills_requested"] or 0) and r["outcome"] == "finished":
        findings.append(f"only {kills} of {r['kills_requested']} kills landed: the job finished first"
                        " (lower --min-s/--max-s for more)")
    if r["failures"]:
        findings.append(f"{r['failures']} run(s) exited non-zero on their own and were restarted")
    cost = (f"a kill cost ~{_num(redone['per_kill'])} records of redone work (max {_num(redone['max'])})"
            if redone else "redone work not measured (give --progress)")
    extra = r["extra_work"]
    if extra and extra["extra"] > 0:
        findings.append(f"the progress counter ended {_num(extra['extra'])} above the uninterrupted run's"
                        f" ({_num(extra['drill'])} against {_num(extra['baseline'])}): ~{_num(extra['per_kill'])}"
                        " repeated per kill")
    if r["outcome"] == "baseline failed":
        assert baseline is not None
        if baseline["exit_code"] != 0:
            how = "did not finish in time" if baseline["exit_code"] is None else f"exited {baseline['exit_code']}"
            head = f"FAILS WITHOUT KILLS: the uninterrupted run {how}; fix the job before probing it"
        else:
            check = baseline["verify"]
            head = (f"VERIFY FAILS WITHOUT KILLS: the uninterrupted run finished but verify exited"
                    f" {check['exit_code']} ({_last(check)}); fix the job or the verify command")
        return False, head, [head] + findings
    if r["outcome"] == "timed out":
        head = (f"TIMED OUT: the job did not finish within --timeout {_num(opts['timeout_s'])} s"
                f" ({kills} kill(s) delivered); a job that cannot resume may never finish")
    elif r["outcome"] == "gave up":
        last = r["runs"][-1]
        head = (f"CANNOT RESTART: {r['failures']} runs exited non-zero on their own (last: exit {last['exit_code']},"
                f" {(last.get('tail') or ['no output'])[-1]!r})")
    elif verify is None:
        head = f"UNVERIFIED: the job finished after {kills} kill(s), but no --verify command checked its data"
    elif not verify["passed"]:
        head = (f"LOSES OR DOUBLES DATA: verify failed after {kills} kill(s)"
                f" (exit {verify['exit_code']}: {_last(verify)})")
    elif kills == 0:
        head = ("NOT TESTED: the job finished before the first kill moment; lower --min-s/--max-s, or give"
                " --reset CMD so that each probe starts from the beginning")
    elif findings and findings[0].startswith("IGNORES SIGTERM"):
        head = findings[0]
    elif from_zero:
        head = f"RESTARTS FROM ZERO: verify passed after {kills} kill(s), but each kill redid ~all progress; {cost}"
    else:
        head = f"SURVIVES KILLS: verify passed after {kills} kill(s); {cost}"
        if rec["p50"] is not None:
            head += f", recovery p50 {_seconds(rec['p50'])}"
    ok = (r["outcome"] == "finished" and verify is not None and bool(verify["passed"]) and kills > 0
          and not (sig and sig["honoured"] < sig["sent"]))
    return ok, head, [head] + [f for f in findings if f != head]


def _last(verify: Mapping[str, Any]) -> str:
    tail = verify.get("tail") or []
    return repr(tail[-1]) if tail else "no output"


def summary(r: Mapping[str, Any]) -> str:
    """The report for a person: what was done, the figures, the verdict last."""
    o, rec, redone, sig = r["options"], r["recovery_ms"], r["redone"], r["sigterm"]
    ended = [("killed" if x["ended"] == "killed" else f"exit {x['exit_code']}" if x["ended"] == "exited"
              else x["ended"]) for x in r["runs"]]
    lines = [
        f"probe: {o['run']!r} in {o['cwd']}",
        f"  {r['kills']} of {r['kills_requested']} x {r['signal']}, {_num(o['min_s'])}-{_num(o['max_s'])} s after"
        f" each start (seed {o['seed']}); {r['restarts']} restart(s)",
        f"  runs: {', '.join(ended) or 'none'}",
    ]
    if r["verify"]:
        v = r["verify"]
        lines.append(f"  verify: {'passed' if v['passed'] else 'FAILED'} (exit {v['exit_code']})")
        lines += [f"    | {line}" for line in v["tail"][-4:]]
    if redone:
        lines.append(f"  redone work per kill: ~{_num(redone['per_kill'])} (max {_num(redone['max'])},"
                     f" {redone['measured']} kill(s) measured)")
    if r["extra_work"]:
        x = r["extra_work"]
        lines.append(f"  final progress {_num(x['drill'])} against {_num(x['baseline'])} uninterrupted:"
                     f" {x['extra']:+g} ({x['per_kill']:+g} per kill)")
    if rec["p50"] is not None:
        lines.append(f"  recovery (restart -> new progress): p50 {_seconds(rec['p50'])}, p95 {_seconds(rec['p95'])},"
                     f" max {_seconds(rec['max'])}")
    if sig:
        lines.append(f"  SIGTERM: {sig['honoured']} of {sig['sent']} honoured within {_num(sig['grace_s'])} s"
                     f" (slowest {_num(sig['slowest_s'])} s)")
    base = r["baseline"]
    timing = f"  time: {_num(r['wall_s'])} s"
    if base:
        timing += f"; uninterrupted run {_num(base['wall_s'])} s"
        if r["ratio"] is not None:
            timing += f" (x{r['ratio']:g})"
    lines.append(timing)
    lines += [f"  - {f}" for f in r["findings"][1:]]
    lines += [f"  - note: {n}" for n in r.get("notes", [])]
    lines.append(("OK: " if r["ok"] else "FAILED: ") + r["verdict"])
    return "\n".join(lines)


def event_line(event: Mapping[str, Any]) -> str | None:
    """One line of live text per event worth a line (progress readings are not)."""
    kind, t = event.get("event"), event.get("t")
    at = f"{t:7.2f}s " if isinstance(t, (int, float)) else "         "
    if kind == "reset":
        return f"{at}reset: exit {event.get('exit_code')} in {_num(event.get('seconds'))} s"
    if kind == "baseline":
        return f"{at}uninterrupted run: exit {event.get('exit_code')} in {_num(event.get('wall_s'))} s"
    if kind == "kill":
        line = f"{at}kill {event.get('n')} ({event.get('signal')}) {_num(event.get('after_s'))} s after the start"
        if event.get("done") is not None:
            line += f", progress {_num(event.get('done'))}"
        if "exit_s" in event:
            line += (f"; exit {event.get('exit_code')} after {_num(event.get('exit_s'))} s"
                     f" ({'honoured' if event.get('honoured') else 'NOT honoured'})")
        return line
    if kind == "restart":
        return f"{at}restart after kill {event.get('n')}"
    if kind == "recovered":
        return f"{at}  new progress {_seconds(event.get('ms'))} after the restart"
    if kind == "exit":
        return f"{at}run {event.get('run')} exited {event.get('exit_code')} on its own"
    if kind == "verify":
        return f"{at}verify: exit {event.get('exit_code')}"
    return None


def reproduce(r: Mapping[str, Any]) -> str:
    """The command that runs the same probe again."""
    o = r["options"]
    parts = ["advisor", "probe", "--run", o["run"]]
    for flag, key in (("--verify", "verify"), ("--progress", "progress"), ("--reset", "reset")):
        if o.get(key):
            parts += [flag, o[key]]
    parts += ["--kills", str(o["kills"]), "--min-s", _num(o["min_s"]), "--max-s", _num(o["max_s"]),
              "--seed", str(o["seed"])]
    if o.get("sigterm"):
        parts += ["--sigterm", "--grace", _num(o["grace_s"])]
    if o.get("baseline"):
        parts.append("--baseline")
    return shlex.join(parts)


def evidence_lines(r: Mapping[str, Any]) -> list[str]:
    """Markdown lines for a decision record's verification plan: done (with figures) or failed."""
    day = str(r.get("date", ""))[:10] or "an unknown date"
    rec, redone, sig, verify = r["recovery_ms"], r["redone"], r["sigterm"], r["verify"]
    checked = f"`{verify['command']}` {'passed' if verify['passed'] else 'failed'}" if verify else "no verify command"
    if r["ok"]:
        lines = [f"- [x] Done: probe of the job on {day} (`advisor probe`): {r['kills']} × {r['signal']} at random"
                 f" moments, {r['restarts']} restart(s); {checked}."]
    else:
        lines = [f"- [ ] Not yet: the probe of the job on {day} failed: {r['verdict']}.",
                 "  - Fix the job (see the pitfall checklist), then run the same probe again."]
    if rec["p50"] is not None:
        lines.append(f"  - Recovery (restart → first new progress): p50 {_seconds(rec['p50'])},"
                     f" p95 {_seconds(rec['p95'])}, max {_seconds(rec['max'])}.")
    if redone:
        lines.append(f"  - Redone work per kill: ~{_num(redone['per_kill'])} records (max {_num(redone['max'])}),"
                     f" as counted by `{r['options']['progress']}`.")
    if sig:
        lines.append(f"  - SIGTERM: {sig['honoured']} of {sig['sent']} honoured within {_num(sig['grace_s'])} s"
                     f" (slowest {_num(sig['slowest_s'])} s).")
    if r["ratio"] is not None:
        lines.append(f"  - Total time {_num(r['wall_s'])} s against {_num(r['baseline']['wall_s'])} s"
                     f" uninterrupted: x{r['ratio']:g}.")
    if r["ok"]:
        lines.append(f"  - Verdict: {r['verdict']}.")
    lines += [f"  - Also: {f}." for f in r["findings"][1:]]
    lines.append(f"  - Reproduce (in the job's folder): `{reproduce(r)}`")
    return lines


# What evidence_lines reads.
REQUIRED = ("date", "options", "signal", "kills", "restarts", "verify", "redone", "recovery_ms", "sigterm",
            "wall_s", "baseline", "ratio", "ok", "verdict", "findings")


def load_report(path: Path) -> dict[str, Any]:
    """Read a probe report written by ``advisor probe --out``; a clear :class:`ProbeError` otherwise."""
    path = Path(path)
    hint = f"write one with: advisor probe --run CMD --verify CMD --out {path}"
    if not path.exists():
        raise ProbeError(f"{path}: no such probe report; {hint}")
    try:  # bounded size and nesting, strict UTF-8 (advisor/safe_read.py)
        data = load_json(path, "probe report")
    except InputError as exc:
        raise ProbeError(f"{exc} Is it a report from `advisor probe --out`?") from None
    if not isinstance(data, dict) or data.get("kind") != KIND:
        raise ProbeError(f"{path}: not an advisor probe report (no \"kind\": \"{KIND}\"); {hint}")
    if data.get("format") != FORMAT:
        raise ProbeError(f"{path}: probe report format {data.get('format')!r}; this advisor reads format {FORMAT}.")
    missing = [key for key in REQUIRED if key not in data]
    if not missing and not (isinstance(data["options"], dict) and isinstance(data["options"].get("run"), str)):
        missing = ["options.run"]
    if missing:
        raise ProbeError(f"{path}: incomplete probe report (missing {', '.join(missing)}); {hint}")
    return redact_all(data)  # type: ignore[no-any-return]
