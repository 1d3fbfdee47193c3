"""Power loss with LazyFS (templates/project/src/{{package_name}}/drill/lazyfs.py): what survives a SIGKILL of
the writer followed by LazyFS dropping every write that was not fsynced, and that no mount outlives its run.

Skipped, with the reason and how to get LazyFS, where it cannot run (`make lazyfs` builds it). Each finding
below is asserted both ways where LazyFS tells them apart, and where it cannot (a rename whose directory was
never fsynced) the test pins what it does, so that a LazyFS which starts modelling it fails here first.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from lazyfs_support import CHECKOUT_BINARY, MODULE_PATH, binary, load_lazyfs, skip_reason

lazyfs = load_lazyfs()
REASON = skip_reason()
needs_lazyfs = pytest.mark.skipif(REASON is not None, reason=f"power-loss tests need LazyFS: {REASON}")
COMMITS = 100

# A writer that commits COMMITS units one transaction each, says so, and waits to be SIGKILLed.
SQLITE_WRITER = textwrap.dedent("""
    import sqlite3, sys, time
    db = sqlite3.connect(sys.argv[1], isolation_level=None)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute(f"PRAGMA synchronous = {sys.argv[2]}")
    db.execute("CREATE TABLE unit (id INTEGER PRIMARY KEY)")
    for i in range(int(sys.argv[3])):
        db.execute("INSERT INTO unit VALUES (?)", (i,))
    print("committed", flush=True)
    time.sleep(600)
