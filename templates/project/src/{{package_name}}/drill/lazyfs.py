"""A LazyFS mount: a directory whose un-fsynced writes can be dropped on command, as a power cut drops them.

`kill -9` never loses the kernel's page cache; LazyFS (https://github.com/dsrhaslab/lazyfs, FUSE) keeps its
own cache in front of a backing directory and ``clear_cache()`` drops every write not fsynced. Kill the
writers, clear the cache, restart on what is left. It models lost file *data* only: create, rename, unlink
and mkdir reach the backing directory at once (a rename whose directory was never fsynced survives), and
it trusts every fsync (no lying disk); torn writes only when armed (``send``). See docs/power-loss.md.

Standard library only, no import from the surrounding package: the toolkit loads this file by its path.
Every way out of ``lazyfs_mount`` unmounts (exception, SIGTERM, Ctrl-C); ``remove_stale_mounts`` clears
what a SIGKILLed parent left behind.
"""

from __future__ import annotations

import contextlib
import os
import re
import resource
import select
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

BINARY_ENV = "LAZYFS_BIN"  # an explicit path to the lazyfs binary wins over every search
FSTYPE = "fuse.lazyfs"  # how its mounts appear in /proc/self/mountinfo
HOW_TO_GET = (
    "Get LazyFS: in the Continuity Advisor's checkout run `make lazyfs`; or build it from "
    "https://github.com/dsrhaslab/lazyfs (Debian/Ubuntu: `apt-get install g++ cmake git libfuse3-dev fuse3`; its "
    "build fetches toml11 and spdlog from GitHub): `cd libs/libpcache && ./build.sh`, then `cd lazyfs && ./build.sh`, "
    f"and put lazyfs/build/lazyfs on PATH or set {BINARY_ENV}=/path/to/lazyfs; add `user_allow_other` to "
    "/etc/fuse.conf."
)


class LazyFSError(RuntimeError):
    """One message a person can act on (what, why, how to fix); no traceback needed."""


class LazyFSUnavailable(LazyFSError):
    """LazyFS cannot run here: no binary, no FUSE, or no permission to mount."""


def find_binary(extra: Sequence[Path] = ()) -> Path | None:
    """$LAZYFS_BIN, then `lazyfs` on PATH, /usr/local/bin, and ``extra`` (e.g. a checkout's .lazyfs/bin/lazyfs)."""
    env = os.environ.get(BINARY_ENV)
    if env:
        return Path(env) if os.path.isfile(env) and os.access(env, os.X_OK) else None
    on_path = shutil.which("lazyfs")
    candidates = [Path(on_path)] if on_path else []
    candidates += [Path("/usr/local/bin/lazyfs"), Path.cwd() / ".lazyfs/bin/lazyfs", *extra]
    return next((p for p in candidates if p.is_file() and os.access(p, os.X_OK)), None)


def unavailable_reason(extra: Sequence[Path] = ()) -> str | None:
    """Why LazyFS cannot be mounted by this process (None when it can), with how to fix it."""
    if find_binary(extra) is None:
        return _not_installed()
    return _fuse_problem()


def _not_installed() -> str:
    where = f"${BINARY_ENV} points at no executable" if os.environ.get(BINARY_ENV) else (
        "not on PATH, not in /usr/local/bin, not in .lazyfs/bin")
    return f"LazyFS is not installed ({where}). {HOW_TO_GET}"


def _fuse_problem() -> str | None:
    if not os.path.exists("/dev/fuse"):
        return ("FUSE is missing: no /dev/fuse (a container needs `--device /dev/fuse --cap-add SYS_ADMIN`; "
                "a machine needs the fuse kernel module and the `fuse3` package).")
    if os.geteuid() != 0:
        if shutil.which("fusermount3") is None:
            return "FUSE's fusermount3 is missing: install the `fuse3` package (or run as root)."
        if not _fuse_conf_allows_other():
            return "Not root and /etc/fuse.conf lacks `user_allow_other` (needed by -o allow_other): add that line."
    elif not os.access("/dev/fuse", os.R_OK | os.W_OK):
        return "/dev/fuse is not readable and writable by root here (a container needs `--device /dev/fuse`)."
    return None


