"""The default crash drill of a generated project, this checkout beside a baseline one, side by side.

The drill's cost is what a user waits for (`python -m <pkg> drill`, 2,000 records by default). Both
checkouts render the same project (same strategy, same answers) with their own template; the two
drills then run alternately, round after round, so that the machine's load hits both alike. Each
round prints both wall times (the whole process, as a user waits) and the ratio; the end, the
range of the ratios and whether this checkout stayed under TARGET_S.

    git worktree add --detach /tmp/base <commit>
    python benchmarks/drill_versus.py /tmp/base [--rounds 3] [--records 2000] [--strategy checkpoint]

Not in ``make bench``: it needs the second checkout. The default drill of the baseline is what it
was then (kills only, before the fault schedule); this one's is the fault schedule.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
#: The issue's bound for the default drill of 2,000 records on this machine.
TARGET_S = 60.0


def render(checkout: Path, strategy: str, dest: Path, name: str) -> str:
    """Render the project with ``checkout``'s template (Copier's CLI, as a user without the advisor)."""
    copier = Path(sys.executable).with_name("copier")
    subprocess.run([str(copier), "copy", "--defaults", "--quiet", "--data", f"strategy={strategy}", "--data",
                    f"project_name={name}", str(checkout / "templates"), str(dest)], check=True,
                   capture_output=True)
    return next(p.name for p in (dest / "src").iterdir() if p.is_dir() and not p.name.startswith("."))


def drill_s(project: Path, package: str, records: int, seed: int, data: Path) -> tuple[float, dict]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "DATABASE_URL")}
    env["PYTHONPATH"] = str(project / "src")
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", package, "drill", "--records", str(records), "--seed", str(seed),
                           "--json", "--data-dir", str(data)], cwd=project, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    report = json.loads(done.stdout) if done.stdout.strip().startswith("{") else {}
    return seconds, report


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("base", type=Path, help="the baseline checkout (a git worktree of the old commit)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--records", type=int, default=2000)
    parser.add_argument("--strategy", default="checkpoint")
    args = parser.parse_args()
    checkouts = {"base": args.base.resolve(), "this": HERE.parent}
    ratios, ours = [], []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        projects = {name: (root / name, render(where, args.strategy, root / name, f"Versus {name}"))
                    for name, where in checkouts.items()}
        print(f"load average before: {os.getloadavg()[0]:.1f}; {args.strategy}, {args.records} records, "
              f"default drill flags", flush=True)
        for r in range(1, args.rounds + 1):
            seen = {}
            for name, (project, package) in projects.items():
                seconds, report = drill_s(project, package, args.records, r, root / f"{name}-{r}")
                faults = report.get("faults") or {"sigkill": {"injected": report.get("kills_landed")}}
                seen[name] = seconds
                print(f"round {r} {name}: {seconds:6.1f} s, ok {report.get('ok')}, kills {report.get('kills_landed')}, "
                      f"faults {sum(int(f['injected'] or 0) for f in faults.values())}", flush=True)
            ratios.append(seen["this"] / seen["base"])
            ours.append(seen["this"])
            print(f"round {r}: this / base = {ratios[-1]:.2f} (load {os.getloadavg()[0]:.1f})", flush=True)
    print(f"ratio this / base: {min(ratios):.2f} .. {max(ratios):.2f} (median {statistics.median(ratios):.2f}); "
          f"this checkout {min(ours):.1f} .. {max(ours):.1f} s, target < {TARGET_S:g} s: "
          + ("met" if max(ours) < TARGET_S else "MISSED"))
    return 0 if max(ours) < TARGET_S else 1


if __name__ == "__main__":
    raise SystemExit(main())
