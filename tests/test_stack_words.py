"""Advice in the team's own words (strategies/stack-words.yaml): each broker, runner and domain
gets its own settings and examples, never another's; checks name only stores the answers imply;
the record's title comes from the team. Issue 24, part 3."""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path

import pytest
import yaml

from advisor.errors import CatalogError
from advisor.model.answers import CurrentDesign
from advisor.model.engine import recommend
from advisor.model.loader import load_catalog
from advisor.review.judge import decision_record

DAY = dt.date(2026, 1, 2)
STREAM = {"recovery_point_store": "broker_or_orchestrator", "work_shape": "unbounded_stream", "duration": "hours",
          "workers": "many", "inbound_duplicates": "possible"}  # fmt: skip
TASK = {"recovery_point_store": "broker_or_orchestrator", "work_shape": "single_task", "workers": "many",
        "inbound_duplicates": "possible"}  # fmt: skip
BATCH = {"recovery_point_store": "broker_or_orchestrator", "work_shape": "record_batch", "duration": "hours",
         "workers": "many", "acceptable_loss": "one_batch"}  # fmt: skip
FLOW = {"work_shape": "multi_step_flow", "external_effects": "plain_api", "duplicate_cost": "unacceptable"}

KAFKA = ("Kafka", "partition", "rebalance", "onPartitionsRevoked", "enable.auto.commit", "consumer group", "commitSync")
BRANDS = ("Kafka", "RabbitMQ", "SQS", "Pub/Sub", "MQTT", "Redis")


def everything(catalog, answers: dict[str, str], current: str) -> str:
    """What a team reads: the decision record with every control of its design, and the JSON —
    without the public reference links (a control's documentation page is the words' source)."""
    record = decision_record(answers, catalog, current=CurrentDesign(current), date=DAY)
    text = record + json.dumps(recommend(answers, catalog).to_json(), ensure_ascii=False)
    return re.sub(r"https?://\S+", "", text)


