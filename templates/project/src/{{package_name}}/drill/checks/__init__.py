"""The drill's checks beyond the effects and results (verdict.py): pure functions over the
history the run left, each knowing nothing of how its faults were made.

* ``calls.py``   — every call job.py asks for, counted per record and step (``calls_per_step``);
* ``history.py`` — what a strategy keeps as history, complete and in order (``history``);
* ``exits.py``   — a worker that stopped (gracefully, or done) left nothing behind: no claim
  (``held_after_exit``), no call in doubt (``in_doubt_after_exit``), no call for another
  worker to send again (``resent_after_exit``); a message acked only once its work was
  committed (``acked_uncommitted``);
* ``resubmission.py`` — what only the fault schedule can show: input submitted again
  answered as promised (``resubmission``), a reused key with a new request refused
  (``key_reuse``);
* ``claims.py``  — claims between living workers: a holder that moves its unit on under one
  heartbeat (``heartbeat_kept``, from the drill's watch), a unit taken from a holder that was
  still working (``taken_while_held``, from the service's log);
* ``rebuild.py``, ``second_start.py`` — an operator's rebuild, whole or killed mid-way
  (``rebuild``); the job started twice on one worker's data directory (``second_start``);
* ``second_outage.py`` — a worker that gave up on a store outage shorter than its limit
  (``second_outage``);
* ``hung_worker.py`` — a hung holder's unit not taken over once its lease ran out (``hung_holder``).

Each returns ``verdict.Failure`` dicts; judge.py gathers their inputs.
"""
