"""The newcomer's path, walked the way a new user walks it: in a fresh shell (no PYTHONPATH, no
VIRTUAL_ENV, the toolkit's .venv not on PATH), with the commands taken from the text we print.

* the README: `make setup`, `. .venv/bin/activate`, then every command of "The command line"
  (except the TUI and the probe lines, which need a terminal or the user's own job scripts);
* what `advisor generate` prints as next steps — `cd`, `make setup` (a .venv for the project,
  its dependencies from PyPI), activate, submit + run, drill, `make test` — run as one shell
  session; the TUI prints the very same lines;
* what Copier itself prints after `copier copy templates/ DEST`, for a strategy that needs a
  library from PyPI (eventsourcing);
* `python -m <pkg> status | head -2` ends quietly.

`make setup` in a generated project installs from PyPI (pip's own cache makes reruns cheap).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from suite_share import leaving_out_drills_but

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
VENV_BIN = ROOT / ".venv" / "bin"


def fresh_env() -> dict[str, str]:
    """A new login shell's environment: nothing of the toolkit's venv or of pytest."""
    keep = ("HOME", "USER", "LANG", "LC_ALL", "TERM", "TMPDIR", "SHELL", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL",
            "PIP_CERT", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "http_proxy", "https_proxy", "no_proxy",
            "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY")
    env = {k: v for k, v in os.environ.items() if k in keep or k.startswith("PYENV")}
    venvs = {str(VENV_BIN), str(Path(sys.executable).parent)}
    env["PATH"] = os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep)
                                  if p and p not in venvs and "/.venv/" not in p + "/")
    return env

#: A user's git identity (a fresh shell here has none; `git commit` needs one).
GIT_IDENTITY = {"GIT_AUTHOR_NAME": "New User", "GIT_AUTHOR_EMAIL": "new@example.org",
                "GIT_COMMITTER_NAME": "New User", "GIT_COMMITTER_EMAIL": "new@example.org"}


def shell(script: str, cwd: Path, timeout: float = 1200,
          extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run lines as one bash session (`cd` and `. activate` carry over), stopping at the first failure."""
    result = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", script], cwd=cwd, env={**fresh_env(), **(extra_env or {})},
                            capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, f"{script}\n--- stdout\n{result.stdout[-6000:]}\n--- stderr\n{result.stderr[-4000:]}"
    return result