def _fuse_conf_allows_other() -> bool:
    with contextlib.suppress(OSError):
        return any(line.strip() == "user_allow_other" for line in Path("/etc/fuse.conf").read_text().splitlines())
    return False


def lazyfs_mounts(under: Path | None = None) -> list[Path]:
    """Every LazyFS mount point in this mount namespace, or only those at or below ``under``."""
    root = os.path.realpath(under) if under is not None else None
    found = []
    with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as table:
        for line in table:
            fields = line.split()
            sep = fields.index("-")  # optional fields come before "-", then fstype
            if fields[sep + 1] != FSTYPE:
                continue
            point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4])  # \040 is a space
            if root is None or point == root or point.startswith(root.rstrip("/") + "/"):
                found.append(Path(point))
    return found


def _unmount(mountpoint: Path) -> bool:
    """fusermount3 -u; if busy, a lazy unmount (the kernel detaches it now, frees it when the last file closes).
    True when a plain unmount did it (LazyFS then exits by itself), False after a lazy one."""
    fusermount, root, point = shutil.which("fusermount3"), os.geteuid() == 0, str(mountpoint)
    plain = ([[fusermount, "-u", point]] if fusermount else []) + ([["umount", point]] if root else [])
    lazy = ([[fusermount, "-u", "-z", point]] if fusermount else []) + ([["umount", "-l", point]] if root else [])
    for cmd in plain + lazy:
        if not _is_mounted(mountpoint):
            break
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            subprocess.run(cmd, capture_output=True, timeout=20)
        if cmd in lazy:
            return False
    return True


def _is_mounted(mountpoint: Path) -> bool:
    return Path(mountpoint) in lazyfs_mounts()  # no realpath: a dead FUSE mount answers ENOTCONN to lstat


def _lazyfs_pids(mountpoint: Path) -> list[int]:
    """The lazyfs processes serving ``mountpoint`` (its first argument), found by their command lines."""
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            argv = (proc / "cmdline").read_bytes().split(b"\0")
            if len(argv) > 1 and Path(os.fsdecode(argv[0])).name == "lazyfs" and os.fsdecode(argv[1]) == str(mountpoint):
                pids.append(int(proc.name))
    return pids


def remove_stale_mounts(under: Path) -> list[Path]:
    """Unmount every LazyFS mount at or below ``under`` (left by a run that was SIGKILLed) and stop its
    lazyfs process; returns the mount points removed. Raises LazyFSError if one cannot be removed."""
    removed = []
    for point in lazyfs_mounts(under):
        pids = _lazyfs_pids(point)
        _unmount(point)
        for pid in pids:  # an unmounted lazyfs exits by itself; one that hangs is stopped
            _stop_pid(pid)
        if _is_mounted(point):
            raise LazyFSError(f"could not unmount the LazyFS mount {point}: try `umount -l {point}` as root")
        removed.append(point)
    return removed


def _stop_pid(pid: int, grace: float = 3.0) -> None:
    deadline = time.monotonic() + grace
    with contextlib.suppress(ProcessLookupError):
        while time.monotonic() < deadline:
            os.kill(pid, 0)
            time.sleep(0.05)
        os.kill(pid, signal.SIGKILL)


