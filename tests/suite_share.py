"""What `make test` runs of the long tests, and what it leaves to `make soak`.

A generated project's suite holds the same drill machinery in every strategy, so its
whole-drill tests would be paid once per generated project; and a parametrization over
strategies repeats one scenario per strategy. `make test` keeps one case of each (one
seed per drill mode, on code that decides it); `make soak` runs every case.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import pytest

#: Whole-drill tests of code every project shares (the drill itself, the oracle, the schedule,
#: the crash-point counter, the upgrade fixture's writer): the reference project runs them.
MACHINERY = ("test_drill_events_stream", "test_replay_runs_exactly_the_same_faults",
             "test_the_drill_fails_a_job_that_is_not_a_pure_function", "test_a_job_asking_for_two_calls_in_one_step_fails",
             "test_a_job_that_keeps_the_services_reference_passes",
             "test_a_worker_numbers_its_points_the_same_in_every_run_and_dies_exactly_at_one",
             "test_saving_this_code_store_as_the_next_release_fixture", "test_grace_period_expiry_exits_at_once",
             "test_a_worker_rides_out_a_lock_held_beyond_busy_timeout")
#: Every whole-drill test (a variant skips them but VARIANT_DRILLS).
DRILLS = MACHINERY + (
    "test_sigkill_drill_loses_nothing_and_duplicates_nothing", "test_sigterm_exits_0_within_grace_and_restart_redoes_no_call",
    "test_three_workers_keep_the_promise_of_the_call_kind", "test_aim_all_kills_in_every_window_and_loses_nothing",
    "test_aim_one_window_aims_every_kill_there", "test_a_kill_right_after_a_call_keeps_the_promise_of_the_kind",
    "test_status_and_reconcile_say_what_is_in_doubt", "test_a_default_drill_mixes_every_fault_that_applies_and_passes",
    "test_the_sweep_crashes_at_every_kind_of_point_and_loses_nothing",
    "test_a_store_saved_by_this_code_is_continued_with_nothing_lost",
    "test_the_previous_release_store_is_continued_with_nothing_lost", "test_external_outage_hands_the_task_back",
    "test_drill_with_transient_failures_keeps_the_promise", "test_sigterm_while_riding_out_a_lock_exits_0_at_once",
    "test_power_cuts_lose_nothing_the_store_committed")
#: One drill per mode, run on every strategy's own code (its windows, its persistence points,
#: its store under power cuts, the default schedule's faults against its recovery).
STRATEGY_DRILLS = ("test_a_default_drill_mixes_every_fault_that_applies_and_passes",
                   "test_aim_all_kills_in_every_window_and_loses_nothing",
                   "test_the_sweep_crashes_at_every_kind_of_point_and_loses_nothing",
                   "test_power_cuts_lose_nothing_the_store_committed")
#: What a variant's answers change (the call's kind, batch sizes, a flaky service, the default
#: store): the kill right after a call and the calls it leaves in doubt.
VARIANT_DRILLS = ("test_a_kill_right_after_a_call_keeps_the_promise_of_the_kind",
                  "test_status_and_reconcile_say_what_is_in_doubt")
#: The stream project's own whole drills (each restart a JVM start: the costliest of all).
STREAM_DRILLS = ("test_random_sigkills_of_the_driver_lose_and_duplicate_nothing",
                 "test_sigkill_drill_with_aimed_kills_loses_and_duplicates_nothing",
                 "test_sigterm_to_the_process_group_stops_after_the_batch_and_exits_0")
#: What the stream project runs in `make test` (every Spark start is a JVM start): one drill, aimed
#: kills in its windows (its runs cover submit, run and status), and the aimed kills sized to the
#: micro-batches (no Spark: seconds). The rest is in `make soak`.
STREAM_KEPT = ("test_sigkill_drill_with_aimed_kills_loses_and_duplicates_nothing",
               "test_drill_refuses_more_aimed_kills_than_micro_batches",
               "test_aimed_kills_are_drawn_to_fit_the_micro_batches")

#: The longest tests, longest first: a node id starting with any of these.
LONGEST = ("tests/test_template_stream.py::test_generated_stream_project_suite_passes_with_real_spark",
           "tests/test_template_generated.py::test_generated_project_installs_and_its_suite_passes[checkpoint-table]",
           "tests/test_template_generated.py::test_generated_project_installs_and_its_suite_passes",
           "tests/test_newcomer.py", "tests/test_template_rabbitmq.py", "tests/test_template_prometheus.py",
           "tests/test_drill_mutations.py")


def spread_for_workers(items: list[Any], workers: int) -> list[Any]:
    """``items`` laid out for pytest-xdist's work stealing (`--dist worksteal`), which hands each of
    ``workers`` one contiguous share and lets an idle worker take half of the longest queue's tail.
    Each share starts with its turn of the LONGEST tests (dealt round robin, longest first) and
    goes on with an equal part of the rest: the long tests start at once on every worker, and the
    short ones at the tails balance the end."""
    def rank(item: Any) -> int:
        return next((i for i, p in enumerate(LONGEST) if item.nodeid.startswith(p)), len(LONGEST))
    ranked = sorted(items, key=rank)  # stable: the order within a rank stays
    long = [item for item in ranked if rank(item) < len(LONGEST)]
    rest = [item for item in ranked if rank(item) == len(LONGEST)]
    workers = max(1, workers)
    size = -(-len(rest) // workers)
    return [item for w in range(workers) for item in long[w::workers] + rest[w * size:(w + 1) * size]]


def leaving_out_drills_but(kept: Sequence[str]) -> list[str]:
    """pytest arguments for a generated suite: every test but the whole drills (DRILLS) not ``kept``."""
    left_out = tuple(t for t in DRILLS if t not in kept)
    return ["-k", " and ".join(f"not {name}" for name in left_out)]


def only(names: Sequence[str]) -> list[str]:
    """pytest arguments that run just the tests ``names``."""
    return ["-k", " or ".join(names)]


def one_here_rest_in_soak(cases: Iterable[Any], keep: Any, ids: Sequence[str] | None = None,
                          also: Sequence[Any] = ()) -> list[Any]:
    """The cases of a parametrization: ``keep`` (and ``also``) run in `make test`, every other
    one only in `make soak` (the same scenario on another strategy or setting)."""
    cases = list(cases)
    kept = [keep, *also]
    assert all(k in cases for k in kept), f"{kept!r} are not all cases"
    return [pytest.param(*(case if isinstance(case, tuple) else (case,)),
                         id=None if ids is None else ids[i],
                         marks=() if case in kept else pytest.mark.soak) for i, case in enumerate(cases)]