def code_block(markdown: str, after_heading: str) -> list[str]:
    """The command lines of the first ```sh block after a heading (comments kept: bash ignores them)."""
    section = markdown.split(after_heading, 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block, after_heading
    return [line for line in block.group(1).splitlines() if line.strip()]


def printed_commands(text: str, header: str) -> list[str]:
    """The indented lines under ``header`` in printed output."""
    lines = text.split(header, 1)[1].splitlines()[1:]
    out = []
    for line in lines:
        if not line.startswith("  "):
            break
        out.append(line.strip())
    assert out, text
    return out


def test_fresh_shell_has_no_advisor_until_activated(tmp_path: Path) -> None:
    """The reason the README says to activate: a new shell does not know `advisor`."""
    result = subprocess.run(["bash", "-c", "command -v advisor"], env=fresh_env(), capture_output=True, text=True)
    assert result.returncode != 0, result.stdout


def test_readme_commands_work_in_a_fresh_shell(tmp_path: Path) -> None:
    readme = (ROOT / "README.md").read_text()
    setup = code_block(readme, "put it on `PATH` first")
    assert setup[0].startswith("make setup") and setup[1].startswith(". .venv/bin/activate")
    commands = code_block(readme, "## The command line")
    skipped = [c for c in commands if re.match(r"advisor\s*(#|$)", c) or "probe" in c]
    # The TUI needs a terminal; the probe lines need the user's own job (etl.py) and its report.
    assert len(skipped) == 3, skipped
    walk = [c for c in commands if c not in skipped]
    assert any(c.startswith("advisor generate") for c in walk) and any(c.startswith("advisor drill") for c in walk)
    script = "\n".join([f"cd {shlex.quote(str(ROOT))}", *setup, f"cd {shlex.quote(str(tmp_path))}", *walk])
    result = shell(script, ROOT)
    assert (tmp_path / "decision.md").is_file() and (tmp_path / "nightly-sync" / "src" / "nightly_sync").is_dir()
    assert "OK: lost 0, duplicate effects 0" in result.stdout
    assert "Traceback" not in result.stderr


def test_generate_next_commands_work_in_a_fresh_shell(tmp_path: Path) -> None:
    """One strategy walked fully: setup from PyPI, the demo, the drill and the project's own tests."""
    activate = f". {shlex.quote(str(VENV_BIN / 'activate'))}"
    out = shell(f"{activate}\nadvisor generate checkpoint ./nightly-sync", tmp_path).stdout
    commands = printed_commands(out, "next:")
    assert commands[0] == "cd ./nightly-sync" and any("make setup" in c for c in commands)
    assert any(c.startswith("make test") for c in commands)

    # The TUI prints the very same lines after its generate step.
    from advisor.scaffold.project import package_of
    from advisor.tui.widgets.next_steps import next_steps

    class Generated:
        files = ("README.md",)
        dest = tmp_path / "nightly-sync"
        package = package_of(dest)
        release = None

    tui = next_steps(Generated(), "./nightly-sync").plain
    assert printed_commands(tui, "Next, in a shell:") == commands

    # A fresh shell, only the printed lines. The project's `make test` runs its quick tests here
    # (PYTEST_ADDOPTS, which pytest reads itself): the same suite runs whole in
    # tests/test_template_generated.py (the reference project) and in `make soak`.
    quick = " ".join(shlex.quote(a) for a in leaving_out_drills_but(()))
    result = shell("\n".join(commands), tmp_path, extra_env={"PYTEST_ADDOPTS": quick})
    assert "lost 0" in result.stdout or '"lost": 0' in result.stdout
    assert re.search(r"\d+ passed", result.stdout) and "failed" not in result.stdout.splitlines()[-1]
    venv_python = tmp_path / "nightly-sync" / ".venv" / "bin" / "python"
    assert venv_python.exists()  # the project's own environment, not the toolkit's

    # status | head -2 in that shell: two lines, no traceback.
    piped = shell("cd nightly-sync && . .venv/bin/activate && python -m nightly_sync status | head -2", tmp_path)
    assert len(piped.stdout.splitlines()) == 2 and "Error" not in piped.stderr, piped.stderr

    # Later, template updates: the printed lines, in a fresh shell inside the project, after the
    # user's own edit. From a clean git checkout of the advisor that is `copier update` (the edit
    # kept); from a tree with uncommitted template changes, `copier recopy`.
    updates = printed_commands(out, "template updates (in the project):")
    job = tmp_path / "nightly-sync" / "src" / "nightly_sync" / "job.py"
    mine = "\n# MY EDIT: our own job\n"
    job.write_text(job.read_text() + mine)
    shell("\n".join(["cd nightly-sync", *updates]), tmp_path, extra_env=GIT_IDENTITY)
    if any(" copier update " in c for c in updates):
        assert mine in job.read_text() and "<<<<<<<" not in job.read_text()
    else:
        assert any(" copier recopy " in c for c in updates), updates


def test_copier_message_works_in_a_fresh_shell(tmp_path: Path) -> None:
    """Copier's own "Next" for a strategy whose runtime needs a library from PyPI (eventsourcing)."""
    copier = shlex.quote(str(VENV_BIN / "copier"))
    out = shell(f"{copier} copy {shlex.quote(str(ROOT / 'templates'))} ./ledger "
                "--defaults --data strategy=event-sourcing", tmp_path)
    message = out.stdout + out.stderr
    commands = [c for c in printed_commands(message, "Next") if not c.startswith("make test")]
    assert commands[0].startswith("cd ledger && make setup") and any(" drill " in c for c in commands)
    # make test is the generate walk's (the same Makefile target); here: setup, import, drill.
    result = shell("\n".join(commands), tmp_path)
    assert "lost 0" in result.stdout or '"lost": 0' in result.stdout, result.stdout[-2000:]


def test_queue_project_next_commands_start_and_stop_their_own_broker(tmp_path: Path) -> None:
    """A project whose input is a RabbitMQ queue, on a machine with no broker running: the printed steps
    start a throwaway node (`make broker`), export its URL, run and drill against it, and stop it again.
    While it runs every port it listens on is loopback; afterwards none of its processes is left."""
    from rabbitmq_server import find_server, listening_ports

    if find_server() is None:
        pytest.fail("rabbitmq-server is not installed: `make test` installs it (make rabbitmq)")
    activate = f". {shlex.quote(str(VENV_BIN / 'activate'))}"
    out = shell(f"{activate}\nadvisor generate checkpoint ./orders --set input_source=rabbitmq", tmp_path).stdout
    commands = printed_commands(out, "next:")
    assert commands[0] == "cd ./orders" and commands[-1].startswith("make broker-stop"), commands
    start = next(c for c in commands if c.startswith("make broker "))
    assert "export AMQP_URL=$(cat .broker/amqp_url)" in start
    # `make test` is the generate walk's (the same target); the project's queue tests against a broker are
    # tests/test_template_rabbitmq.py's. Here: every other printed line, as printed, in one fresh shell.
    walk = [c for c in commands[:-1] if not c.startswith("make test")]
    project = tmp_path / "orders"
    try:
        result = shell("\n".join(walk), tmp_path)
        assert "export AMQP_URL='amqp://guest:guest@127.0.0.1:" in result.stdout, result.stdout[-3000:]
        assert "OK: nothing lost" in result.stdout and "queue: " in result.stdout, result.stdout[-3000:]
        url = (project / ".broker" / "amqp_url").read_text().strip()
        state = json.loads((project / ".broker" / "state.json").read_text())
        assert url == f"amqp://guest:guest@127.0.0.1:{state['amqp_port']}/%2F"

        pids = node_pids(state["node"])
        assert pids, "the node is not running after the printed steps"
        by_port: dict[int, set[str]] = {}
        for address, port in listening_ports(pids):
            by_port.setdefault(port, set()).add(address)
        # AMQP and the inter-node port on 127.0.0.1 only; epmd on loopback (it adds ::1 where IPv6 is up).
        assert by_port.get(state["amqp_port"]) == {"127.0.0.1"}, by_port
        assert by_port.get(state["dist_port"]) == {"127.0.0.1"}, by_port
        assert by_port.get(state["epmd_port"], set()) - {"::1"} == {"127.0.0.1"}, by_port
        assert set(by_port) == {state["amqp_port"], state["dist_port"], state["epmd_port"]}, by_port

        stopped = shell("\n".join([commands[0], commands[-1]]), tmp_path)  # a fresh shell: cd, make broker-stop
        assert f"stopped the local broker {state['node']}" in stopped.stdout, stopped.stdout
        assert node_pids(state["node"]) == [], "beam.smp/epmd of the node left running"
        assert not (project / ".broker" / "amqp_url").exists()
    finally:
        if (project / ".venv" / "bin" / "python").exists():  # a failed step must not leave the node running
            subprocess.run([str(project / ".venv" / "bin" / "python"), "-m", "orders.ops.local_broker", "stop"],
                           cwd=project, env=fresh_env(), capture_output=True, timeout=120)


def test_make_broker_without_rabbitmq_server_says_how_to_get_one(tmp_path: Path) -> None:
    """No rabbitmq-server on the machine: one clear line (install it, or export AMQP_URL), exit 2."""
    from advisor import scaffold

    generated = scaffold.generate("checkpoint", tmp_path / "orders", {"input_source": "rabbitmq"})
    code = ("import sys, orders.ops.local_broker as lb\nlb.find_server = lambda: None\n"
            "sys.exit(lb.main(['start']))")
    result = subprocess.run([sys.executable, "-c", code], cwd=generated.dest, capture_output=True, text=True,
                            env={**fresh_env(), "PYTHONPATH": str(generated.dest / "src")}, timeout=60)
    assert result.returncode == 2, result
    assert result.stderr.count("\n") == 1 and "rabbitmq-server is not installed" in result.stderr, result.stderr
    assert "apt-get install rabbitmq-server" in result.stderr and "AMQP_URL" in result.stderr
    assert not (generated.dest / ".broker" / "amqp_url").exists()


def node_pids(node: str) -> list[int]:
    """Processes of one RabbitMQ node (its script, beam.smp, helpers, its epmd): their environment names it."""
    marker = f"RABBITMQ_NODENAME={node}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if marker in Path(f"/proc/{entry}/environ").read_bytes().split(b"\0"):
                    found.append(int(entry))
            except OSError:
                continue
    return found
