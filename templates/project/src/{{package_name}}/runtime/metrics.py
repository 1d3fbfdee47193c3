"""Production metrics (Prometheus' conventions, ``prometheus_client``), opt-in.

``run --metrics-port PORT`` serves them on http://127.0.0.1:PORT/metrics (``--metrics-address``
names another address, e.g. ``0.0.0.0`` in a pod); the same server answers ``/healthz`` for a
liveness probe: 200 while the worker made progress (a commit, or an idle turn of its loop) within
``lease_s``, else 503 — past that another worker would take its unit over anyway. ``run
--metrics-file PATH`` writes them for a batch job nobody scrapes (node_exporter's textfile
collector), atomically, every ``TEXTFILE_EVERY_S`` and when ``run`` ends. The environment sets
the same (``<PKG>_METRICS_PORT``, ``_METRICS_ADDRESS``, ``_METRICS_FILE``: settings.py).

Off (neither given), every hook below is an empty function: nothing is imported, nothing
counted. The hooks are module attributes, called as ``metrics.records_done(n)``: ``start()``
rebinds them (as ``faults.window`` is rebound by arming). The names, what each means and the
alerts built on them: docs/production.md in the advisor, deploy/prometheus/alerts.yml here.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from ..settings import INPUT_SOURCE

PREFIX = "continuity_"
#: A batch job's textfile is rewritten this often while it runs (and once more at the end).
TEXTFILE_EVERY_S = 15.0
#: Commit latency buckets (seconds): an fsync on a local disk is ~1-10 ms, a network store more.
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
#: Recovery duration buckets (seconds): a restart to its first commit.
RECOVERY_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)
#: Calls redone per recovery (a count, not a time).
REDONE_BUCKETS = (0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 5000)
CALL_ACTIONS = ("sent", "resent", "looked_up", "held_in_doubt")
TAKEOVER_REASONS = ("owner_dead", "lease_expired")
QUEUE_AGE_BUCKETS = (0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0)


def _off(*args: Any, **kwargs: Any) -> None:
    return None


# --------------------------------------------------------------- the hooks (off)
#: ``n`` records (units of work) committed as done.
records_done: Callable[[int], None] = _off
#: A commit (checkpoint) made; ``seconds`` from BEGIN to COMMIT when known.
checkpoint: Callable[..., None] = _off
#: A commit failed (the store's error); counted once per exception.
checkpoint_failed: Callable[[BaseException], None] = _off
#: An external call: ``"sent"``, ``"resent"`` (after a crash), ``"looked_up"`` or ``"held_in_doubt"``.
call: Callable[[str], None] = _off
#: A unit whose holder is gone was taken over: ``"owner_dead"`` or ``"lease_expired"``.
takeover: Callable[[str], None] = _off
#: The state store unreachable since ``began`` (time.monotonic()), or reachable again (None).
store_unreachable: Callable[[float | None], None] = _off
#: The loop turned without a commit (an idle consumer, an outage being waited out): still alive.
beat: Callable[[], None] = _off
#: The queue consumer took messages published at these times (epoch seconds; None: unknown).
queue_taken: Callable[[list[Any]], None] = _off
#: The consumer saw this many messages ready in its queue.
queue_ready: Callable[[int], None] = _off
#: The grace period ran out before a safe point (shutdown.py, just before it exits).
grace_expired: Callable[[], None] = _off


class _Metrics:
    """The live metrics of this process (one set, however often ``run`` is called)."""

    def __init__(self, settings: Any, in_doubt: Callable[[], int] | None) -> None:
        import prometheus_client as pc
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        pc.disable_created_metrics()  # the *_created series: noise for this job's alerts
        self.registry = registry = pc.CollectorRegistry()
        pc.ProcessCollector(registry=registry)
        pc.PlatformCollector(registry=registry)
        self.lease_s = float(settings.lease_s)
        self.lock = threading.Lock()

        def counter(name: str, doc: str, labels: tuple[str, ...] = ()) -> Any:
            return pc.Counter(PREFIX + name, doc, labels, registry=registry)

        def gauge(name: str, doc: str) -> Any:
            return pc.Gauge(PREFIX + name, doc, registry=registry)

        def histogram(name: str, doc: str, buckets: tuple[float, ...]) -> Any:
            return pc.Histogram(PREFIX + name, doc, buckets=buckets, registry=registry)

        self.records = counter("records_done", "Records (units of work) committed as done by this worker.")
        self.commits = counter("checkpoints", "Commits (checkpoints) made by this worker.")
        self.commit_seconds = histogram("checkpoint_duration_seconds",
                                        "Time of one commit (checkpoint) transaction, BEGIN to COMMIT.",
                                        LATENCY_BUCKETS)
        self.failures = counter("checkpoint_failures", "Commits (checkpoints) that failed: the store's error.")
        self.in_a_row = gauge("checkpoint_consecutive_failures", "Failed commits since the last one that succeeded.")
        self.recoveries = counter("recoveries", "Recoveries of work a killed worker left: succeeded when its first "
                                  "work is committed done, failed when run ended with an error before.", ("outcome",))
        self.recovery_seconds = histogram("recovery_duration_seconds", "From the start of run to the first work "
                                          "a recovery committed done.", RECOVERY_BUCKETS)
        self.redone = histogram("recovery_redone_calls", "External calls redone (re-sent, looked up or held in "
                                "doubt) per recovery.", REDONE_BUCKETS)
        #: Counted as plain ints (read at each scrape, below): this is the one hook a record passes per
        #: external call, and an int needs no lock (only the worker's thread adds to it).
        self.call_counts = dict.fromkeys(CALL_ACTIONS, 0)
        self.takeovers = counter("lease_takeovers", "Units taken over from a holder found dead or silent past its "
                                 "lease.", ("reason",))
        self.outages = counter("store_outages", "Times the state store became unreachable (ridden out or not).")
        self.outage_seconds = counter("store_outage_seconds", "Seconds the state store was unreachable, ridden out.")
        self.shutdowns = counter("shutdowns", "SIGTERM/SIGINT stops: within_grace (final checkpoint written) or "
                                 "grace_expired.", ("outcome",))
        self.shutdown_seconds = histogram("shutdown_duration_seconds", "From SIGTERM/SIGINT to the final checkpoint "
                                          "written (compare with the grace period).", RECOVERY_BUCKETS)
        self.progress = gauge("last_progress_timestamp_seconds",
                              "When the worker last made progress (a commit, or an idle turn of its loop).")
        if INPUT_SOURCE == "rabbitmq":
            self.queue_messages = gauge("queue_messages_ready", "Messages ready in the input queue (last seen).")
            self.queue_age = histogram("queue_message_age_seconds", "Queue lag: from a message's publication "
                                       "(its timestamp property) to the consumer taking it.", QUEUE_AGE_BUCKETS)
        # Every label value from the start: a series that appears only at its first event hides the
        # first increase from rate() and increase(), and the alerts' ratios.
        for family, values in ((self.recoveries, ("succeeded", "failed")), (self.takeovers, TAKEOVER_REASONS),
                               (self.shutdowns, ("within_grace", "grace_expired"))):
            for value in values:
                family.labels(value)
        for name, value, doc in (("lease_seconds", settings.lease_s, "The lease (lease_s) of this worker."),
                                 ("grace_period_seconds", settings.grace_period_s, "The grace period, grace_period_s."),
                                 ("store_outage_limit_seconds", settings.store_outage_s,
                                  "How long an unreachable store is ridden out (store_outage_s).")):
            gauge(name, doc).set(float(value))
        self._progressed()
        self.run_began = time.monotonic()
        self.outage_began: float | None = None
        self.recovery: list[int] | None = None  # [calls redone] while a recovery is open
        self.last_failure: int | None = None

        in_doubt_read = _cached(in_doubt) if in_doubt is not None else None

        class Computed:
            """Read at each scrape: the outage so far, the calls in doubt (the ledger, cached)."""

            def collect(inner) -> Any:
                began = self.outage_began
                g = GaugeMetricFamily(PREFIX + "store_unreachable_seconds",
                                      "How long the state store has been unreachable (0: reachable).")
                g.add_metric([], 0.0 if began is None else time.monotonic() - began)
                yield g
                c = CounterMetricFamily(PREFIX + "external_calls", "External calls by what the worker did: sent, "
                                        "resent after a crash, looked_up (queryable service) or held_in_doubt "
                                        "(plain call, at most once).", labels=("action",))
                for action, n in list(self.call_counts.items()):
                    c.add_metric([action], float(n))
                yield c
                if in_doubt_read is not None:
                    d = GaugeMetricFamily(PREFIX + "external_calls_in_doubt",
                                          "Plain calls in doubt after a crash, waiting for a person (reconcile).")
                    d.add_metric([], float(in_doubt_read()))
                    yield d

        registry.register(Computed())

    # ---- the hooks (on)
    def on_records_done(self, n: int) -> None:
        self.records.inc(n)
        if self.recovery is not None and n:  # the first work committed since: the recovery succeeded
            self.recoveries.labels("succeeded").inc()
            self.recovery_seconds.observe(time.monotonic() - self.run_began)
            self.redone.observe(self.recovery[0])
            self.recovery = None

    def on_checkpoint(self, seconds: float | None = None) -> None:
        self.commits.inc()
        if seconds is not None:
            self.commit_seconds.observe(seconds)
        self.in_a_row.set(0)
        self._progressed()

    def on_checkpoint_failed(self, exc: BaseException) -> None:
        if id(exc) == self.last_failure:  # seen by the transaction and again by the ride-out
            return
        self.last_failure = id(exc)
        self.failures.inc()
        self.in_a_row.inc()

    def on_call(self, action: str) -> None:
        self.call_counts[action] += 1
        if action != "sent":
            self._recovering()[0] += 1

    def on_takeover(self, reason: str) -> None:
        self.takeovers.labels(reason).inc()
        self._recovering()

    def _recovering(self) -> list[int]:
        if self.recovery is None:
            self.recovery = [0]
        return self.recovery

    def on_store_unreachable(self, began: float | None) -> None:
        with self.lock:
            if began is not None and self.outage_began is None:
                self.outages.inc()
            elif began is None and self.outage_began is not None:
                self.outage_seconds.inc(time.monotonic() - self.outage_began)
            self.outage_began = began
        self._progressed()

    def on_beat(self) -> None:
        self._progressed()

    def on_queue_taken(self, published: list[Any]) -> None:
        now = time.time()
        for at in published:
            if at:
                self.queue_age.observe(max(0.0, now - float(at)))
        self._progressed()

    def on_queue_ready(self, n: int) -> None:
        self.queue_messages.set(n)

    def run_ended(self, code: int | None, stop_requested_at: float | None) -> None:
        if self.recovery is not None and code != 0:  # an error (or an exception: None) before the commit
            self.recoveries.labels("failed").inc()
            self.recovery = None
        if self.outage_began is not None:  # gave up (exit 4): the seconds waited count
            self.on_store_unreachable(None)
        if stop_requested_at is not None and code == 0:
            self.shutdowns.labels("within_grace").inc()
            self.shutdown_seconds.observe(time.monotonic() - stop_requested_at)

    def on_grace_expired(self) -> None:
        self.shutdowns.labels("grace_expired").inc()

    def _progressed(self) -> None:
        self.last_progress = time.time()
        self.progress.set(self.last_progress)

    def healthy(self) -> bool:
        """The liveness answer: progress within the lease (another worker would take over after it)."""
        return time.time() - self.last_progress <= self.lease_s


def _cached(read: Callable[[], int], every_s: float = 15.0) -> Callable[[], int]:
    """``read()`` at most once per ``every_s`` (a scrape opens the ledger; scrapes may come often)."""
    last: list[Any] = [None, 0]

    def cached() -> int:
        now = time.monotonic()
        if last[0] is None or now - last[0] >= every_s:
            try:
                last[1] = int(read())
            except Exception as exc:  # the store is down: the outage gauge says so, the last count stands
                print(f"metrics: calls in doubt not read ({type(exc).__name__})", file=sys.stderr)
            last[0] = now
        return int(last[1])

    return cached


_live: _Metrics | None = None
_textfile: str = ""


def start(settings: Any, *, port: int = 0, address: str = "127.0.0.1", textfile: str = "",
          in_doubt: Callable[[], int] | None = None) -> None:
    """Turn the metrics on when a port or a textfile is given (else nothing happens).

    Once per process: ``run`` called again (tests call main() many times) keeps the same
    metrics and server."""
    global _live, _textfile
    if not port and not textfile:
        return
    if _live is None:
        live = _Metrics(settings, in_doubt)
        if port:
            from .metrics_server import serve

            bound = serve(live.registry, live.healthy, address, port)  # JobError: nothing is turned on
            print(f"metrics on http://{bound}/metrics (liveness: /healthz)", file=sys.stderr, flush=True)
        _live = live
        _bind(live)
    else:
        _live.run_began = time.monotonic()
    if textfile and not _textfile:
        _textfile = textfile
        threading.Thread(target=_write_every, name="metrics-textfile", daemon=True).start()


def _bind(live: _Metrics) -> None:
    global records_done, checkpoint, checkpoint_failed, call, takeover, store_unreachable, beat
    global queue_taken, queue_ready, grace_expired
    records_done, checkpoint, checkpoint_failed = live.on_records_done, live.on_checkpoint, live.on_checkpoint_failed
    call, takeover, store_unreachable, beat = live.on_call, live.on_takeover, live.on_store_unreachable, live.on_beat
    queue_taken, queue_ready = live.on_queue_taken, live.on_queue_ready

    def expired() -> None:
        live.on_grace_expired()
        write_textfile()  # the process exits next, without a finally

    grace_expired = expired


def disable() -> None:
    """Every hook back to the empty function (the server, if any, keeps serving the last values):
    benchmarks/bench_metrics.py compares on and off in one process."""
    global records_done, checkpoint, checkpoint_failed, call, takeover, store_unreachable, beat
    global queue_taken, queue_ready, grace_expired
    records_done = checkpoint = checkpoint_failed = call = takeover = store_unreachable = beat = _off
    queue_taken = queue_ready = grace_expired = _off


def enable_again() -> None:
    """The hooks of the metrics started before (after :func:`disable`)."""
    if _live is not None:
        _bind(_live)


def run_ended(code: int | None, stop_requested_at: float | None = None) -> None:
    """``run`` is ending with ``code`` (None: an exception); the textfile is written once more."""
    if _live is not None:
        _live.run_ended(code, stop_requested_at)
        write_textfile()


def write_textfile() -> None:
    if _live is not None and _textfile:
        from prometheus_client import write_to_textfile

        try:
            write_to_textfile(_textfile, _live.registry)  # a temporary file renamed over: atomic
        except OSError as exc:
            print(f"metrics: cannot write {_textfile}: {exc}", file=sys.stderr, flush=True)


def _write_every() -> None:
    while True:
        write_textfile()
        time.sleep(TEXTFILE_EVERY_S)