""")


@pytest.fixture
def mounted(tmp_path: Path):
    """(the LazyFS handle, its mount point) over tmp_path/backing; unmounted afterwards."""
    (tmp_path / "backing").mkdir()
    with lazyfs.lazyfs_mount(tmp_path / "backing", tmp_path / "mnt", cache_size="64mb", binary=binary()) as fs:
        yield fs, tmp_path / "mnt"
    assert not lazyfs.lazyfs_mounts(tmp_path)


def sigkilled_after(cmd: list[str]) -> None:
    """Run ``cmd`` until it prints its first line (its work is done), then kill -9 it."""
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True) as proc:
        assert proc.stdout is not None and proc.stdout.readline().strip(), "the writer died before its commits"
        proc.send_signal(signal.SIGKILL)
        proc.wait()


def copied(folder: Path, dest: Path, name: str) -> Path:
    """A copy of the database and its -wal/-shm, to read without touching the original: closing the last
    connection would checkpoint the WAL into the database file and change what the power cut finds."""
    dest.mkdir()
    for path in folder.glob(f"{name}*"):
        shutil.copyfile(path, dest / path.name)
    return dest / name


def surviving_units(db: Path) -> int:
    """Rows of the unit table after the power cut; 0 when the table itself was lost."""
    with contextlib.closing(sqlite3.connect(db)) as conn:  # an open file would keep the mount busy
        try:
            return int(conn.execute("SELECT count(*) FROM unit").fetchone()[0])
        except sqlite3.OperationalError as exc:
            assert "no such table" in str(exc), exc
            return 0


@needs_lazyfs
@pytest.mark.parametrize("synchronous, survivors", [
    ("FULL", COMMITS),  # WAL fsynced at every commit: all of them survive
    ("NORMAL", 0),      # WAL fsynced only at checkpoints (1,000 pages): none reached; the table is lost too
    ("OFF", 0),         # never fsynced
])
def test_sqlite_wal_commits_survive_a_power_cut_only_with_synchronous_full(mounted, tmp_path, synchronous, survivors):
    fs, mnt = mounted
    sigkilled_after([sys.executable, "-c", SQLITE_WRITER, str(mnt / "state.db"), synchronous, str(COMMITS)])
    assert surviving_units(copied(mnt, tmp_path / "after-kill", "state.db")) == COMMITS, "kill -9 alone loses nothing"
    fs.clear_cache()
    assert surviving_units(mnt / "state.db") == survivors


def write_file(path: Path, text: str, *, fsync: bool) -> None:
    with open(path, "w") as f:
        f.write(text)
        if fsync:
            f.flush()
            os.fsync(f.fileno())


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@needs_lazyfs
def test_a_file_renamed_into_place_without_fsyncing_its_data_comes_back_empty(mounted):
    """The classic zero-length-file bug: the rename reached the disk, the data did not."""
    fs, mnt = mounted
    write_file(mnt / "checkpoint.json", '{"offset": 1}', fsync=True)
    fsync_dir(mnt)
    write_file(mnt / "checkpoint.json.tmp", '{"offset": 2}', fsync=False)
    os.replace(mnt / "checkpoint.json.tmp", mnt / "checkpoint.json")
    fs.clear_cache()
    assert (mnt / "checkpoint.json").read_text() == ""  # neither the old checkpoint nor the new one


@needs_lazyfs
@pytest.mark.parametrize("directory_fsynced", [True, False])
def test_lazyfs_keeps_every_rename_even_when_the_directory_was_never_fsynced(mounted, directory_fsynced):
    """LazyFS caches file data only: create, rename and unlink reach the backing directory at once, so it
    cannot show a missing directory fsync (on ext4/XFS a power cut may undo such a rename)."""
    fs, mnt = mounted
    write_file(mnt / "checkpoint.json", '{"offset": 1}', fsync=True)
    write_file(mnt / "checkpoint.json.tmp", '{"offset": 2}', fsync=True)
    os.replace(mnt / "checkpoint.json.tmp", mnt / "checkpoint.json")
    if directory_fsynced:
        fsync_dir(mnt)  # LazyFS has no fsyncdir: FUSE answers it as done
    fs.clear_cache()
    assert (mnt / "checkpoint.json").read_text() == '{"offset": 2}'
    assert not (mnt / "checkpoint.json.tmp").exists()


@needs_lazyfs
def test_an_armed_crash_cuts_power_at_the_rename_and_restart_mounts_what_survived(mounted):
    fs, mnt = mounted
    write_file(mnt / "checkpoint.json", '{"offset": 1}', fsync=True)
    write_file(mnt / "unsynced.log", "lost", fsync=False)
    fs.crash_on("rename", "checkpoint", timing="before")
    write_file(mnt / "checkpoint.json.tmp", '{"offset": 2}', fsync=True)
    with pytest.raises(OSError):  # ENOTCONN: LazyFS killed itself before the rename
        os.replace(mnt / "checkpoint.json.tmp", mnt / "checkpoint.json")
    assert fs.crashed()
    fs.restart()
    assert (mnt / "checkpoint.json").read_text() == '{"offset": 1}'
    assert (mnt / "checkpoint.json.tmp").read_text() == '{"offset": 2}'
    assert (mnt / "unsynced.log").read_text() == ""


@needs_lazyfs
def test_a_fault_lazyfs_rejects_is_reported_with_its_reason(mounted):
    fs, _ = mounted
    with pytest.raises(lazyfs.LazyFSError, match="timing should be 'before' or 'after'"):
        fs.crash_on("write", "x", timing="during")
    assert fs.alive()


def mounts_in_table(under: Path) -> list[str]:
    """LazyFS mount points under ``under`` as /proc/self/mounts lists them (not through the module)."""
    rows = [line.split() for line in Path("/proc/self/mounts").read_text().splitlines()]
    return [row[1] for row in rows if row[2] == "fuse.lazyfs" and (row[1] + "/").startswith(f"{under}/")]


@needs_lazyfs
def test_a_failing_body_leaves_no_mount_and_no_lazyfs_process(tmp_path):
    (tmp_path / "backing").mkdir()
    with pytest.raises(RuntimeError, match="the body failed"):
        with lazyfs.lazyfs_mount(tmp_path / "backing", tmp_path / "mnt", cache_size="16mb", binary=binary()) as fs:
            assert mounts_in_table(tmp_path) == [str(tmp_path / "mnt")]
            pid = fs.pid
            raise RuntimeError("the body failed")
    assert mounts_in_table(tmp_path) == []
    assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]


HOLDER = textwrap.dedent("""
    import importlib.util, signal, sys, time
    from pathlib import Path
    # As from a terminal: a process started under pytest-xdist inherits SIGINT ignored, and Python
    # then installs no KeyboardInterrupt handler of its own.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    spec = importlib.util.spec_from_file_location("lazyfs", sys.argv[1])
    lazyfs = importlib.util.module_from_spec(spec); spec.loader.exec_module(lazyfs)
    root = Path(sys.argv[2])
    with lazyfs.lazyfs_mount(root / "backing", root / "mnt", cache_size="16mb", binary=Path(sys.argv[3])):
        print("mounted", flush=True)
        time.sleep(600)