# (answers, current design, words that must appear, words that must not). One comment per case.
WORDING = [
    # a Kafka consumer gets Kafka's own settings
    ({**STREAM, "broker": "kafka"}, "checkpoint", ("enable.auto.commit", "onPartitionsRevoked", "max.poll.interval.ms"),
     ()),
    # MQTT QoS 1 was told about consumer-group offsets and rebalances: never again
    ({**STREAM, "broker": "mqtt"}, "checkpoint", ("PUBACK", "manual_ack=True", "clean_session=False"), KAFKA),
    ({**TASK, "broker": "mqtt"}, "idempotent-retry", ("PUBACK",), KAFKA),
    # RabbitMQ: manual acks after the commit, prefetch, the redelivered flag
    ({**TASK, "broker": "rabbitmq"}, "idempotent-retry", ("basic_ack", "prefetch_count", "redelivered"),
     (*KAFKA, "DeleteMessage")),
    # SQS: delete after the commit, the visibility timeout, FIFO dedupe ids
    ({**TASK, "broker": "sqs"}, "idempotent-retry", ("DeleteMessage", "ChangeMessageVisibility", "MessageDeduplicationId"),
     (*KAFKA, "basic_ack")),
    # Pub/Sub: the ack deadline and the subscription's exactly-once delivery
    ({**STREAM, "broker": "pubsub"}, "checkpoint", ("ack deadline", "exactly-once delivery", "ordering keys"), KAFKA),
    # Redis: a processing list or a Streams entry acknowledged after the commit
    ({**TASK, "broker": "redis"}, "idempotent-retry", ("LMOVE", "XACK"), KAFKA),
    # another broker: general words, no product named
    ({**STREAM, "broker": "other"}, "checkpoint", (), BRANDS),
    ({**TASK, "broker": "other"}, "idempotent-retry", (), BRANDS),
    # Celery on Redis: late acks, a lost worker's task rejected, the visibility timeout of the transport
    ({**TASK, "broker": "redis", "runner": "celery"}, "idempotent-retry",
     ("acks_late=True", "task_reject_on_worker_lost", "visibility_timeout"), KAFKA),
    # Airflow: retries and idempotent tasks keyed by the run's logical date; never the RabbitMQ input
    ({**BATCH, "runner": "airflow", "broker": "none", "outputs": "outside_store"}, "idempotent-retry",
     ("{{ ds }}", "execution_timeout", "`retries`"), ("input_source=rabbitmq", *KAFKA)),
    # Spark's checkpoint location and foreachBatch; not Flink's words
    ({"work_shape": "unbounded_stream", "recovery_point_store": "stream_engine", "runner": "spark"}, "stream-checkpoint",
     ("checkpointLocation", "foreachBatch"), ("flink stop", "state.checkpoints.dir")),
    # Flink's checkpoints, savepoints and exactly-once sinks; not Spark's
    ({"work_shape": "unbounded_stream", "recovery_point_store": "stream_engine", "runner": "flink"}, "stream-checkpoint",
     ("state.checkpoints.dir", "flink stop", "two-phase commit"), ("foreachBatch", "checkpointLocation")),
    # ... and with outputs in another store, still no driver, executor or replayed micro-batch
    ({"work_shape": "unbounded_stream", "recovery_point_store": "stream_engine", "runner": "flink", "outputs": "outside_store"},
     "stream-checkpoint", ("JobManager", "TaskManager"), ("foreachBatch", "the driver ", "the driver's", "executor", "replayed micro-batch")),
    # ... which Spark's own record says, in Spark's words
    ({"work_shape": "unbounded_stream", "recovery_point_store": "stream_engine", "runner": "spark", "outputs": "outside_store"},
     "stream-checkpoint", ("the driver", "executor", "micro-batch"), ("JobManager", "TaskManager")),
    # Kubernetes Jobs: backoffLimit, Indexed Jobs, the pod's grace period
    ({"work_shape": "record_batch", "duration": "hours", "runner": "kubernetes_jobs", "unit_vs_notice": "longer_than_notice",
      "kill_control": "can_defer"}, "checkpoint",
     ("backoffLimit", "JOB_COMPLETION_INDEX", "terminationGracePeriodSeconds", "PodDisruptionBudget"), ()),
    # SLURM: a warning signal before the time limit, requeue; no Kubernetes objects
    ({"work_shape": "record_batch", "duration": "hours", "runner": "slurm", "unit_vs_notice": "longer_than_notice",
      "kill_control": "can_defer"}, "checkpoint",
     ("--signal=B:USR1@120", "--requeue", "SLURM_RESTART_COUNT"), ("PodDisruptionBudget", "safe-to-evict", "kubectl")),
    # payment examples for payments only
    ({**FLOW, "domain": "payments"}, "state-machine", ('"paid"', "gateway"), ()),
    # an LLM agent is not told about a gateway that never answered
    ({**FLOW, "nondeterminism": "nondeterministic", "work_discovery": "discovered"}, "state-machine",
     ('"called"',), ('"paid"', "gateway")),
    # nor is a pipeline that submits SLURM jobs
    ({**FLOW, "runner": "slurm", "domain": "data_pipeline"}, "state-machine", ('"submitted"', "`sbatch`"),
     ('"paid"', "gateway")),
    # no domain: neutral examples
    (FLOW, "state-machine", ('"done"',), ('"paid"', "gateway")),
]  # fmt: skip


@pytest.mark.parametrize("answers,current,present,absent", WORDING)
def test_each_stack_gets_its_own_words_and_no_one_elses(catalog, answers, current, present, absent):
    text = everything(catalog, answers, current)
    for word in present:
        assert word in text, word
    for word in absent:
        assert word not in text, word


# (recovery point store, current design, whether SQL checks may appear). One comment per case.
STORES = [
    ("database", "checkpoint", True),  # a task table the answers imply: its queries are the proof
    ("database", "state-machine", True),
    (None, "checkpoint", False),  # unanswered: a check in general terms, no `FROM tasks` for a job with no such table
    ("object_storage", "checkpoint", False),  # objects have no SELECT
    ("local_disk", "checkpoint", False),  # a progress file
    ("broker_or_orchestrator", "idempotent-retry", False),  # the broker's console, not a table
    ("event_log", "event-sourcing", False),  # an event store need not speak SQL
    (None, "state-machine", False),
]


