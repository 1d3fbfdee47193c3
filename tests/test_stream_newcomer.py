"""The stream-checkpoint project on a newcomer's path: without pyspark its Spark commands say what to
install (one line, exit 2, no traceback), and its drill numbers are one set everywhere they are shown."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from advisor.scaffold.generation import generate, next_commands


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dest = tmp_path_factory.mktemp("stream") / "clicks"
    generate("stream-checkpoint", dest, {"project_name": "clicks"})
    return dest


def _without_pyspark(project: Path, tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The project's command in a Python where `import pyspark` fails (a sitecustomize blocks it)."""
    blocker = tmp / "no-pyspark"
    blocker.mkdir(exist_ok=True)
    (blocker / "sitecustomize.py").write_text("import sys\nsys.modules['pyspark'] = None\n")
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "PYTHONPATH")}
    env["PYTHONPATH"] = os.pathsep.join([str(blocker), str(project / "src")])
    return subprocess.run([sys.executable, "-m", "clicks", *args], cwd=project, env=env, capture_output=True,
                          text=True, timeout=120)


@pytest.mark.parametrize("command", [["run"], ["drill", "--records", "40", "--kills", "1", "--seed", "1"]])
def test_without_pyspark_one_clear_line(project: Path, tmp_path: Path, command: list[str]) -> None:
    data = tmp_path / "data"
    queued = _without_pyspark(project, tmp_path, "submit-demo", "--records", "40", "--data-dir", str(data))
    assert queued.returncode == 0, queued.stderr  # queueing needs no Spark
    if command == ["run"]:
        command = [*command, "--data-dir", str(data)]
    result = _without_pyspark(project, tmp_path, *command)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr and result.stderr.count("\n") == 1, result.stderr
    assert "pyspark is not installed" in result.stderr, result.stderr
    assert "pip install -e '.[spark]'" in result.stderr and "make setup" in result.stderr, result.stderr
    assert not list(project.glob("data/drill-*")), "the drill started before saying Spark is missing"


def test_drill_numbers_are_one_set(project: Path, tmp_path: Path) -> None:
    """The printed next step, the README, the Copier message and `drill --help` show the same drill lines,
    and the printed step's comment says what it does (aimed, not random)."""
    printed = next(c for c in next_commands("clicks", "./clicks", "stream-checkpoint") if " drill " in c)
    args, _, comment = printed.partition("   # ")
    args = args.split(" drill ", 1)[1].strip()
    assert "--aim after_sink_commit" in args and "aimed at the after_sink_commit window" in comment, printed
    assert "random" not in comment, printed

    readme = (project / "README.md").read_text()
    readme_lines = re.findall(r"^python -m clicks drill (--records [^\[#\n]*?)\s*(?:\[|#|$)", readme, re.M)
    helped = _without_pyspark(project, tmp_path, "drill", "--help")
    assert helped.returncode == 0, helped.stderr
    help_lines = re.findall(r"^(?:examples:)?\s+drill (--records .*)$", helped.stdout, re.M)
    assert readme_lines[0] == args and help_lines[0] == args, (readme_lines, help_lines, args)
    assert readme_lines[1] == help_lines[1] and "--aim all" in help_lines[1], (readme_lines, help_lines)

    copier_yml = (Path(__file__).resolve().parents[1] / "templates" / "copier.yml").read_text()
    assert f"'{args}' if strategy == 'stream-checkpoint'" in copier_yml
