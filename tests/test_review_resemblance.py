"""The team's context compared with what each control guards against (advisor/review/resemblance.py):
it moves a control the words describe, quotes only words the team wrote, and never counts when
there is no context or when the words name nothing the catalog knows."""

from __future__ import annotations

import datetime as dt

import yaml

from advisor.model.answers import CurrentDesign
from advisor.model.loader import load_catalog
from advisor.review.judge import decision_record, review
from advisor.review.ranking import PRECEDENT_WEIGHT, RESEMBLANCE_WEIGHT, TALLY_WEIGHT
from advisor.review.resemblance import resemblances, words

LOST = {"symptoms": "work_lost,slow_recovery"}
CLAIM = ("When a worker is hard-stopped mid-task, the task only reappears hours later, after its visibility"
         " timeout, and by then the job was already failed.")
# Each describes one mechanism in a team's words, without naming the control.
DESCRIBED = {
    "lease-longer-than-run": "Some of our jobs run longer than the lease, so another process picks up the same job"
                             " while the first is busy with it.",
    "partial-output-published-atomically": "A killed export left a half-written file under its final name, and"
                                           " the loader downstream read it as complete.",
    "offsets-committed-on-revoke": "The consumer group rebalanced during the deploy and the partitions were handed"
                                   " over before their offsets were committed.",
}


def ranked(catalog, answers, context=None):
    r = review(answers, catalog, current=CurrentDesign("idempotent-retry"), context=context)
    return [f.control.id for f in r.findings], r


def test_each_description_resembles_its_own_control_most(catalog):
    for control, text in DESCRIBED.items():
        near = resemblances(text, catalog)
        assert max(near, key=lambda c: near[c].score) == control, (control, near)


def test_the_resemblance_adds_its_weight_to_the_finding(catalog):
    answers = {"symptoms": "duplicate_effect", "workers": "many"}
    text = DESCRIBED["lease-longer-than-run"]
    _, plain = ranked(catalog, answers)
    _, told = ranked(catalog, answers, text)
    before = {f.control.id: f.score for f in plain.findings}
    near = resemblances(text, catalog)
    assert RESEMBLANCE_WEIGHT * near["lease-longer-than-run"].score > 1.0  # worth a consistent rule at least
    for f in told.findings:  # rules with `words` may add more; the resemblance is never lost
        gained = RESEMBLANCE_WEIGHT * near[f.control.id].score if f.control.id in near else 0.0
        assert f.score >= before[f.control.id] + gained - 1e-9


def test_a_control_with_more_cases_is_not_diluted_by_them(catalog, catalog_copy):
    """The closest of a control's wordings counts: a case about something else (here a long one
    about invoices) leaves a description of the control's own failure as close as it was."""
    path = catalog_copy / "idempotent-retry.yaml"
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    lease = next(c for c in data["controls"] if c["id"] == "lease-longer-than-run")
    lease.setdefault("cases", []).append({"when": {"duplicate_cost": ["unacceptable"]},
                                          "why": "Invoices, ledgers, statements and remittances " * 6,
                                          "fix": "Reconcile the invoices against the ledger every night. " * 4})
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    text = DESCRIBED["lease-longer-than-run"]
    before, after = resemblances(text, catalog), resemblances(text, load_catalog(catalog_copy))
    assert after["lease-longer-than-run"].score >= before["lease-longer-than-run"].score - 1e-9


def test_the_record_quotes_only_words_the_team_wrote(catalog):
    text = decision_record(LOST, catalog, current="idempotent-retry", date=dt.date(2026, 1, 2), context=CLAIM)
    line = next(l for l in text.splitlines() if "your context describes what it guards against" in l)
    quoted = line.split("your context describes what it guards against (")[1].split(")")[0]
    said = set(words(CLAIM))
    for word in (w.strip(' "') for w in quoted.split(",")):
        assert word in said, word


def test_no_context_and_unrelated_words_change_nothing(catalog):
    plain, r = ranked(catalog, LOST)
    assert all(f.score == r2.score for f, r2 in zip(r.findings, ranked(catalog, LOST, "   ")[1].findings))
    assert resemblances("", catalog) == {}
    weather, _ = ranked(catalog, LOST, "Lovely sunny afternoon, nobody complained.")
    assert weather == plain
    assert all(found.score == 0 for found in resemblances("Lovely sunny afternoon.", catalog).values())


def test_words_alone_never_make_a_control_matter(catalog):
    """by_rules_and_precedents, which decides whether a control that hangs on an open question is a
    finding, leaves out the context's resemblance (and the tally of every past incident): however the
    context reads, it adds none."""
    from advisor.review.ranking import rank, symptoms_seen

    strategy = catalog.strategy("idempotent-retry")
    answers = {"symptoms": "work_lost"}
    seen = symptoms_seen(answers, catalog, CLAIM)
    for control, found in rank(strategy.controls, {}, seen, answers, catalog, "idempotent-retry"):
        rules = sum(w for _, w in found.rules)
        assert abs(found.by_rules_and_precedents - rules - PRECEDENT_WEIGHT * found.share) < 1e-9, control.id
        assert abs(found.score - rules - PRECEDENT_WEIGHT * found.share - TALLY_WEIGHT * found.tally.share
                   - RESEMBLANCE_WEIGHT * found.words.score) < 1e-9
