"""The repository as a Copier template source: `copier copy --vcs-ref TAG`, `copier update` and
`copier recopy` from a git clone at a tag, the whole cycle a user goes through.

A temporary clone of this working tree (its files as they are now, committed) is tagged `v1`;
a project is generated from it and made a git repository; the user edits `job.py` and commits;
the template changes and is tagged `v2`; `copier update --defaults` must keep the user's edit
and bring the template's change.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.org", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}


def sh(*args: str, cwd: Path) -> str:
    result = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=180,
                            env={**os.environ, **GIT_ENV})
    assert result.returncode == 0, f"{' '.join(args)}\n{result.stdout}\n{result.stderr}"
    return result.stdout + result.stderr


def copier(*args: str, cwd: Path) -> str:
    return sh(sys.executable, "-m", "copier", *args, cwd=cwd)


def commit_all(repo: Path, message: str) -> None:
    sh("git", "add", "-A", cwd=repo)
    sh("git", "commit", "-q", "-m", message, cwd=repo)


@pytest.fixture
def template_repo(tmp_path: Path) -> Path:
    """This tree's template files (as they are now, committed or not) in a fresh git repo, tagged v1."""
    repo = tmp_path / "advisor-repo"
    repo.mkdir()
    shutil.copy(ROOT / "copier.yml", repo / "copier.yml")
    shutil.copytree(ROOT / "templates", repo / "templates",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    (repo / "README.md").write_text("Continuity Advisor (test clone)\n")
    sh("git", "init", "-q", "-b", "main", cwd=repo)
    commit_all(repo, "template v1")
    sh("git", "tag", "v1", cwd=repo)
    return repo


@pytest.mark.slow
def test_copy_edit_update_keeps_the_users_edit_and_brings_the_change(template_repo: Path, tmp_path: Path) -> None:
    dest = tmp_path / "nightly-sync"
    out = copier("copy", "--vcs-ref", "v1", str(template_repo), str(dest), "--defaults",
                 "--data", "strategy=checkpoint", cwd=tmp_path)
    # Copier's own message names the project it made, in its own folder.
    assert "cd " in out and "make setup" in out and "nightly_sync" in out
    answers = yaml.safe_load((dest / ".copier-answers.yml").read_text())
    assert answers["_commit"] == "v1" and answers["package_name"] == "nightly_sync"
    assert answers["_src_path"] == str(template_repo)
    readme = (dest / "README.md").read_text()
    assert "The recovery point is a row of the `tasks` table" in readme  # the include, seen from the root
    pkg = dest / "src" / "nightly_sync"
    assert (pkg / "checkpoint.py").is_file() and not (dest / "templates").exists()
    sh("git", "init", "-q", "-b", "main", cwd=dest)
    commit_all(dest, "Generated")

    # The user's job: one edit in the function they own.
    job = pkg / "job.py"
    mine = "\n\n# MY EDIT: our own job starts here\n"
    job.write_text(job.read_text() + mine)
    commit_all(dest, "Our job")

    # The template moves on: v2 changes the shared runtime and the README.
    shell = template_repo / "templates" / "project" / "src" / "{{package_name}}" / "status.py"
    shell.write_text(shell.read_text() + "\n\n# TEMPLATE V2: a change the update must bring\n")
    template_readme = template_repo / "templates" / "project" / "README.md.jinja"
    template_readme.write_text(template_readme.read_text() + "\nTEMPLATE V2 README LINE\n")
    commit_all(template_repo, "template v2")
    sh("git", "tag", "v2", cwd=template_repo)

    copier("update", "--defaults", cwd=dest)
    assert mine in job.read_text()  # kept
    assert "# TEMPLATE V2" in (pkg / "status.py").read_text()  # brought
    assert "TEMPLATE V2 README LINE" in (dest / "README.md").read_text()
    assert yaml.safe_load((dest / ".copier-answers.yml").read_text())["_commit"] == "v2"
    assert "<<<<<<<" not in job.read_text()

    # recopy: the recorded answers, the template at its newest tag; the user's edits are re-applied
    # only by update, so recopy is for a clean re-render (here: it must still run from the record).
    commit_all(dest, "Update to v2")
    copier("recopy", "--defaults", "--overwrite", cwd=dest)
    assert (pkg / "checkpoint.py").is_file()
    assert yaml.safe_load((dest / ".copier-answers.yml").read_text())["package_name"] == "nightly_sync"


def test_plain_template_folder_still_works(tmp_path: Path) -> None:
    """`copier copy templates/ DEST` on its own, with the folder's name as the project's."""
    copier("copy", str(ROOT / "templates"), str(tmp_path / "photo-uploader"), "--defaults",
           "--data", "strategy=checkpoint", cwd=tmp_path)
    assert (tmp_path / "photo-uploader" / "src" / "photo_uploader" / "checkpoint.py").is_file()
