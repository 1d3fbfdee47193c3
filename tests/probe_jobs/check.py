"""Progress and verify commands for tests/test_probe.py's jobs.

    python check.py count DIR        prints the records written so far (the --progress command)
    python check.py verify DIR N     exit 0 when records 0..N-1 are each there exactly once
"""

import os
import sqlite3
import sys


def written(data):
    text = os.path.join(data, "out.txt")
    if os.path.exists(text):
        with open(text) as fh:
            return [int(line) for line in fh if line.strip()]
    path = os.path.join(data, "out.db")
    if not os.path.exists(path):
        return []
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return [row[0] for row in db.execute("SELECT id FROM results")]
    except sqlite3.OperationalError:  # the job has not created its table yet
        return []


what, data = sys.argv[1], sys.argv[2]
rows = written(data)
if what == "count":
    print(len(rows))
    sys.exit(0)
expected = set(range(int(sys.argv[3])))
missing, duplicated = len(expected - set(rows)), len(rows) - len(set(rows))
print(f"{len(rows)} records: {missing} missing, {duplicated} duplicated")
sys.exit(1 if missing or duplicated else 0)
