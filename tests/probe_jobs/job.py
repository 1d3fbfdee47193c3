"""A tiny batch job for tests/test_probe.py: records 0..N-1 into ``results`` of DIR/out.db.

    python job.py MODE N DIR [WORK_S]

Modes (each one a kind of job a probe must judge):
  checkpoint   results + progress of a batch in one transaction; resumes from progress (survives)
  zero         the same, but every start wipes the table and begins again (restarts from zero)
  lose         commits progress *before* doing a batch's work and writing its results (loses data)
  double       appends each record to DIR/out.txt as it goes, progress after the batch (doubles)
  ignore-term  checkpoint, but ignores SIGTERM
  graceful     checkpoint, and on SIGTERM finishes the current batch and exits 0
"""

import os
import signal
import sqlite3
import sys
import time

mode, n, data = sys.argv[1], int(sys.argv[2]), sys.argv[3]
work_s = float(sys.argv[4]) if len(sys.argv) > 4 else 0.02
BATCH = 10
stopping = False


def on_sigterm(signum, frame):
    global stopping
    stopping = True


if mode == "ignore-term":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
elif mode == "graceful":
    signal.signal(signal.SIGTERM, on_sigterm)

db = sqlite3.connect(os.path.join(data, "out.db"), isolation_level=None, timeout=10)
db.execute("CREATE TABLE IF NOT EXISTS results (id INTEGER)")
db.execute("CREATE TABLE IF NOT EXISTS progress (done INTEGER)")
db.execute("INSERT INTO progress SELECT 0 WHERE NOT EXISTS (SELECT 1 FROM progress)")
if mode == "zero":
    db.execute("BEGIN")
    db.execute("DELETE FROM results")
    db.execute("UPDATE progress SET done = 0")
    db.execute("COMMIT")
    time.sleep(0.3)  # re-reads its whole input before it starts over (the counter reads 0 meanwhile)
done = db.execute("SELECT done FROM progress").fetchone()[0]
out = open(os.path.join(data, "out.txt"), "a") if mode == "double" else None

while done < n and not stopping:
    batch = range(done, min(done + BATCH, n))
    if mode == "lose":  # the bug: the recovery point moves before the results exist
        db.execute("UPDATE progress SET done = ?", (batch[-1] + 1,))
    for i in batch:
        if out is not None:  # the bug: an effect per record, no dedupe on restart
            out.write(f"{i}\n")
            out.flush()
        time.sleep(work_s)
    db.execute("BEGIN")
    if out is None:
        db.executemany("INSERT INTO results VALUES (?)", [(i,) for i in batch])
    db.execute("UPDATE progress SET done = ?", (batch[-1] + 1,))
    db.execute("COMMIT")
    done = batch[-1] + 1