""")


@needs_lazyfs
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_stopped_run_unmounts_on_its_way_out(tmp_path, signum):
    (tmp_path / "backing").mkdir()
    cmd = [sys.executable, "-c", HOLDER, str(lazyfs.__file__), str(tmp_path), str(binary())]
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as holder:
        assert holder.stdout is not None and holder.stdout.readline() == "mounted\n"
        assert mounts_in_table(tmp_path) == [str(tmp_path / "mnt")]
        holder.send_signal(signum)
        try:
            holder.wait(timeout=60)
        except subprocess.TimeoutExpired:
            holder.kill()  # it ignored the signal: fail now, never wait out its sleep, leave no mount
            lazyfs.remove_stale_mounts(tmp_path)
            raise
    assert mounts_in_table(tmp_path) == []


@needs_lazyfs
def test_a_sigkilled_run_leaves_a_mount_that_remove_stale_mounts_clears(tmp_path):
    (tmp_path / "backing").mkdir()
    cmd = [sys.executable, "-c", HOLDER, str(lazyfs.__file__), str(tmp_path), str(binary())]
    try:
        with subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True) as holder:
            assert holder.stdout is not None and holder.stdout.readline() == "mounted\n"
            holder.send_signal(signal.SIGKILL)
            holder.wait()
        assert mounts_in_table(tmp_path) == [str(tmp_path / "mnt")]  # nothing can unmount after a SIGKILL
        assert lazyfs.remove_stale_mounts(tmp_path) == [tmp_path / "mnt"]
        assert mounts_in_table(tmp_path) == []
        assert lazyfs.remove_stale_mounts(tmp_path) == []
    finally:
        lazyfs.remove_stale_mounts(tmp_path)


def test_without_lazyfs_the_mount_says_how_to_get_it(tmp_path, monkeypatch):
    """Runs everywhere: a missing binary is one clear message naming where to get LazyFS."""
    monkeypatch.setenv(lazyfs.BINARY_ENV, str(tmp_path / "no-such-lazyfs"))
    (tmp_path / "backing").mkdir()
    assert "dsrhaslab/lazyfs" in lazyfs.unavailable_reason([CHECKOUT_BINARY])
    with pytest.raises(lazyfs.LazyFSUnavailable, match=r"not installed .*make lazyfs.*dsrhaslab/lazyfs"):
        with lazyfs.lazyfs_mount(tmp_path / "backing", tmp_path / "mnt"):
            pass
    assert not (tmp_path / "mnt").exists()


def test_the_module_run_as_a_script_says_whether_lazyfs_can_run(tmp_path):
    """`python lazyfs.py` is what `make lazyfs` asks first: exit 1 and how to get it when it is missing."""
    env = {**os.environ, lazyfs.BINARY_ENV: str(tmp_path / "no-such-lazyfs")}
    missing = subprocess.run([sys.executable, str(MODULE_PATH)], env=env, capture_output=True, text=True, timeout=60)
    assert missing.returncode == 1 and "make lazyfs" in missing.stdout and not missing.stderr
    if REASON is None:
        found = subprocess.run([sys.executable, str(MODULE_PATH)], capture_output=True, text=True, timeout=60,
                               env={**os.environ, lazyfs.BINARY_ENV: str(binary())})
        assert found.returncode == 0 and "can mount here" in found.stdout
