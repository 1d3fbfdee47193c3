"""Start-up of this checkout beside another one (a baseline commit), side by side in one run.

For a change that moves code around (a new layout, a new import), the question is "is anything
slower than before?", not "is it under target?". Both checkouts run with the same interpreter
and the same virtual environment, each on its own PYTHONPATH, alternating sample by sample so
machine load hits both alike; every round prints each one's median and the ratio, and the end
the range of the ratios over the rounds.

    git worktree add --detach /tmp/base <commit>
    python benchmarks/startup_versus.py /tmp/base [--rounds 5] [--runs 11]

Measured: ``python -m advisor recommend --answers F --json`` (whole process, as bench_recommend.py),
``python -m advisor review`` with a context (whole process: the ranking reads the team's words too)
and the TUI's first screen (start of the child → welcome screen ready, as bench_tui_startup.py).
Beside each wall-clock figure, the child's CPU time (user + system, whole process): on a
machine shared with other work the wall clock wanders with the load, the CPU time much less.
Not in ``make bench``: it needs the second checkout.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_tui_startup import CHILD  # noqa: E402  (the same child script, not a copy)

ANSWERS = "duration: hours\nwork_shape: record_batch\nworkers: many\nexternal_effects: plain_api\n"
#: What a team tells the review after an incident, with its own words (the context).
REVIEW = ANSWERS + "symptoms: [work_lost, duplicate_effect]\ntrigger: planned_stop\ncontext: >-\n" \
    "  During the deploy the worker was killed mid-batch; after the restart some rows were missing and\n" \
    "  a few customers got the same e-mail twice.\n"


def run_with(root: Path, cmd: list[str], cwd: Path) -> tuple[str, float]:
    """(stdout, the child's CPU seconds) of one run with ``root`` first on the path."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(cmd, cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return out, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def recommend_s(root: Path, answers: Path, cwd: Path) -> tuple[float, float]:
    start = time.perf_counter()
    _, cpu = run_with(root, [sys.executable, "-m", "advisor", "recommend", "--answers", str(answers), "--json"], cwd)
    return time.perf_counter() - start, cpu


def review_s(root: Path, answers: Path, cwd: Path) -> tuple[float, float]:
    job = cwd / "incident.yml"
    job.write_text(REVIEW)
    cmd = [sys.executable, "-m", "advisor", "review", "--answers", str(job), "--current", "checkpoint",
           "--out", str(cwd / "decision.md"), "--force"]
    start = time.perf_counter()
    _, cpu = run_with(root, cmd, cwd)
    return time.perf_counter() - start, cpu


def tui_ready_s(root: Path, answers: Path, cwd: Path) -> tuple[float, float]:
    out, cpu = run_with(root, [sys.executable, "-c", CHILD, "advisor"], cwd)
    return float(out.strip().splitlines()[-1]), cpu


def same_code(root: Path, cwd: Path) -> str:
    """Which advisor package a PYTHONPATH really imports (an editable install must not win)."""
    return run_with(root, [sys.executable, "-c", "import advisor; print(advisor.__file__)"], cwd)[0].strip()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("base", type=Path, help="the baseline checkout (a git worktree of the old commit)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--runs", type=int, default=11, help="samples of each checkout per round")
    args = parser.parse_args()
    checkouts = {"base": args.base.resolve(), "this": HERE.parent}
    benches: dict[str, Callable[[Path, Path, Path], tuple[float, float]]] = {
        "recommend --json (process s)": recommend_s,
        "review with a context (process s)": review_s,
        "TUI first screen (ready s)": tui_ready_s,
    }
    with tempfile.TemporaryDirectory() as tmp:
        cwd = Path(tmp)  # not a checkout: `-m` puts the working directory first on sys.path
        answers = cwd / "job.yml"
        answers.write_text(ANSWERS)
        for name, root in checkouts.items():
            print(f"{name}: {root} → imports {same_code(root, cwd)}")
        for bench in benches.values():  # warm the byte-code and the catalog cache of both
            for root in checkouts.values():
                bench(root, answers, cwd)
        ratios: dict[str, dict[str, list[float]]] = {label: {"wall": [], "cpu": []} for label in benches}
        for n in range(1, args.rounds + 1):
            for label, bench in benches.items():
                samples: dict[str, list[tuple[float, float]]] = {k: [] for k in checkouts}
                for _ in range(args.runs):
                    for key, root in checkouts.items():
                        samples[key].append(bench(root, answers, cwd))
                line = f"round {n}  {label:<30}"
                for i, kind in enumerate(("wall", "cpu")):
                    base, this = (statistics.median(s[i] for s in samples[k]) for k in ("base", "this"))
                    ratios[label][kind].append(this / base)
                    line += f"  {kind} base {base:.3f} this {this:.3f} ratio {this / base:.3f}"
                print(line, flush=True)
    print()
    for label, by_kind in ratios.items():
        for kind, values in by_kind.items():
            print(f"{label:<30} {kind:>4} ratio this/base: median {statistics.median(values):.3f},"
                  f" range {min(values):.3f}-{max(values):.3f} ({len(values)} rounds of {args.runs} runs each)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
