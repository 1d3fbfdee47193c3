"""The stream-checkpoint template, generated and proven with real Spark (slow).

Spark needs pyspark (a test extra of the toolkit, ~456 MB) and Java 17 (`make
java`, run by `make test`); without them these tests fail with what to install.
Restarts are JVM starts (5-10 s each on two cores), so the drills are short.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from advisor import scaffold
from suite_share import STREAM_KEPT, only

pytestmark = pytest.mark.slow


def _spark_or_fail() -> None:
    if shutil.which("java") is None:
        pytest.fail("the stream-checkpoint tests need Java 17: `make java` (apt-get install openjdk-17-jre-headless)")
    try:
        import pyspark  # noqa: F401
    except ImportError:
        pytest.fail("the stream-checkpoint tests need pyspark: pip install -e '.[test]'")


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "DATABASE_URL")
            and not k.startswith(("PYTEST_", "COV_"))}


def test_plain_copier_renders_stream_checkpoint(tmp_path: Path) -> None:
    templates = Path(__file__).resolve().parents[1] / "templates"
    done = subprocess.run([sys.executable, "-m", "copier", "copy", str(templates), str(tmp_path / "stream-job"),
                           "--data", "strategy=stream-checkpoint", "--defaults", "--trust"],
                          capture_output=True, text=True, env=_env())
    assert done.returncode == 0, done.stderr
    pkg = tmp_path / "stream-job" / "src" / "stream_job"
    assert {"__init__.py", "spark.py", "sink.py"} <= {p.name for p in (pkg / "stream_checkpoint").iterdir()}
    assert (pkg / "runtime" / "faults.py").is_file()
    assert "pyspark" in (tmp_path / "stream-job" / "pyproject.toml").read_text()
    assert "Kafka" in (tmp_path / "stream-job" / "README.md").read_text()


@pytest.mark.parametrize("whole", [False, pytest.param(True, id="whole", marks=pytest.mark.soak)])
def test_generated_stream_project_suite_passes_with_real_spark(tmp_path: Path, whole: bool) -> None:
    """`make test`: one drill of aimed kills (suite_share.STREAM_KEPT; the
    quick tests every project shares run in the other generated suites); `make soak`: all of it."""
    _spark_or_fail()
    generated = scaffold.generate("stream-checkpoint", tmp_path / "stream", {"project_name": "Stream Spark Job"})
    chosen = [] if whole else only(STREAM_KEPT)
    # The toolkit's interpreter has pyspark; the project's conftest puts src/ on the path.
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", *chosen],
                            cwd=generated.dest, capture_output=True, text=True, timeout=1500, env=_env())
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    summary = result.stdout.strip().splitlines()[-1]
    assert "failed" not in summary and "skipped" not in summary, summary
    for name in STREAM_KEPT:  # the kept drills really ran (a rename would drop them silently)
        assert re.search(rf"^PASSED \S+::{name}\b", result.stdout, re.M), f"{name} did not run"


def test_a_stream_project_sends_the_calls_a_person_answered_not_applied(tmp_path: Path) -> None:
    """Plain calls at most once: `reconcile --not-applied ID` promises "the next `run` sends it".
    The stream's `run` once never did (only the other strategies' did): the effect was lost while
    the person had been told it would be sent. The generated test drills a kill after a call,
    answers one call not applied and counts the service's requests after the next run."""
    _spark_or_fail()
    generated = scaffold.generate("stream-checkpoint", tmp_path / "stream", {
        "project_name": "Stream Smtp Job", "effect_kind": "plain", "plain_policy": "at-most-once"})
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider",
                             "tests/test_effects.py", "-k", "test_status_and_reconcile_say_what_is_in_doubt"],
                            cwd=generated.dest, capture_output=True, text=True, timeout=900, env=_env())
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    assert re.search(r"^PASSED \S+::test_status_and_reconcile_say_what_is_in_doubt\b", result.stdout, re.M), \
        result.stdout[-2000:]
