"""Benchmark: the checkpoint project's throughput curve, as an outsider would measure it.

    python benchmarks/bench_curve.py [--records 3000,15000,60000] [--rounds 3] [--quick] [--check]
                                     [--dbos-max-records 15000 | --no-dbos]

One job, four sides, in ONE run, alternating which of the first three goes first in each round
(DBOS, when run, goes last in every round, and its writes are flushed before the next side):

* **raw**: a plain loop calling the same effect — the generated project's
  ``ExternalService.apply``, one durable SQLite commit per call in external.db — and keeping
  no progress (benchmarks/curve_sides.py raw);
* **naive**: the same loop keeping its progress the obvious way, each record's result and the
  offset in one durable commit per record (curve_sides.py naive): what the strategy saves;
* **ours**: the generated checkpoint project, ``python -m bench_job run`` after an untimed
  ``submit-demo``;
* **dbos**: the same job on DBOS Transact (curve_sides.py dbos): one workflow over the records,
  one step per record, the same ``apply`` with the same keys, DBOS's SQLite system database.
  A benchmark-only extra (``pip install -e '.[bench]'``; ``make bench`` installs it): without
  it the side prints ``skipped: ...`` and the others run. DBOS pays ~15-25 ms per step on this
  machine, so by default it runs only up to ``--dbos-max-records`` (15,000: ~5 minutes a run);
  above that its cells say ``not run``.

``--service-fsync off``: the same sides with the service's fsync per call turned off on
every side (curve_sides.py: BENCH_SERVICE_FSYNC=off; ours then runs ``cli.main(["run", ...])``
from curve_sides.py, the same code): what is left is the loops' own cost. Not a target.

Every side is a fresh ``python`` process timed from outside, from its start to its exit:
the interpreter's start and the imports are in every side's time (printed apart once). Each
round prints the load average (``os.getloadavg``): the machine may be shared.

Then, per N, one extra run of ``run`` in-process (not in the rounds: measuring costs time)
splits ours per record: the effect (``apply``), our COMMITs (count per batch, time) and the
rest (our Python and our other SQL).

``--check`` makes a missed target exit 1 (target, issue 25: ours >= 0.9 x raw at every N,
median of the rounds). Without it the script only reports, so ``make bench`` does not fail on
a noisy machine. The DBOS side has no target: it is printed for comparison. ``--quick`` (or
BENCH_QUICK=1): 1,000 / 3,000 / 6,000 records, 2 rounds. Results and method: docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from advisor import scaffold  # noqa: E402

PACKAGE = "bench_job"
SIDES_SCRIPT = Path(__file__).with_name("curve_sides.py")
TARGET_VS_RAW = 0.9  # issue 25: ours >= 0.9 x raw at every N of the curve
SIDES = ("ours", "raw", "naive", "dbos")
#: These three rotate round by round; DBOS (when run) goes last in every round.
ROTATED = ("ours", "raw", "naive")
#: The DBOS side runs up to this many records by default (~15-25 ms per step here).
DBOS_MAX_RECORDS = 15_000
#: What installs the DBOS side (pyproject.toml's bench extra; curve_sides.DBOS_REQUIREMENT).
DBOS_INSTALL = "pip install -e '.[bench]' (or pip install 'dbos==3.4.0')"


class Project:
    """The generated checkpoint project and the commands that run its sides."""

    def __init__(self, dest: Path, *, service_fsync: bool) -> None:
        self.dest = dest
        self.service_fsync = service_fsync
        self.env = {**os.environ, "PYTHONPATH": str(dest / "src"), "PYTHONDONTWRITEBYTECODE": "0",
                    "BENCH_SERVICE_FSYNC": "on" if service_fsync else "off"}

    def python(self, *args: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([sys.executable, *args], env=self.env, capture_output=True, text=True,
                              cwd=self.dest)
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(args[:3])} exited {done.returncode}: {done.stderr.strip()[-400:]}")
        return done

    def timed(self, *args: str) -> float:
        began = time.perf_counter()
        self.python(*args)
        return time.perf_counter() - began

    def submit(self, data_dir: Path, records: int) -> None:
        self.python("-m", PACKAGE, "submit-demo", "--records", str(records), "--data-dir", str(data_dir))

    def side(self, side: str, data_dir: Path, records: int) -> float:
        """Records per second of one side, interpreter start included; its effects checked."""
        if side == "ours" and self.service_fsync:
            self.submit(data_dir, records)
            seconds = self.timed("-m", PACKAGE, "run", "--data-dir", str(data_dir))
        elif side == "ours":  # the same run, with the service's fsync turned off in its process
            self.submit(data_dir, records)
            seconds = self.timed(str(SIDES_SCRIPT), "ours", PACKAGE, str(data_dir), str(records))
        else:  # raw, naive, dbos
            seconds = self.timed(str(SIDES_SCRIPT), side, PACKAGE, str(data_dir), str(records))
        applied = effects(data_dir)
        if applied != records:
            raise SystemExit(f"{side}: {applied} effects applied for {records} records")
        return records / seconds


def effects(data_dir: Path) -> int:
    conn = sqlite3.connect(data_dir / "external.db")
    try:
        return int(conn.execute("SELECT COUNT(*) FROM effects").fetchone()[0])
    finally:
        conn.close()


def dbos_version(project: Project) -> str | None:
    """The installed dbos release, or None (the side is skipped)."""
    done = subprocess.run([sys.executable, "-c", "import dbos; from importlib.metadata import version; print(version('dbos'))"],
                          env=project.env, capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 else None


def dbos_durability(data_dir: Path) -> str:
    """What DBOS's SQLite system database runs with, read back: its journal mode (kept in the
    file) and the synchronous level a connection of this sqlite3 gets when, as in DBOS 3.4.0,
    nobody sets it (per connection, SQLite's compiled default)."""
    conn = sqlite3.connect(data_dir / "dbos-sys.sqlite")
    try:
        mode = str(conn.execute("PRAGMA journal_mode").fetchone()[0])
        level = int(conn.execute("PRAGMA synchronous").fetchone()[0])
    finally:
        conn.close()
    return f"journal_mode={mode}, synchronous={ {0: 'OFF', 1: 'NORMAL', 2: 'FULL', 3: 'EXTRA'}.get(level, level)}"


def start_seconds(project: Project, imports: str) -> float:
    """The median of 3 interpreter starts that import ``imports`` and exit."""
    return statistics.median(project.timed("-c", f"import {imports}") for _ in range(3))


def spread(values: list[float], fmt: str = ".0f") -> str:
    if not values:
        return "not run"
    return f"{statistics.median(values):{fmt}} ({min(values):{fmt}}-{max(values):{fmt}})"


def split_ours(project: Project, data_dir: Path, records: int, batch_size: int) -> str:
    """Per record: the effect, our commits, the rest (our Python and other SQL), in-process."""
    project.submit(data_dir, records)
    spent = json.loads(project.python(str(SIDES_SCRIPT), "profile", PACKAGE, str(data_dir),
                                      str(records)).stdout.strip().splitlines()[-1])
    per = 1e6 / records
    effect, commit = spent["effect_s"] * per, spent["commit_s"] * per
    rest = spent["run_s"] * per - effect - commit
    batches = records / batch_size
    return (f"    ours per record (in-process run, {spent['run_s']:.2f} s): effect {effect:.0f} us, our commits "
            f"{commit:.0f} us ({spent['commits'] / batches:.2f} COMMITs per batch of {batch_size}, "
            f"{spent['statements'] / batches:.1f} statements per batch), our Python + other SQL {rest:.0f} us")


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--records", default="3000,15000,60000", help="comma-separated record counts")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", default=os.environ.get("BENCH_QUICK") == "1",
                        help="1,000/3,000/6,000 records, 2 rounds (also BENCH_QUICK=1)")
    parser.add_argument("--service-fsync", choices=("on", "off"), default="on",
                        help="off: the external service without its fsync per call, on every side "
                             "(our own cost with nothing to hide it; not a target)")
    parser.add_argument("--no-split", action="store_true", help="skip the per-record split of ours")
    parser.add_argument("--no-dbos", action="store_true", help="leave the DBOS side out")
    parser.add_argument("--dbos-max-records", type=int, default=DBOS_MAX_RECORDS, metavar="N",
                        help=f"run the DBOS side only at record counts up to N (default {DBOS_MAX_RECORDS:,}: "
                             "it pays ~15-25 ms per step on a 2-core machine)")
    parser.add_argument("--check", action="store_true",
                        help=f"exit 1 when ours < {TARGET_VS_RAW} x raw at some N (median of the rounds)")
    args = parser.parse_args()
    if args.quick:
        args.records, args.rounds = "1000,3000,6000", 2
        args.dbos_max_records = min(args.dbos_max_records, 3000)
    args.sizes = [int(n) for n in args.records.split(",")]
    return args


