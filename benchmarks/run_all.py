"""Run every benchmark in this folder (`make bench`), one after another.

Each benchmark exits 1 when it misses one of its targets (printed as MISSED); this
exits 1 if any did, naming them.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

here = Path(__file__).resolve().parent
failed = []
for script in sorted(here.glob("bench_*.py")):
    print(f"\n=== {script.name} ===", flush=True)
    if subprocess.run([sys.executable, str(script)]).returncode != 0:
        failed.append(script.name)
print(f"\n{'targets missed in: ' + ', '.join(failed) if failed else 'every target met'}")
sys.exit(1 if failed else 0)
