"""How fast is `advisor recommend --answers FILE --json`, beside a bare `python -c pass`?

Both are timed as whole processes in the same run, alternating, so machine load affects both
alike. Target: a median under 0.25 s, so scripts and CI can call it freely.

    python benchmarks/bench_recommend.py [--runs 21]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_S = 0.25


def timed(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=21)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        answers = Path(tmp) / "job.yml"
        answers.write_text("duration: hours\nwork_shape: record_batch\nworkers: many\nexternal_effects: plain_api\n")
        advisor = [str(Path(sys.executable).with_name("advisor")), "recommend", "--answers", str(answers), "--json"]
        bare = [sys.executable, "-c", "pass"]
        timed(advisor), timed(bare)  # warm the file cache
        a, b = [], []
        for _ in range(args.runs):
            a.append(timed(advisor))
            b.append(timed(bare))
    ma, mb = statistics.median(a), statistics.median(b)
    print(f"{'command':<40} {'median s':>9} {'p90 s':>7}")
    print(f"{'python -c pass (baseline)':<40} {mb:>9.3f} {sorted(b)[int(0.9 * len(b))]:>7.3f}")
    print(f"{'advisor recommend --answers F --json':<40} {ma:>9.3f} {sorted(a)[int(0.9 * len(a))]:>7.3f}")
    print(f"ratio advisor / bare python: {ma / mb:.2f}x; advisor's own cost {ma - mb:.3f} s")
    print(f"target median < {TARGET_S} s: {'met' if ma < TARGET_S else 'NOT met'}")
    return 0 if ma < TARGET_S else 1  # a missed target fails `make bench`


if __name__ == "__main__":
    sys.exit(main())