class LazyFS:
    """One LazyFS process serving ``mountpoint`` from ``backing``. Use it through ``lazyfs_mount``."""

    def __init__(self, backing: Path, mountpoint: Path, binary: Path, cache_size: str, workdir: Path) -> None:
        self.backing, self.mountpoint, self.binary = backing, mountpoint, binary
        self.log_path = workdir / "lazyfs.log"  # LazyFS's own output: acknowledgements and errors
        self._faults = workdir / "faults.fifo"  # commands in
        self._done = workdir / "done.fifo"  # "finished::clear-cache" out
        self._config = workdir / "lazyfs.toml"
        self._config.write_text(
            f'[faults]\nfifo_path="{self._faults}"\nfifo_path_completed="{self._done}"\n'
            # no eviction: an evicted dirty page would be written to the backing directory and survive the cut
            f'[cache]\napply_eviction=false\n[cache.simple]\ncustom_size="{cache_size}"\nblocks_per_page=1\n'
            '[filesystem]\nlog_all_operations=false\nlogfile=""\n')
        self._proc: subprocess.Popen[bytes] | None = None
        self._done_fd = -1

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def alive(self) -> bool:
        """False once LazyFS died (an armed crash fired); its mount then answers ENOTCONN until restart()."""
        return self._proc is not None and self._proc.poll() is None

    def crashed(self, timeout: float = 5.0) -> bool:
        """Whether LazyFS has died, waiting up to ``timeout`` seconds for it (a writer sees ENOTCONN a moment
        before the process is gone)."""
        if self._proc is None:
            return False
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._proc.wait(timeout)
        return not self.alive()

    def start(self, timeout: float = 20.0) -> None:
        if not self._done.exists():
            os.mkfifo(self._done)
        # Our reader must exist before LazyFS opens the FIFO for writing, or LazyFS's fault thread blocks.
        self._done_fd = os.open(self._done, os.O_RDONLY | os.O_NONBLOCK)
        offset = self.log_path.stat().st_size if self.log_path.exists() else 0  # a restart appends
        with open(self.log_path, "ab") as log:
            self._proc = subprocess.Popen(
                [str(self.binary), str(self.mountpoint), "--config-path", str(self._config), "-o", "allow_other",
                 "-o", "modules=subdir", "-o", f"subdir={self.backing}", "-f"],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,  # a Ctrl-C meant for us must not kill it before we unmount
                preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_CORE, (0, 0)))  # it aborts on exit
        try:
            self._await_log("waiting for fault commands", None, timeout, "start", offset)
            deadline = time.monotonic() + timeout
            while not _is_mounted(self.mountpoint):
                if not self.alive() or time.monotonic() > deadline:
                    raise LazyFSError(f"LazyFS did not mount {self.mountpoint}: {self._log_tail()}")
                time.sleep(0.02)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Unmount, then make sure the process is gone: fusermount3 -u, lazy unmount, SIGTERM, SIGKILL."""
        clean = _unmount(self.mountpoint)
        if self._proc is not None:
            try:  # after a lazy unmount LazyFS serves open files until they close: do not wait for that
                self._proc.wait(timeout=5 if clean else 0.5)
            except subprocess.TimeoutExpired:
                self._proc.terminate()
                try:
                    self._proc.wait(timeout=3)
                except subprocess.TimeoutExpired:
                    self._proc.kill()
                    self._proc.wait()
            self._proc = None
        _unmount(self.mountpoint)  # a killed LazyFS leaves a dead mount behind
        if self._done_fd >= 0:
            os.close(self._done_fd)
            self._done_fd = -1
        if _is_mounted(self.mountpoint):
            raise LazyFSError(f"could not unmount the LazyFS mount {self.mountpoint}: try `umount -l` as root")

    def restart(self, timeout: float = 20.0) -> None:
        """A fresh LazyFS over the same backing directory (after an armed crash fired, or to cut power by
        stopping it): its cache starts empty, so everything that was not fsynced is gone."""
        self.stop()
        self.start(timeout)

    def clear_cache(self, timeout: float = 60.0) -> float:
        """Drop every write not fsynced, as a power cut does; returns the seconds it took. Kill the writers
        first: a write after this call is cached again. LazyFS answers on its completion FIFO when done."""
        usage = self.cache_usage(timeout)
        if usage >= 100:
            # A full cache without eviction writes through to the backing directory: some unsynced writes
            # survived already, and the cut would be kinder than a real one.
            raise LazyFSError(f"LazyFS's cache is full ({usage:g}%): writes went straight to disk; mount with "
                              "a larger cache_size")
        started = time.monotonic()
        with contextlib.suppress(BlockingIOError):  # an answer nobody waited for (a timeout before)
            while os.read(self._done_fd, 4096):
                pass
        self._send("lazyfs::clear-cache")
        deadline, answer = started + timeout, b""
        while b"finished::clear-cache" not in answer:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self._done_fd], [], [], max(left, 0))
            if not ready:
                raise LazyFSError(f"LazyFS did not finish clear-cache within {timeout:g}s: {self._log_tail()}")
            chunk = os.read(self._done_fd, 4096)
            if not chunk:  # every writer closed the FIFO: LazyFS died
                raise LazyFSError(f"LazyFS died during clear-cache: {self._log_tail()}")
            answer += chunk
        return time.monotonic() - started

    def cache_usage(self, timeout: float = 10.0) -> float:
        """The share of LazyFS's cache pages in use, in percent (100: later writes bypass the cache)."""
        line = self._command("lazyfs::display-cache-usage", r"cache usage .* is ([0-9.]+)%", None, timeout)
        return float(re.search(r"is ([0-9.]+)%", line).group(1))  # type: ignore[union-attr]

    def checkpoint(self, timeout: float = 60.0) -> None:
        """Write every cached page to the backing directory (no fsync there): the kind outcome, where the
        kernel flushed everything just before the cut."""
        self._command("lazyfs::cache-checkpoint", "checkpoint is done", None, timeout)

    def crash_on(self, op: str, path_regex: str = "", *, timing: str = "before", to_regex: str = "",
                 timeout: float = 10.0) -> None:
        """Arm a power cut at a precise step: LazyFS SIGKILLs itself ``timing`` (before/after) the next
        ``op`` (write, fsync, rename, create, unlink, truncate, open, read, link, symlink, access) on a path
        matching ``path_regex`` (for rename/link/symlink ``to_regex`` matches the destination). Its cache
        dies with it; the writer gets ENOTCONN. Then restart() to mount the surviving state."""
        fault = f"lazyfs::crash::timing={timing}::op={op}"
        fault += f"::from_rgx={path_regex}" if path_regex else ""
        fault += f"::to_rgx={to_regex}" if to_regex else ""
        self.send(fault, timeout)

    def send(self, fault: str, timeout: float = 10.0) -> None:
        """Any other LazyFS fault command (lazyfs::crash, lazyfs::torn-op, lazyfs::torn-seq); waits for
        LazyFS to accept it, raises with its reason when it rejects it."""
        self._command(fault, r"VALID crash fault|configured successfully", r"INVALID|unknown", timeout)

    def _command(self, command: str, ok: str, bad: str | None, timeout: float) -> str:
        # One command at a time: LazyFS reads the FIFO in chunks and two commands in one read are garbage.
        offset = self.log_path.stat().st_size
        self._send(command)
        return self._await_log(ok, bad, timeout, command, offset)

    def _send(self, command: str) -> None:
        if not self.alive():
            raise LazyFSError(f"LazyFS is not running (it crashed or was stopped): {self._log_tail()}")
        try:
            fd = os.open(self._faults, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as exc:
            raise LazyFSError(f"LazyFS's faults FIFO {self._faults} is not open: {exc}") from None
        try:
            os.write(fd, command.encode() + b"\n")  # under PIPE_BUF: one atomic write
        except OSError as exc:  # a full FIFO: LazyFS stopped reading it
            raise LazyFSError(f"LazyFS does not read its faults FIFO ({exc}): {self._log_tail()}") from None
        finally:
            os.close(fd)

    def _await_log(self, ok: str, bad: str | None, timeout: float, what: str, offset: int = 0) -> str:
        deadline = time.monotonic() + timeout
        while True:
            with open(self.log_path, "rb") as log:
                log.seek(offset)
                for line in log.read().decode(errors="replace").splitlines():
                    if bad and re.search(bad, line):
                        time.sleep(0.05)  # its reasons follow on the next lines
                        raise LazyFSError(f"LazyFS rejected {what!r}: {self._log_tail(since=offset)}")
                    if re.search(ok, line):
                        return line
            if not self.alive() or time.monotonic() > deadline:
                state = "exited" if not self.alive() else f"did not answer within {timeout:g}s"
                raise LazyFSError(f"LazyFS {state} ({what}): {self._log_tail()}")
            time.sleep(0.01)

    def _log_tail(self, lines: int = 5, since: int = 0) -> str:
        """Its last lines, without spdlog's "[time] [console] [level]" prefixes."""
        with contextlib.suppress(OSError):
            with open(self.log_path, "rb") as log:
                log.seek(since)
                text = log.read().decode(errors="replace")
            tail = [re.sub(r"^(\[[^]]*\] ){3}", "", line) for line in text.strip().splitlines()[-lines:]]
            return " | ".join(tail) or "(no output)"
        return "(no log)"


@contextlib.contextmanager
def lazyfs_mount(backing: Path, mountpoint: Path, *, cache_size: str = "256mb", binary: Path | None = None,
                 timeout: float = 20.0) -> Iterator[LazyFS]:
    """Mount LazyFS at ``mountpoint`` over the directory ``backing``; always unmounted on the way out.

    ``cache_size`` (LazyFS syntax: "64mb", "1gb") is allocated up front and must hold every page the body
    writes or reads between two clear_cache() calls. Raises LazyFSUnavailable when LazyFS cannot run here.
    """
    binary = Path(binary) if binary is not None else find_binary()
    if binary is None or not os.access(binary, os.X_OK):
        raise LazyFSUnavailable(_not_installed() if binary is None else f"{binary} is not executable. {HOW_TO_GET}")
    problem = _fuse_problem()
    if problem:
        raise LazyFSUnavailable(problem)
    backing, mountpoint = Path(backing).resolve(), Path(mountpoint).resolve()
    if not backing.is_dir():
        raise LazyFSError(f"the backing directory {backing} does not exist")
    if "," in str(backing):  # it travels as the mount option subdir=..., and FUSE splits options at commas
        raise LazyFSError(f"the backing directory {backing} has a comma in its path: LazyFS cannot mount it")
    if mountpoint == backing or backing in mountpoint.parents or mountpoint in backing.parents:
        raise LazyFSError(f"mount point {mountpoint} and backing directory {backing} must not contain each other")
    if _is_mounted(mountpoint):
        raise LazyFSError(f"{mountpoint} is already a LazyFS mount (a stale one?): remove_stale_mounts() clears it")
    mountpoint.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="lazyfs_", dir=_workdir_parent()) as work, _sigterm_raises():
        fs = LazyFS(backing, mountpoint, binary, cache_size, Path(work))
        try:
            fs.start(timeout)
            yield fs
        finally:
            with _sigterm_deferred():
                fs.stop()


