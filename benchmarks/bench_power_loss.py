"""Benchmark: what a power-loss drill costs beside the same sweep without power cuts.

    python benchmarks/bench_power_loss.py [--records 2000] [--rounds 2]

One generated checkpoint project; each round runs, back to back and alternating which goes
first, ``drill --sweep`` and ``drill --power-loss --random-cuts 0`` with the same records, seed,
prefix and sample: the same crash plan (the power-loss plan draws from the seed only for its
random cuts), so the difference is LazyFS under the workers, a clear-cache at each crash and the
store read before and after each cut. Wall time of each drill and the ratio power-loss / sweep
per round. No target: a figure to report (docs/power-loss.md). Needs LazyFS: without it the first power-loss
drill stops the benchmark with its message (how to get it).
Measured (2026-12-01, load average 10-13 on 2 shared cores, 2,000 records, 2 rounds, 12 crashes each):
sweep 23.9-30.6 s, power loss 33.6-63.0 s; power-loss / sweep 1.41 and 2.06 (median 1.73).
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

from generated import load_note  # noqa: E402  (puts the checkout on sys.path)

from advisor import scaffold  # noqa: E402


def drill(project: Path, package: str, data: Path, records: int, *mode: str) -> tuple[float, dict]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "DATABASE_URL")}
    env["PYTHONPATH"] = str(project / "src")
    cmd = [sys.executable, "-m", package, "drill", *mode, "--json", "--no-shrink", "--records", str(records),
           "--seed", "1", "--sweep-prefix", "1", "--sweep-sample", "3", "--data-dir", str(data)]
    started = time.perf_counter()
    done = subprocess.run(cmd, cwd=project, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if not done.stdout.strip():
        raise SystemExit(f"{' '.join(mode)}: no report (exit {done.returncode}): {done.stderr[-800:]}")
    return elapsed, json.loads(done.stdout)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--records", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    print(load_note())
    with tempfile.TemporaryDirectory(prefix="bench-power-") as tmp:
        generated = scaffold.generate("checkpoint", Path(tmp) / "job", {"project_name": "Bench Power"})
        ratios = []
        for n in range(args.rounds):
            sides = [("sweep", ("--sweep",)), ("power-loss", ("--power-loss", "--random-cuts", "0"))]
            times: dict[str, float] = {}
            for name, mode in (sides if n % 2 == 0 else sides[::-1]):
                elapsed, report = drill(generated.dest, generated.package, Path(tmp) / f"{name}-{n}", args.records,
                                        *mode)
                times[name] = elapsed
                print(f"round {n + 1} {name}: {elapsed:.1f} s, {report['kills']} crashes, ok {report['ok']}"
                      + (f", {report['power_loss']['cuts']} power cuts" if "power_loss" in report else ""))
            ratios.append(times["power-loss"] / times["sweep"])
            print(f"round {n + 1} power-loss / sweep: {ratios[-1]:.2f}")
        print(f"power-loss / sweep, {args.records} records: median {statistics.median(ratios):.2f} "
              f"(rounds {min(ratios):.2f}-{max(ratios):.2f}); {load_note()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
