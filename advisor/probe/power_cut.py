"""``advisor probe --power-loss --data DIR``: the job's data directory on LazyFS, a power cut with every kill.

`kill -9` never loses the kernel's page cache: a job that forgets an fsync survives every kill and
loses its data at the first power cut. Here the job's data directory is mounted through LazyFS
(a FUSE filesystem with its own page cache) and after every SIGKILL the probe drops every write
the job did not fsync, as a power cut would, before it restarts the job on what survived.

The user's directory is never written: LazyFS is mounted over it, backed by a copy of its contents
in the probe's temporary directory. While the probe runs the job (and its progress and verify
commands) see that copy; once the mount is gone, ``DIR`` is exactly as it was before the probe.

The mount manager is the generated project's own (its power-loss drill uses it): one file that
imports nothing from its package, loaded here by its path.
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

from advisor.errors import ProbeError
from advisor.paths import templates_dir

MODULE = "advisor_lazyfs_mount_manager"


def module_path() -> Path:
    return templates_dir() / "project" / "src" / "{{package_name}}" / "drill" / "lazyfs.py"


def checkout_binary() -> Path:
    """Where `make lazyfs` puts the binary in a checkout when it cannot install it system-wide."""
    return templates_dir().parent / ".lazyfs" / "bin" / "lazyfs"


def lazyfs() -> ModuleType:
    if MODULE not in sys.modules:
        spec = importlib.util.spec_from_file_location(MODULE, module_path())
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[MODULE] = module
        spec.loader.exec_module(module)
    return sys.modules[MODULE]


def unavailable_reason() -> str | None:
    """Why LazyFS cannot be mounted here (what is missing and how to get it), or None."""
    reason: str | None = lazyfs().unavailable_reason([checkout_binary()])
    return reason


@contextmanager
def power_loss_mount(data: Path, tmp: Path) -> Iterator[Any]:
    """LazyFS mounted at ``data`` over a copy of its contents; yields the mount (``clear_cache()``
    is the power cut). Always unmounted on the way out; ``data`` itself is never written."""
    module = lazyfs()
    reason = unavailable_reason()
    if reason:
        raise ProbeError(f"--power-loss needs LazyFS: {reason}")
    backing = tmp / "power-loss-copy"
    try:
        shutil.copytree(data, backing, symlinks=True)
    except OSError as exc:
        raise ProbeError(f"--data {data}: cannot copy it for the power-loss drill ({exc}).") from None
    try:
        with module.lazyfs_mount(backing, data, binary=module.find_binary([checkout_binary()])) as fs:
            yield fs
    except module.LazyFSError as exc:
        raise ProbeError(f"--power-loss: {exc}") from None