@pytest.mark.parametrize("store,current,sql", STORES)
def test_sql_checks_only_against_a_database_the_answers_imply(catalog, store, current, sql):
    answers = {"work_shape": "record_batch", "workers": "many", "external_effects": "plain_api",
               "inbound_duplicates": "possible", **({"recovery_point_store": store} if store else {})}  # fmt: skip
    record = decision_record(answers, catalog, current=CurrentDesign(current), date=DAY)
    assert ("`SELECT " in record) is sql
    if not sql:
        assert "FROM tasks" not in record and "UPDATE tasks" not in record


# --- the record's title ---------------------------------------------------------------------

# (context, --title, answers, the title line). One comment per case.
TITLES = [
    # the team's first sentence, cut at its first clause to fit a heading
    ("Some of our SQS messages are hour-long video jobs; after 30 seconds another worker can pick up the same job.",
     None, TASK, "# Some of our SQS messages are hour-long video jobs — Idempotent retry"),
    # a short first sentence whole, without its full stop
    ("Nightly sync of 8M rows. It restarts from zero after each deploy.", None, {"work_shape": "record_batch"},
     "# Nightly sync of 8M rows — Checkpoint + state table"),
    # no context: the job as the answers describe it (the runner first)
    (None, None, {**BATCH, "runner": "airflow"}, "# Continuity mechanism for the Airflow task: Checkpoint + state table"),
    (None, None, {**STREAM, "broker": "kafka"},
     "# Continuity mechanism for the Kafka consumer: The stream framework's own checkpoint (Spark / Flink)"),
    # the team's own name for it wins
    ("Anything.", "the invoice mailer", {"work_shape": "record_batch"},
     "# Continuity mechanism for the invoice mailer: Checkpoint + state table"),
]  # fmt: skip


@pytest.mark.parametrize("context,title,answers,line", TITLES)
def test_the_title_comes_from_the_team(catalog, context, title, answers, line):
    record = decision_record(answers, catalog, context=context, title=title, date=DAY)
    assert record.splitlines()[0] == line


def test_no_two_calibration_records_share_a_title(catalog):
    """Every tuned incident, written as its team would (context + answers): each record has its own
    title, none the old "Continuity mechanism for the long-running job"."""
    rows = yaml.safe_load((Path(__file__).parent / "calibration" / "review_tuned.yaml").read_text())["incidents"]
    titles = []
    for row in rows:
        answers = {q: v for q, v in row["answers"].items() if q in catalog.question_ids and isinstance(v, str)}
        titles.append(decision_record(answers, catalog, context=row.get("context"), date=DAY).splitlines()[0])
    assert len(set(titles)) == len(titles), titles
    assert not any("the long-running job" in t for t in titles)


# --- the stack words file, validated like every catalog file --------------------------------

# (file, mutation, key the error names, words of the reason). One comment per case.
BROKEN = [
    # a text naming a term nobody defined
    ("checkpoint.yaml", lambda t: t.replace("[[ack_after_commit]]", "[[ack_after_comit]]", 1), "checkpoint.yaml",
     "recipes[", "unknown term [[ack_after_comit]]"),
    # a shared pitfall too
    ("pitfalls.yaml", lambda t: t.replace("[[unconfirmed_call]]", "[[unconfirmed]]", 1), "pitfalls.yaml",
     "pitfalls[0].fix", "unknown term [[unconfirmed]]"),
    # a stack rewording a term that has no default
    ("stack-words.yaml", lambda t: t.replace("      job_noun: the Celery task", "      job_name: the Celery task"),
     "stack-words.yaml", "stacks[2].words.job_name", "unknown term"),
    # a stack's documentation page that is not a URL: caught where a control points to it
    ("stack-words.yaml", lambda t: t.replace("lease_docs: https://www.rabbitmq.com/docs/consumers#acknowledgement-timeout",
                                             "lease_docs: the RabbitMQ consumer guide"),
     "idempotent-retry.yaml", "reference", "not 'the RabbitMQ consumer guide'"),
    # a stack whose condition names a value the question does not have
    ("stack-words.yaml", lambda t: t.replace("when: {broker: kafka}", "when: {broker: kafka2}"), "stack-words.yaml",
     "when.broker", "unknown value 'kafka2'"),
    # a word that names another term: words are leaves
    ("stack-words.yaml", lambda t: t.replace("  job_noun: the long-running job", "  job_noun: the [[lease]] job"),
     "stack-words.yaml", "terms.job_noun", "names a term"),
    # a term name that can't be written as [[term]]
    ("stack-words.yaml", lambda t: t.replace("  job_noun: the long-running job", "  Job-Noun: the long-running job"),
     "stack-words.yaml", "terms.Job-Noun", "lowercase"),
    # two stacks with one id
    ("stack-words.yaml", lambda t: t.replace("  - id: rabbitmq\n", "  - id: kafka\n"), "stack-words.yaml", "id",
     "duplicate stack id"),
    # a term in a question: questions are read before the stack words
    ("questions.yaml", lambda t: t.replace("asks: How long does one run take?", "asks: How long does [[job_noun]] take?"),
     "questions.yaml", "asks", "names a term"),
]  # fmt: skip