def main() -> int:
    args = parse()
    missed: list[str] = []
    with tempfile.TemporaryDirectory(prefix="bench-curve-") as tmp:
        root = Path(tmp)
        generated = scaffold.generate("checkpoint", root / "project", {"project_name": "Bench Job"})
        project = Project(generated.dest, service_fsync=args.service_fsync == "on")
        batch_size = int(project.python("-c", f"from {PACKAGE}.settings import Settings; "
                                              "print(Settings().batch_size)").stdout)
        ours_start = start_seconds(project, f"{PACKAGE}.cli")
        raw_start = start_seconds(project, f"{PACKAGE}.job, {PACKAGE}.runtime.external")
        dbos = None if args.no_dbos else dbos_version(project)
        sides = SIDES if dbos else tuple(s for s in SIDES if s != "dbos")
        versus = "a raw loop, a naive loop and DBOS" if dbos else "a raw loop and a naive loop"
        print(f"checkpoint project (batch size {batch_size}) vs {versus}, the same effect "
              f"(ExternalService.apply: one SQLite commit per call, service fsync {args.service_fsync}); {args.rounds} "
              f"rounds per N, the sides alternating; every side a fresh python process timed from outside, "
              f"interpreter start INCLUDED on all sides (start + imports: ours {ours_start * 1000:.0f} ms, "
              f"raw/naive {raw_start * 1000:.0f} ms", end="")
        if dbos:
            dbos_start = start_seconds(project, f"dbos, {PACKAGE}.job, {PACKAGE}.runtime.external")
            print(f", dbos {dbos_start * 1000:.0f} ms)")
            print(f"dbos {dbos}: one workflow, one @DBOS.step() per record, system database SQLite with DBOS's "
                  f"own settings; run at N <= {args.dbos_max_records:,} (--dbos-max-records)")
        else:
            print(")")
            print("dbos: left out (--no-dbos)" if args.no_dbos else f"dbos: skipped: dbos is not installed; {DBOS_INSTALL}")
        print(f"{'records':>8}  {'raw rec/s':>18}  {'naive rec/s':>18}  {'ours rec/s':>18}  {'dbos rec/s':>18}  "
              f"{'ours/raw':>18}  {'ours/naive':>18}  {'ours/dbos':>18}  load (1 min)")
        journal = None
        for n in args.sizes:
            three = ROTATED
            with_dbos = "dbos" in sides and n <= args.dbos_max_records
            rates: dict[str, list[float]] = {side: [] for side in SIDES}
            loads = []
            for r in range(args.rounds):
                loads.append(os.getloadavg()[0])
                order = three[r % 3:] + three[:r % 3]  # who goes first moves round by round
                for side in order:
                    rates[side].append(project.side(side, root / f"{side}-{n}-{r}", n))
                if with_dbos:
                    # Last in every round, then its writes flushed: in a rotation of four, ours ran
                    # right after DBOS in 2 of 3 rounds and ours/raw fell to 0.64 at 15,000 records
                    # (0.87 without DBOS at the same load): docs/benchmarks.md.
                    rates["dbos"].append(project.side("dbos", root / f"dbos-{n}-{r}", n))
                    os.sync()
                loads.append(os.getloadavg()[0])
            if rates["dbos"] and journal is None:
                journal = dbos_durability(root / f"dbos-{n}-0")
            vs_raw = [o / b for o, b in zip(rates["ours"], rates["raw"])]
            vs_naive = [o / b for o, b in zip(rates["ours"], rates["naive"])]
            vs_dbos = [o / b for o, b in zip(rates["ours"], rates["dbos"])]
            print(f"{n:>8}  {spread(rates['raw']):>18}  {spread(rates['naive']):>18}  {spread(rates['ours']):>18}  "
                  f"{spread(rates['dbos']):>18}  {spread(vs_raw, '.2f'):>18}  {spread(vs_naive, '.2f'):>18}  "
                  f"{spread(vs_dbos, '.2f'):>18}  {min(loads):.1f}-{max(loads):.1f}", flush=True)
            if statistics.median(vs_raw) < TARGET_VS_RAW and project.service_fsync:
                missed.append(f"ours/raw {statistics.median(vs_raw):.2f} < {TARGET_VS_RAW} at {n} records")
            if not args.no_split:
                print(split_ours(project, root / f"split-{n}", n, batch_size), flush=True)
        if journal is not None:
            print(f"dbos system database, read back: {journal} (DBOS {dbos} sets neither: SQLite's defaults; "
                  f"the rollback journal costs several fsyncs per commit, one commit per step)")
    for line in missed:
        print(f"MISSED: {line}")
    if not project.service_fsync:
        print("service fsync off: the ratios show our own cost alone, printed, not a target")
    elif not missed:
        print(f"target met: ours >= {TARGET_VS_RAW} x raw at every N (median of the rounds)")
    return 1 if missed and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
