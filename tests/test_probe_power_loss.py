"""`advisor probe --power-loss --data DIR`: the job's data directory on LazyFS, every kill a power cut.

The job drains an inbox (outside its data directory, as a queue or a remote service would be: an
item deleted there is gone) into a ledger inside it, each item once. The one that fsyncs its ledger
before it takes the item off the inbox survives the cuts; the one that does not loses every line it
wrote since its last fsync — never — at the first cut, and the probe says so. `kill -9` alone passes
both (the page cache outlives a killed process): the control run at the end.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from advisor.cli import main
from lazyfs_support import skip_reason

pytestmark = pytest.mark.slow

ITEMS = 150
JOB = """\
import os, sys, time
from pathlib import Path
sync = sys.argv[1:] == ["sync"]
inbox, ledger = Path("inbox"), Path("data/ledger.txt")
seen = set(ledger.read_text().split()) if ledger.exists() else set()
for item in sorted(inbox.iterdir()):
    rid = item.read_text().strip()
    if rid not in seen:  # taken before a cut, not yet off the inbox: not twice
        with open(ledger, "a") as f:
            f.write(rid + "\\n")
            f.flush()
            if sync:
                os.fsync(f.fileno())
        seen.add(rid)
    item.unlink()  # off the inbox: gone for good, whatever the ledger kept
    time.sleep(0.012)  # 1.8 s of work in all: more than three windows of at most 0.35 s, so each cut lands
"""
CHECK = f"""\
from pathlib import Path
lines = Path("data/ledger.txt").read_text().split() if Path("data/ledger.txt").exists() else []
missing = {ITEMS} - len(set(lines))
print(f"{{len(lines)}} lines, {{missing}} of {ITEMS} items missing, {{len(lines) - len(set(lines))}} twice")
raise SystemExit(1 if missing or len(lines) != len(set(lines)) else 0)
"""
RESET = f"rm -rf inbox && mkdir inbox && rm -f data/ledger.txt && {sys.executable} -c " + (
    f"\"import pathlib; [pathlib.Path(f'inbox/{{i:04d}}').write_text(str(i)) for i in range({ITEMS})]\"")


@pytest.fixture
def job(tmp_path: Path) -> Path:
    (tmp_path / "job.py").write_text(JOB)
    (tmp_path / "check.py").write_text(CHECK)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "mine.txt").write_text("the team's own file\n")
    return tmp_path


def probe(job: Path, capsys, *extra: str, variant: str) -> tuple[int, dict]:  # type: ignore[no-untyped-def]
    out = job / f"probe-{variant}{'-power' if '--power-loss' in extra else ''}.json"
    code = main(["probe", "--cwd", str(job), "--run", f"{sys.executable} job.py {variant}",
                 "--verify", f"{sys.executable} check.py", "--progress", "cat data/ledger.txt 2>/dev/null | wc -l",
                 "--reset", RESET, "--kills", "3", "--min-s", "0.15", "--max-s", "0.35", "--seed", "2",
                 "--out", str(out), *extra])
    capsys.readouterr()
    return code, json.loads(out.read_text())


def test_the_probe_catches_a_job_that_never_fsyncs_and_passes_one_that_does(job: Path, capsys) -> None:
    if (reason := skip_reason()) is not None:
        pytest.fail(f"LazyFS is needed here (`make test` builds it: make lazyfs): {reason}")
    code, report = probe(job, capsys, "--power-loss", "--data", "data", variant="nosync")
    assert code == 1 and not report["ok"], report["verdict"]
    assert report["verdict"].startswith("LOSES DATA ON POWER LOSS: verify failed after"), report["verdict"]
    assert "items missing" in report["verdict"] and report["signal"] == "SIGKILL + power cut"
    assert all("power_cut_s" in k for k in report["kill_log"])

    code, report = probe(job, capsys, "--power-loss", "--data", "data", variant="sync")
    assert code == 0 and report["ok"], report["verdict"]
    assert report["verdict"].startswith("SURVIVED 3 RANDOM POWER CUT(S)"), report["verdict"]

    # The team's directory is as it was: the drill ran on a copy, and no mount is left behind.
    assert sorted(p.name for p in (job / "data").iterdir()) == ["mine.txt"]
    mounts = Path("/proc/self/mountinfo").read_text()
    assert str(job / "data") not in mounts

    # The control: without power cuts, kill -9 never shows the missing fsync.
    code, report = probe(job, capsys, variant="nosync")
    assert code == 0 and report["ok"], report["verdict"]


@pytest.mark.parametrize(("args", "words"), [
    (["--power-loss"], "--power-loss needs --data DIR"),
    (["--data", "data"], "give it with --power-loss"),
    (["--power-loss", "--data", "nowhere"], "--data nowhere: no such folder"),
    (["--power-loss", "--data", "data", "--sigterm"], "drop --sigterm"),
    (["--power-loss", "--data", "."], "not --cwd itself"),
])
def test_bad_power_loss_options_exit_2_before_anything_runs(job: Path, capsys, args: list[str], words: str) -> None:
    code = main(["probe", "--cwd", str(job), "--run", "touch ran", *args])
    err = capsys.readouterr().err
    assert code == 2 and words in err and "Traceback" not in err, err
    assert not (job / "ran").exists()


def test_without_lazyfs_the_probe_says_how_to_get_it(job: Path, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    from advisor.probe import power_cut

    monkeypatch.setattr(power_cut, "unavailable_reason", lambda: "LazyFS is not installed (test). Get LazyFS: ...")
    code = main(["probe", "--cwd", str(job), "--run", "touch ran", "--power-loss", "--data", "data"])
    err = capsys.readouterr().err
    assert code == 2 and "--power-loss needs LazyFS: LazyFS is not installed" in err, err
    assert sorted(p.name for p in (job / "data").iterdir()) == ["mine.txt"]
