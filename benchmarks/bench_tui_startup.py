"""How long until the advisor TUI's first screen is ready, beside a bare Textual app?

Each sample is a fresh process (cold imports, like a user typing `advisor`), run headless at
80x24; the clock starts at the top of the child script and stops when Textual calls the
auto-pilot, i.e. when the first screen (the welcome screen) is mounted and ready for keys.
The whole process time (interpreter start to exit) is printed beside it. Advisor and bare
app alternate so machine load affects both alike. Target: advisor median under 1 s.

    python benchmarks/bench_tui_startup.py [--runs 11]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

TARGET_S = 1.0

CHILD = r"""
import sys, time
t0 = time.perf_counter()
if sys.argv[1] == "advisor":
    from advisor.tui.app import make_app
    app = make_app()
else:
    from textual.app import App
    app = App()
ready = []
async def first_screen(pilot):
    ready.append(time.perf_counter())
    pilot.app.exit()
app.run(headless=True, size=(80, 24), auto_pilot=first_screen)
print(ready[0] - t0)
"""


def sample(kind: str) -> tuple[float, float]:
    """(start → first screen ready, whole process) in seconds."""
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", CHILD, kind], check=True, capture_output=True, text=True)
    whole = time.perf_counter() - start
    return float(out.stdout.strip().splitlines()[-1]), whole


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=11)
    args = parser.parse_args()
    sample("advisor"), sample("bare")  # warm the file cache and byte-code
    runs: dict[str, list[tuple[float, float]]] = {"advisor": [], "bare": []}
    for _ in range(args.runs):
        for kind in runs:
            runs[kind].append(sample(kind))
    med = {k: (statistics.median(r for r, _ in v), statistics.median(w for _, w in v)) for k, v in runs.items()}
    print(f"{args.runs} runs each, headless 80x24, fresh process per run")
    print(f"{'app':<34} {'ready median s':>15} {'ready max s':>12} {'process s':>10}")
    for kind, label in (("bare", "bare textual App (baseline)"), ("advisor", "advisor TUI (welcome screen)")):
        ready = [r for r, _ in runs[kind]]
        print(f"{label:<34} {med[kind][0]:>15.3f} {max(ready):>12.3f} {med[kind][1]:>10.3f}")
    a, b = med["advisor"][0], med["bare"][0]
    print(f"ratio advisor / bare: {a / b:.2f}x; the advisor's own cost {a - b:.3f} s")
    print(f"target ready median < {TARGET_S} s: {'met' if a < TARGET_S else 'NOT met'}")
    return 0 if a < TARGET_S else 1  # a missed target fails `make bench`


if __name__ == "__main__":
    sys.exit(main())
