"""The power-loss drill (``drill --power-loss``): every crash is a power cut, not just a kill.

``kill -9`` does not empty the kernel's page cache: a write the worker never fsynced survives it.
Here the workers' data directory (the state store, checkpoint files) sits on a LazyFS mount
(lazyfs.py): after each kill LazyFS drops every write that was not fsynced, as a power cut does,
and the next worker restarts on what survived. The simulated external service's ``external.db``
stays in the drill's own directory, off the mount: it is the remote side, and a power cut here
does not take back what it applied.

Where the power goes out: the crash-point sweep's machinery (sweep.py, segments.py) arms one
worker at a time at a persistence point (runtime/faults.py): the N-th ``commit`` (the one before
it returned), ``called`` (an external call that returned, before anything recorded it),
``rename``/``dirsync`` (a file renamed, its directory not yet synced), ``fsync``, the strategy's
windows; a census first, then every point's first ``--sweep-prefix`` passes, ``--sweep-sample``
more drawn from ``--seed``, and ``--random-cuts`` kills by the drill at seeded moments (after a
drawn number of effects). After the last worker finished, one more cut: a job that says "done"
must still be done.

Around every cut the store is read twice, without changing it (store_snapshot.py): just before
(what it had committed) and just after. The verdict is the drill's (oracle, lost and duplicate
effects by the call's promise, results, ...) plus ``committed_lost`` (something the store had
committed is gone after a cut) and ``store_corrupt`` (a store that no longer opens, or fails
``PRAGMA integrity_check``). The report's ``power_loss`` names every cut, the crash points
covered, and the durable-commit latency measured on the mount beside the plain disk.

On PostgreSQL (``DATABASE_URL`` set) the store is a throwaway server of the drill's own on LazyFS,
with the team server's durability settings (power_loss_pg.py).

A queue input (RabbitMQ): the broker is the remote side, off the mount like the service; the consumer's
store is on it, and a message acked after a commit that a cut takes back is a lost record.

The stream project: Spark's checkpoint location is on the mount too; the project syncs each batch's
entries before its sink commits and mends what a cut emptied on start (stream_checkpoint/checkpoint_sync.py),
and the verdict judges the outcome. Several workers: power_loss_workers.py.
"""

from __future__ import annotations

import argparse
import os
import signal
import sqlite3
import subprocess
import time
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

from ..runtime.errors import JobError
from ..runtime.store import is_postgresql
from ..runtime.strategy import Context
from . import lazyfs, store_snapshot, verdict
from .durability import IN_COMMIT, committing
from .judge import PROBE_DIR
from .report_data import percentile
from .preflight import fresh_data_dir
from .segments import CrashPointRun
from .sweep import run_sweep
from .sweep_plan import SweepPlan, Target

BACKING_DIR = "power-loss-disk"  # the "disk": what survives a cut (inspect the state here afterwards)
MOUNT_DIR = "power-loss-mount"  # the workers' --data-dir while the drill runs
CACHE_SIZE = "128mb"  # LazyFS's cache: must hold every page written or read between two cuts
RANDOM_CUTS = 3
PREFIX = 1  # --power-loss: each point's first pass after a restart (the sweep's default is 2)
SAMPLE = 3
#: A cut by the drill at a moment, not at a point: the worker's kind of crash in the coverage.
RANDOM_POINT = "random@moment"
#: Commits timed on the mount and on the plain disk beside it (one row each, WAL, synchronous=FULL).
TIMED_COMMITS = 30