def _workdir_parent() -> str:
    """Where the config goes. LazyFS ignores a --config-path that contains "-o" in any case (it takes it
    for a mount option) and looks for config/default.toml instead: keep "-o" out of that path."""
    for parent in (tempfile.gettempdir(), "/tmp", "/dev/shm"):
        if "-o" not in parent.lower() and os.access(parent, os.W_OK):
            return parent
    raise LazyFSError('no writable temp directory without "-o" in its path for LazyFS\'s config: set TMPDIR')


@contextlib.contextmanager
def _sigterm_raises() -> Iterator[None]:
    """SIGTERM's default action ends the process without running `finally`; turn it into SystemExit(143)
    so the mount is undone. Only when nobody else handles SIGTERM, and only in the main thread."""
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGTERM) != signal.SIG_DFL:
        yield
        return

    def _raise(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, _raise)
    try:
        yield
    finally:
        if signal.getsignal(signal.SIGTERM) is _raise:  # a handler the body installed stays
            signal.signal(signal.SIGTERM, signal.SIG_DFL)


@contextlib.contextmanager
def _sigterm_deferred() -> Iterator[None]:
    """While unmounting, a SIGTERM waits: interrupting the unmount is how a stale mount is made."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: received.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
        if received and callable(previous):
            previous(signal.SIGTERM, None)
        elif received and previous == signal.SIG_DFL:
            raise SystemExit(128 + signal.SIGTERM)


if __name__ == "__main__":  # `python lazyfs.py`: can LazyFS run here? Exit 0 yes, 1 not installed, 2 no FUSE/permission
    _problem = unavailable_reason()
    print(_problem or f"LazyFS {find_binary()} can mount here")
    raise SystemExit(0 if _problem is None else 1 if find_binary() is None else 2)
