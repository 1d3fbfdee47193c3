"""The repository as a Copier template source: `copier copy --vcs-ref TAG`, `copier update` and
`copier recopy` from a git clone at a tag, the whole cycle a user goes through.

A temporary clone of this working tree (its files as they are now, committed) is tagged `v1`;
a project is generated from it and made a git repository; the user edits `job.py` and commits;
the template changes and is tagged `v2`; `copier update --defaults` must keep the user's edit
and bring the template's change.

Across releases: tests/fixtures/template-previous.tar.gz is the template of the previous
release (`git archive`, no git history needed: CI may clone shallow). A project generated
from it, edited and committed, updates to this tree: the files move, none of the old ones is
left behind, the edit is kept, and the project's drill passes.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
#: The template as the previous release left it: `git archive --format=tar <release tag> templates copier.yml |
#: gzip -9n > tests/fixtures/template-previous.tar.gz`, refreshed at each release (docs/template-internals.md).
PREVIOUS_RELEASE = ROOT / "tests" / "fixtures" / "template-previous.tar.gz"
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


def copy_this_template(repo: Path) -> None:
    """This tree's template files (as they are now, committed or not) into ``repo``, replacing its own."""
    shutil.rmtree(repo / "templates", ignore_errors=True)
    shutil.copy(ROOT / "copier.yml", repo / "copier.yml")
    shutil.copytree(ROOT / "templates", repo / "templates",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


@pytest.fixture
def template_repo(tmp_path: Path) -> Path:
    """This tree's template files in a fresh git repo, tagged v1."""
    repo = tmp_path / "advisor-repo"
    repo.mkdir()
    copy_this_template(repo)
    (repo / "README.md").write_text("Continuity Advisor (test clone)\n")
    sh("git", "init", "-q", "-b", "main", cwd=repo)
    commit_all(repo, "template v1")
    sh("git", "tag", "v1", cwd=repo)
    return repo


@pytest.fixture
def two_releases(tmp_path: Path) -> Path:
    """A git repo whose tag v1 is the previous release's template (the fixture) and v2 this tree's."""
    repo = tmp_path / "advisor-releases"
    repo.mkdir()
    with tarfile.open(PREVIOUS_RELEASE) as archive:
        archive.extractall(repo, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
    (repo / "README.md").write_text("Continuity Advisor (test clone, two releases)\n")
    sh("git", "init", "-q", "-b", "main", cwd=repo)
    commit_all(repo, "the previous release")
    sh("git", "tag", "v1", cwd=repo)
    copy_this_template(repo)
    commit_all(repo, "this tree")
    sh("git", "tag", "v2", cwd=repo)
    return repo


def commit_the_users_edit(dest: Path, mine: str) -> Path:
    """Make the generated project a git repository, then append the user's edit to job.py and commit it."""
    sh("git", "init", "-q", "-b", "main", cwd=dest)
    commit_all(dest, "Generated")
    job = dest / "src" / "nightly_sync" / "job.py"
    job.write_text(job.read_text() + mine)
    commit_all(dest, "Our job")
    return job


def package_files(dest: Path) -> set[str]:
    pkg = dest / "src"
    return {p.relative_to(pkg).as_posix() for p in pkg.rglob("*") if p.is_file() and "__pycache__" not in p.parts}


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
    assert (pkg / "checkpoint" / "__init__.py").is_file() and not (dest / "templates").exists()
    # The user's job: one edit in the function they own.
    mine = "\n\n# MY EDIT: our own job starts here\n"
    job = commit_the_users_edit(dest, mine)

    # The template moves on: v2 changes the shared runtime and the README.
    shell = template_repo / "templates" / "project" / "src" / "{{package_name}}" / "ops" / "status.py"
    shell.write_text(shell.read_text() + "\n\n# TEMPLATE V2: a change the update must bring\n")
    template_readme = template_repo / "templates" / "project" / "README.md.jinja"
    template_readme.write_text(template_readme.read_text() + "\nTEMPLATE V2 README LINE\n")
    commit_all(template_repo, "template v2")
    sh("git", "tag", "v2", cwd=template_repo)

    copier("update", "--defaults", cwd=dest)
    assert mine in job.read_text()  # kept
    assert "# TEMPLATE V2" in (pkg / "ops" / "status.py").read_text()  # brought
    assert "TEMPLATE V2 README LINE" in (dest / "README.md").read_text()
    assert yaml.safe_load((dest / ".copier-answers.yml").read_text())["_commit"] == "v2"
    assert "<<<<<<<" not in job.read_text()

    # recopy: the recorded answers, the template at its newest tag; the user's edits are re-applied
    # only by update, so recopy is for a clean re-render (here: it must still run from the record).
    commit_all(dest, "Update to v2")
    copier("recopy", "--defaults", "--overwrite", cwd=dest)
    assert (pkg / "checkpoint" / "__init__.py").is_file()
    assert yaml.safe_load((dest / ".copier-answers.yml").read_text())["package_name"] == "nightly_sync"


def test_plain_template_folder_still_works(tmp_path: Path) -> None:
    """`copier copy templates/ DEST` on its own, with the folder's name as the project's."""
    copier("copy", str(ROOT / "templates"), str(tmp_path / "photo-uploader"), "--defaults",
           "--data", "strategy=checkpoint", cwd=tmp_path)
    assert (tmp_path / "photo-uploader" / "src" / "photo_uploader" / "checkpoint" / "__init__.py").is_file()


@pytest.mark.slow
def test_a_project_of_the_previous_release_updates_to_this_one(two_releases: Path, tmp_path: Path) -> None:
    dest = tmp_path / "nightly-sync"
    copier("copy", "--vcs-ref", "v1", str(two_releases), str(dest), "--defaults", "--data", "strategy=checkpoint",
           cwd=tmp_path)
    env = {**os.environ, "PYTHONPATH": str(dest / "src")}
    env.pop("DATABASE_URL", None)
    # Run once, as a user would have: bytecode of the old modules lies in __pycache__ (ignored by git).
    ran = subprocess.run([sys.executable, "-m", "nightly_sync", "drill", "--help"], cwd=dest, env=env,
                         capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr
    # The user's job: a helper of their own, in the file they own.
    mine = "\n\n# MY EDIT: our own job starts here\ndef our_helper(value: int) -> int:\n    return value * 3\n"
    job = commit_the_users_edit(dest, mine)

    copier("update", "--defaults", cwd=dest)
    assert mine in job.read_text() and "<<<<<<<" not in job.read_text()  # kept, merged cleanly
    assert yaml.safe_load((dest / ".copier-answers.yml").read_text())["_commit"] == "v2"

    # Exactly this release's files: what moved is gone from its old place (no stale module beside
    # its new package), what is new is there.
    fresh = tmp_path / "fresh" / "nightly-sync"
    copier("copy", "--vcs-ref", "v2", str(two_releases), str(fresh), "--defaults", "--data", "strategy=checkpoint",
           cwd=tmp_path)
    after = package_files(dest)
    assert after == package_files(fresh), (sorted(after - package_files(fresh)), sorted(package_files(fresh) - after))
    # (`before != after` when the previous release laid its files out differently, as the fixture's
    # did: the update moved them. Right after `make release` the fixture is this tree: nothing moves.)
    stray = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=dest,
                           capture_output=True, text=True).stdout
    assert ".rej" not in stray, stray

    # The updated project works: its drill passes (old bytecode and all).
    drill = subprocess.run([sys.executable, "-m", "nightly_sync", "drill", "--records", "300", "--kills", "3",
                            "--seed", "1", "--json"], cwd=dest, env=env, capture_output=True, text=True, timeout=600)
    assert drill.returncode == 0, drill.stdout[-3000:] + drill.stderr[-3000:]
    assert '"ok": true' in drill.stdout
    helper = subprocess.run([sys.executable, "-c", "from nightly_sync.job import our_helper; print(our_helper(2))"],
                            cwd=dest, env=env, capture_output=True, text=True, timeout=60)
    assert helper.stdout.strip() == "6", helper.stderr


@pytest.mark.slow
@pytest.mark.parametrize("tagged", [True, False], ids=["tagged", "untagged"])
def test_advisor_generate_makes_a_project_copier_can_update(template_repo: Path, tmp_path: Path, tagged: bool,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The main path: `advisor generate` from a git checkout records the checkout and its commit, and
    the printed update command brings a later template change into the user's edited project
    (from a release tag, or from an untagged commit of the checkout)."""
    from advisor.scaffold import generation

    if not tagged:
        sh("git", "tag", "-d", "v1", cwd=template_repo)
    monkeypatch.setattr(generation, "templates_dir", lambda: template_repo / "templates")
    dest = tmp_path / "nightly-sync"
    made = generation.generate("checkpoint", dest, {"project_name": "Nightly Sync"})
    assert made.release is not None and made.release.updatable, made.release
    answers = yaml.safe_load((dest / ".copier-answers.yml").read_text())
    head = sh("git", "rev-parse", "--short", "HEAD", cwd=template_repo).strip()
    assert answers["_src_path"] == str(template_repo.resolve())
    assert answers["_commit"] == ("v1" if tagged else head)
    mine = "\n\n# MY EDIT: our own job starts here\n"
    job = commit_the_users_edit(dest, mine)

    shell = template_repo / "templates" / "project" / "src" / "{{package_name}}" / "ops" / "status.py"
    shell.write_text(shell.read_text() + "\n\n# TEMPLATE LATER: a change the update must bring\n")
    commit_all(template_repo, "a later template")
    # What `advisor generate` prints, run as printed (the update line is the last of them).
    lines = generation.update_commands(made)
    assert lines[-1].startswith(f"{sys.executable} -m copier update --defaults --vcs-ref HEAD"), lines
    sh(*lines[-1].split("#")[0].split(), cwd=dest)
    assert mine in job.read_text() and "<<<<<<<" not in job.read_text()
    assert "# TEMPLATE LATER" in (dest / "src" / "nightly_sync" / "ops" / "status.py").read_text()


def test_a_template_with_uncommitted_changes_is_recorded_as_a_folder(template_repo: Path, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from advisor.scaffold import generation

    (template_repo / "templates" / "project" / "README.md.jinja").write_text("changed, not committed\n")
    monkeypatch.setattr(generation, "templates_dir", lambda: template_repo / "templates")
    made = generation.generate("checkpoint", tmp_path / "nightly-sync", {"project_name": "Nightly Sync"})
    assert made.release is not None and not made.release.updatable and "uncommitted" in made.release.why_not
    answers = yaml.safe_load((tmp_path / "nightly-sync" / ".copier-answers.yml").read_text())
    assert "_commit" not in answers and answers["_src_path"] == str(template_repo / "templates")
    assert any("copier recopy" in line for line in generation.update_commands(made))


def test_make_release_tags_the_version_and_refreshes_the_update_fixture(tmp_path: Path) -> None:
    """The release routine, in a scratch repository holding what it reads: a committed tree gets
    its version tagged and that tag's template as the next update test's fixture; a second
    release of the same version, or a dirty tree, is refused with exit 2."""
    repo = tmp_path / "advisor"
    repo.mkdir()
    copy_this_template(repo)
    for name in ("Makefile", "pyproject.toml"):
        shutil.copy(ROOT / name, repo / name)
    (repo / "tests" / "fixtures").mkdir(parents=True)
    sh("git", "init", "-q", "-b", "main", cwd=repo)
    commit_all(repo, "a release candidate")
    version = next(line.split('"')[1] for line in (repo / "pyproject.toml").read_text().splitlines()
                   if line.startswith("version = "))
    out = sh("make", "-s", "release", cwd=repo)
    assert f"tagged v{version}" in out
    assert sh("git", "tag", cwd=repo).split() == [f"v{version}"]
    with tarfile.open(repo / "tests" / "fixtures" / "template-previous.tar.gz") as archive:
        names = archive.getnames()
    assert "copier.yml" in names and "templates/copier.yml" in names
    assert sh("git", "status", "--porcelain", cwd=repo).strip() == ""  # the fixture is committed
    again = subprocess.run(["make", "-s", "release"], cwd=repo, capture_output=True, text=True,
                           env={**os.environ, **GIT_ENV})
    assert again.returncode == 2 and "tagged already" in again.stderr
    (repo / "copier.yml").write_text((repo / "copier.yml").read_text() + "\n# uncommitted\n")
    dirty = subprocess.run(["make", "-s", "release"], cwd=repo, capture_output=True, text=True,
                           env={**os.environ, **GIT_ENV})
    assert dirty.returncode == 2 and "commit or stash" in dirty.stderr