class PowerLossPlan(SweepPlan):
    """The sweep's plan, with ``random`` cuts at seeded moments spread among its points."""

    def __init__(self, prefix: int, sample: int, seed: int, random_cuts: int) -> None:
        super().__init__(prefix, sample, seed)
        self.random_cuts = random_cuts

    def next(self, remaining_effects: int, effects_per_batch: int) -> Target | None:
        drawn = sum(t.phase == "random" for t in self.targets)
        censused = any(t.phase == "census" for t in self.targets)
        wanted = censused and drawn < self.random_cuts and remaining_effects > 0
        if wanted and self.rng.random() < 0.3:
            return self._random(remaining_effects, effects_per_batch, drawn)
        target = super().next(remaining_effects, effects_per_batch)
        if target is None and wanted:
            return self._random(remaining_effects, effects_per_batch, drawn)
        return target

    def _random(self, remaining_effects: int, effects_per_batch: int, drawn: int) -> Target:
        # n: the effects the worker applies after its start before the drill cuts the power: within a
        # batch or two, and leaving work for the cuts still to come.
        span = min(2 * effects_per_batch, remaining_effects // (self.random_cuts - drawn + 2))
        target = Target("", self.rng.randint(1, max(1, span)), "random")
        self.targets.append(target)
        return target

    def coverage(self) -> dict[str, Any]:
        found = super().coverage()
        found["random_crashes"] = sum(t.phase == "random" and t.outcome == "killed" for t in self.targets)
        return found


class PowerLossRun(CrashPointRun):
    """A crash-point run whose workers keep their state on LazyFS, with a power cut after every kill."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, mode="power-loss", **kwargs)
        self.fs: lazyfs.LazyFS | None = None
        self.cuts: list[dict[str, Any]] = []
        self.kill_after: int | None = None  # a random cut: the effects after the worker's start
        self.latency: dict[str, Any] = {}
        self.in_commit: Path | None = None  # the last worker's marker while a COMMIT runs (durability.py)
        self.cache_size = CACHE_SIZE

    def run(self) -> dict[str, Any]:
        if self.data_dir_arg is not None and self.data_dir_arg.exists():
            lazyfs.remove_stale_mounts(self.data_dir_arg)  # left by a drill that was SIGKILLed there
        remove_orphaned_mounts(Path("data"))
        data_dir = fresh_data_dir(self.data_dir_arg)
        backing, self.work_dir = data_dir / BACKING_DIR, data_dir / MOUNT_DIR
        backing.mkdir()
        try:
            with lazyfs.lazyfs_mount(backing, self.work_dir, cache_size=CACHE_SIZE) as fs:
                self.fs = fs
                self.latency = commit_latency(self.work_dir, data_dir)
                self.emit({"event": "mounted", "mountpoint": str(self.work_dir), "backing": str(backing),
                           "t": self.t()})
                return self.run_in(data_dir)
        except lazyfs.LazyFSError as exc:  # LazyFS failed mid-run (a full cache, it died): say so, exit 2
            raise JobError(f"the power-loss drill stopped: {exc} (its files: {data_dir})") from None
        finally:
            self.fs = None

    # ------------------------------------------------------------ random cuts
    def _spawn(self, data_dir: Path, log: Any, target: Target | None) -> subprocess.Popen[bytes]:
        random = target is not None and target.phase == "random"
        self.kill_after = target.n if target is not None and random else None
        proc = super()._spawn(data_dir, log, None if random else target)  # the drill kills it, unarmed
        self.in_commit = data_dir / PROBE_DIR / f"{proc.pid}{IN_COMMIT}"
        return proc

    def watch(self, proc: subprocess.Popen[bytes], applied: int, at_start: int) -> None:
        if self.kill_after is not None and applied >= at_start + self.kill_after and proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.wait()

    def landed(self, target: Target, code: int, trace: dict[str, Any] | None) -> str | None:
        if target.phase == "random":
            return RANDOM_POINT if code == -signal.SIGKILL else None
        return super().landed(target, code, trace)

    # ------------------------------------------------------------ the cut
    own_session = True  # a cut ends the worker's children with it (the stream project's JVM)

    def dead_workers(self) -> list[subprocess.Popen[bytes]]:
        """The workers of the cut just made (one here; power_loss_workers.py: all of them)."""
        return [self.worker] if self.worker is not None else []

    def after_worker(self, target: Target | None, code: int) -> None:
        """The worker is dead: read the store, cut the power (clear LazyFS's cache), read it again."""
        for worker in self.dead_workers():  # the power is out for its children too (Spark's JVM)
            end_group(worker.pid)
        before = self.read_store()
        seconds = self.cut_power()
        gone = store_snapshot.lost(before, self.read_store())
        corrupt = self.store_problems()
        ended = "after the run ended" if code == 0 else f"after the worker failed (exit {code})"
        in_commit = bool(gone) and self.killed_in_commit()
        cut = {"n": len(self.cuts) + 1, "point": (target.landed if target else "") or ended,
               "phase": target.phase if target and target.landed else "end",
               "clear_cache_ms": round(seconds * 1000, 1),
               "lost": [] if in_commit else gone, "corrupt": corrupt,
               **({"in_commit": True, "not_returned": gone} if in_commit else {})}
        self.cuts.append(cut)
        self.emit({"event": "power_cut", **cut, "t": self.t()})

    # What a store is, for the cut: files under the mount here; a server in power_loss_pg.py.
    def read_store(self) -> store_snapshot.Snapshot:
        """What the store holds now, read without changing it."""
        assert self.work_dir is not None
        return store_snapshot.take(self.work_dir, self.unpromised())

    def cut_power(self) -> float:
        """Drop every write not fsynced (the writers are dead); the seconds it took."""
        assert self.fs is not None
        return float(self.fs.clear_cache())

    def store_problems(self) -> list[str]:
        """Each store that no longer opens or fails its integrity check after the cut."""
        assert self.work_dir is not None
        return store_snapshot.integrity(self.work_dir, self.unpromised())

    def unpromised(self) -> tuple[str, ...]:
        """Directories of the data directory where the strategy keeps no promise of its own (the stream
        project: Spark's checkpoint, which it mends on start, and Spark's scratch space)."""
        return tuple(getattr(self.ctx.strategy, "POWER_CUT_UNPROMISED", ()))

    #: Whether a worker killed inside a COMMIT may lose that commit to the cut (SQLite, files: yes;
    #: a server shows a commit only once it is durable: power_loss_pg.py).
    excuses_in_commit = True

    def killed_in_commit(self) -> bool:
        """Killed inside a COMMIT: what it wrote can be in the store's files, readable, and not yet
        synced; the commit never returned, so the cut may take it back. Not a committed loss."""
        return self.excuses_in_commit and self.in_commit_markers()

    def in_commit_markers(self) -> bool:
        """The killed worker's marker while a COMMIT runs (durability.py) is there."""
        return self.in_commit is not None and committing(self.in_commit)

    def more_failures(self, report: dict[str, Any]) -> list[dict[str, str]]:
        report["power_loss"] = {
            "cuts": len(self.cuts), "cuts_by_point": _count(c["point"] for c in self.cuts),
            "cut_log": self.cuts, "durable_commit_ms": self.latency,
            "mount": {"backing": str(report["data_dir"]) + "/" + BACKING_DIR, "cache_size": self.cache_size},
            "clear_cache_ms_max": max((c["clear_cache_ms"] for c in self.cuts), default=None),
        }
        failures = []
        unreadable = report.get("unreadable_store")
        if unreadable:
            failures.append(verdict.failure("store_corrupt", f"after the last power cut the strategy cannot read its "
                                                             f"store: {unreadable}"))
        for check, key, what in (("committed_lost", "lost", "lost what the store had committed"),
                                 ("store_corrupt", "corrupt", "left a store that does not open or fails its "
                                                              "integrity check")):
            bad = [c for c in self.cuts if c[key]]
            if bad:
                first = bad[0]
                failures.append(verdict.failure(check, f"{len(bad)} of {len(self.cuts)} power cut(s) {what}; the "
                                                       f"first, cut {first['n']} at {first['point']}: "
                                                       + "; ".join(first[key][:3])))
        return failures


def end_group(pgid: int, timeout_s: float = 10.0) -> None:
    """SIGKILL every process left in the group ``pgid`` (a dead worker's children), and wait until none is left."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            return  # nobody left in the group
        if not _alive_in_group(pgid):
            return  # only zombies left (dead, their files closed), waiting for their reaper
        time.sleep(0.02)


def _alive_in_group(pgid: int) -> bool:
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 2 and fields[2] == str(pgid) and fields[0] != "Z":
            return True
    return False


def _count(items: Any) -> dict[str, int]:
    counts: dict[str, int] = {}
    for item in items:
        counts[item] = counts.get(item, 0) + 1
    return dict(sorted(counts.items()))


def commit_latency(mounted: Path, plain: Path) -> dict[str, Any]:
    """Durable commits (WAL, synchronous=FULL, one row each) timed on the mount and on the plain disk
    beside it: LazyFS's fsync does not reach the disk, so the mount's are the faster (docs/power-loss.md)."""
    found: dict[str, Any] = {"commits": TIMED_COMMITS}
    for name, where in (("lazyfs", mounted), ("plain_disk", plain)):
        path = where / "drill-commit-timing.db"
        times = []
        with closing(sqlite3.connect(path, isolation_level=None)) as conn:
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = FULL")
            conn.execute("CREATE TABLE t (n INTEGER)")
            for n in range(TIMED_COMMITS):
                started = time.perf_counter()
                conn.execute("BEGIN")
                conn.execute("INSERT INTO t VALUES (?)", (n,))
                conn.execute("COMMIT")
                times.append((time.perf_counter() - started) * 1000)
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        found[name] = {"p50": round(percentile(times, 0.5) or 0, 3), "p95": round(percentile(times, 0.95) or 0, 3)}
    return found


def remove_orphaned_mounts(under: Path) -> list[Path]:
    """LazyFS mounts under ``under`` that no live drill serves (their lazyfs process is gone or was left
    to init when the drill was SIGKILLed): unmounted. A running drill's mount is left alone."""
    removed: list[Path] = []
    if not under.is_dir():
        return removed
    for point in lazyfs.lazyfs_mounts(under):
        pids = lazyfs._lazyfs_pids(point)
        if pids and any(_parent(pid) not in (0, 1) for pid in pids):
            continue
        removed += lazyfs.remove_stale_mounts(point)
    return removed


def _parent(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0


def check_applicable(ctx: Context, args: argparse.Namespace) -> None:
    """Refuse, with one line each, what the power-loss drill does not cover (exit 2)."""
    if is_postgresql(ctx.settings.database_url):  # a throwaway server of the drill's own (power_loss_pg.py)
        from . import pg_power

        reason = pg_power.unavailable_reason()
        if reason:
            raise JobError("drill --power-loss runs a throwaway PostgreSQL server of its own on LazyFS (your "
                           f"server is never touched), which cannot run here: {reason}")
    if args.workers > 1 and not getattr(ctx.strategy, "MULTI_WORKER", False):
        raise JobError(f"the {getattr(ctx.strategy, 'NAME', 'strategy')} variant runs one worker per data directory; "
                       "use --workers 1")
    reason = lazyfs.unavailable_reason()
    if reason:
        how = "" if "make lazyfs" in reason else " " + lazyfs.HOW_TO_GET
        raise JobError(f"drill --power-loss needs LazyFS, which cannot run here: {reason}{how}")


def run_power_loss(args: argparse.Namespace, ctx: Context, emit: Callable[[dict[str, Any]], None], *,
                   run: type[PowerLossRun] = PowerLossRun, plan: SweepPlan | None = None) -> dict[str, Any]:
    """``drill --power-loss``: the demo records, swept with a power cut at every crash; ``run``: the store's
    kind of run (power_loss_pg.py's for a project on PostgreSQL), ``plan`` its cuts (power_loss_workers.py's
    for several workers)."""
    check_applicable(ctx, args)
    plan = plan or PowerLossPlan(args.sweep_prefix, args.sweep_sample, args.seed, args.random_cuts)
    return run_sweep(args, ctx, emit, plan=plan, run=run, several_workers=args.workers > 1)


def summary_lines(report: dict[str, Any]) -> list[str]:
    """The power-loss part of the text report."""
    power = report.get("power_loss")
    if not power:
        return []
    by_kind: dict[str, int] = {}
    for point, n in power["cuts_by_point"].items():  # "commit@worker.checkpoint" -> commit
        kind = point.split("@", 1)[0] if "@" in point else point
        by_kind[kind] = by_kind.get(kind, 0) + n
    latency = power["durable_commit_ms"]
    lines = [f"power loss: {power['cuts']} power cuts on LazyFS (un-fsynced writes dropped each time); by kind: "
             + ", ".join(f"{kind} {n}" for kind, n in by_kind.items())]
    if power.get("workers", 1) > 1:
        lines.append(f"power loss: {power['workers']} workers; every cut killed all that were running, at seeded "
                     f"moments ({report['kills']} worker kills in {power['cuts'] - 1} cuts before the last)")
    server = power.get("postgresql")
    if server:
        shown = ", ".join(f"{k}={server['settings'][k]}" for k in ("fsync", "synchronous_commit")
                          if k in server["settings"])
        lines.append(f"power loss: a throwaway server ({server['version'] or 'PostgreSQL'}) on LazyFS, restarted "
                     f"{server['server_starts'] - 1} time(s) after a cut; settings from {server['settings_from']}"
                     + (f" ({shown})" if shown else ""))
        if latency:
            lines.append(f"power loss: PostgreSQL commit p50 {latency['lazyfs']['p50']} ms on LazyFS (LazyFS "
                         "does not sync its disk: time durability on the real one)")
        return lines
    if latency:
        lines.append(f"power loss: durable commit (WAL, synchronous=FULL) p50 {latency['lazyfs']['p50']} ms on "
                     f"LazyFS, {latency['plain_disk']['p50']} ms on the plain disk (LazyFS does not sync its disk: "
                     "time durability on the real one)")
    lines.append(f"power loss: what survived is in {power['mount']['backing']}")
    return lines
