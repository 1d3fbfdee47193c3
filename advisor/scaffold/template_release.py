"""Which template version a project was made from, recorded so that `copier update` can find it.

`advisor generate` renders the template folder (fast, no clone). Copier records such a project's
source as that folder and no version, and `copier update` then has no old version to merge from.
When the folder is the ``templates/`` of a git checkout of this repository (whose root
``copier.yml`` makes the root a Copier template) and the template's files are committed, the
project is exactly what Copier renders from that checkout at HEAD: so the answers file records the
checkout and HEAD, as ``copier copy REPO`` would have, and `copier update` works on the project.

With uncommitted template changes (or no git checkout: an installed wheel) nothing is claimed:
the project keeps the folder as its source, `copier recopy` works, and the reason is reported.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from advisor.scaffold.project import ANSWERS_FILE

#: What a release commit of the template is made of, seen from the repository root.
TEMPLATE_PATHS = ("copier.yml", "templates")


@dataclass(frozen=True)
class Release:
    """The template's source as recorded in a project: a git checkout at a commit, or a folder."""

    source: Path
    commit: str | None  # `git describe --tags --always` (a tag, or tag-N-gHASH); None: not updatable
    why_not: str = ""  # why no commit was recorded, in a user's words

    @property
    def updatable(self) -> bool:
        return self.commit is not None


def _git(root: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def template_release(templates: Path) -> Release:
    """The release the template folder ``templates`` is at (see the module's docstring)."""
    root = templates.resolve().parent
    if not (root / "copier.yml").is_file() or shutil.which("git") is None:
        return Release(templates, None, "the template is not in a git checkout of the advisor")
    top = _git(root, "rev-parse", "--show-toplevel")
    if top is None or Path(top).resolve() != root:
        return Release(templates, None, "the template is not in a git checkout of the advisor")
    changed = _git(root, "status", "--porcelain", "--untracked-files=all", "--", *TEMPLATE_PATHS)
    if changed is None:
        return Release(templates, None, "git could not read the checkout's state")
    if changed:
        return Release(templates, None, "the template has uncommitted changes (commit them for an updatable project)")
    commit = _git(root, "describe", "--tags", "--always", "HEAD")
    if not commit:
        return Release(templates, None, "the checkout has no commit yet")
    return Release(root, commit)


def record_release(dest: Path, release: Release) -> None:
    """Write the release into the project's answers file, where Copier itself would have put it
    (``_commit`` and ``_src_path``, first, in its order); a folder release leaves the file alone."""
    if not release.updatable:
        return
    path = dest / ANSWERS_FILE
    lines = path.read_text(encoding="utf-8").splitlines()
    head = [line for line in lines if line.startswith("#")]
    body = [line for line in lines if not line.startswith(("#", "_commit:", "_src_path:"))]
    # JSON strings are YAML strings: a path with spaces or a colon stays one value.
    recorded = [f"_commit: {json.dumps(release.commit)}", f"_src_path: {json.dumps(str(release.source))}"]
    path.write_text("\n".join([*head, *recorded, *body]) + "\n", encoding="utf-8")