@pytest.mark.parametrize("name,mutate,where,key,reason", BROKEN)
def test_broken_stack_words_name_file_key_and_reason(catalog_copy: Path, name, mutate, where, key, reason):
    path = catalog_copy / name
    path.write_text(mutate(path.read_text()))
    with pytest.raises(CatalogError) as err:
        load_catalog(catalog_copy)
    assert where in str(err.value) and key in str(err.value) and reason in str(err.value), str(err.value)


# (answers, a documentation page the record must point to, pages it must not). One comment per case.
DOCS = [
    # a RabbitMQ team's lease is RabbitMQ's delivery acknowledgement timeout, not SQS's visibility timeout
    ({**TASK, "broker": "rabbitmq"}, "rabbitmq.com/docs/consumers#acknowledgement-timeout", ("amazon.com", "celeryq")),
    # an SQS team reads AWS's page on the visibility timeout
    ({**TASK, "broker": "sqs"}, "sqs-visibility-timeout", ("rabbitmq.com",)),
    # a Celery task is stopped the Celery way
    ({**TASK, "runner": "celery", "broker": "redis", "trigger": "planned_stop"}, "workers.html#stopping-the-worker", ("kubernetes.io/docs/concepts/workloads/pods/pod-lifecycle",)),
    # no broker named: a page about leases in general, no product's
    ({**TASK, "broker": "other"}, "time-bound-lease", ("amazon.com", "rabbitmq.com", "celeryq")),
]


@pytest.mark.parametrize(("answers", "page", "not_pages"), DOCS)
def test_a_control_points_to_the_stacks_own_documentation(catalog, answers, page, not_pages):
    record = decision_record(answers, catalog, current=CurrentDesign("idempotent-retry"), date=DAY)
    links = set(re.findall(r"https?://[^\s)]+", record))
    assert any(page in link for link in links), sorted(links)
    assert not [link for link in links if any(bad in link for bad in not_pages)], sorted(links)


def test_every_term_has_words_true_for_any_stack(catalog):
    """Without a stack answer the default words name no product: what `advisor explain` and the
    docs print (the Worded strings' own value) is true for every team."""
    for term, words in catalog.words.defaults.items():
        assert not any(brand in words for brand in (*BRANDS, "Celery", "Airflow", "SLURM")), term
        assert not any(example in words for example in ('"paid"', "gateway", "charge")), term


def test_a_catalog_without_stack_words_still_loads(catalog_copy: Path):
    """A team's own catalog may drop the file if no text names a term."""
    import re

    (catalog_copy / "stack-words.yaml").unlink()
    term = re.compile(r"\[\[([a-z_]+)\]\]")

    def plain(m: re.Match[str]) -> str:  # a documentation term stands where a URL must
        return "https://example.org/docs" if m.group(1).endswith("_docs") else "the platform's own words"

    for path in catalog_copy.glob("*.yaml"):
        path.write_text(term.sub(plain, path.read_text()))
    bare = load_catalog(catalog_copy)
    assert not bare.words.defaults
    record = decision_record({"work_shape": "record_batch"}, bare, date=DAY)
    assert record.startswith("# Continuity mechanism for the long-running job")
