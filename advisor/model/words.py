"""The team's own words: ``[[terms]]`` in catalog texts, worded for the answers.

A catalog text may name a term (``[[ack_after_commit]]``); ``strategies/stack-words.yaml`` says
what it means for each stack — manual acks and ``basic_ack`` for RabbitMQ, ``DeleteMessage`` for
SQS, a PUBACK for MQTT — and in general words for everyone else. Per term, the first stack whose
condition holds and that defines the term wins; otherwise the default. The rules are data
(STYLE.md 14); this module only fills them in. Pure: no I/O.

A text with terms is loaded as a :class:`Worded` string: its value is the text in the default
words, so whatever prints it without the answers (``advisor explain``, the docs) says something
true for every stack; :func:`say` words it for the answers.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

# [[term]]: lowercase words joined by "_" (double brackets: single braces appear in real texts).
TERM = re.compile(r"\[\[([a-z][a-z0-9_]*)\]\]")


@dataclass(frozen=True)
class Stack:
    """The words of one stack (a broker, a runner, a domain), used when its condition holds."""

    id: str
    when: Mapping[str, tuple[str, ...]]  # question id → values (AND across questions)
    words: Mapping[str, str]  # term → its wording for this stack

    def holds(self, answers: Mapping[str, str]) -> bool:
        return all(answers.get(q) in values for q, values in self.when.items())


@dataclass(frozen=True)
class Words:
    """Every term's default wording and the stacks that reword it."""

    defaults: Mapping[str, str] = field(default_factory=dict)
    stacks: tuple[Stack, ...] = ()

    def term(self, name: str, answers: Mapping[str, str]) -> str:
        """One term for these answers: the first stack that holds and defines it, else the default."""
        for stack in self.stacks:
            if name in stack.words and stack.holds(answers):
                return stack.words[name]
        return self.defaults[name]

    def fill(self, template: str, answers: Mapping[str, str]) -> str:
        return TERM.sub(lambda m: self.term(m.group(1), answers), template)

    def variants(self, template: str) -> set[str]:
        """Every way ``template`` can read: in the default words and in each stack's."""
        return {self.fill(template, {})} | {
            self.fill(template, {q: values[0] for q, values in stack.when.items()}) for stack in self.stacks
        }

    def unknown_terms(self, text: str) -> list[str]:
        return [t for t in TERM.findall(text) if t not in self.defaults]

    def wrap(self, text: str) -> str:
        """``text`` as loaded from the catalog: a :class:`Worded` when it names terms."""
        return Worded(text, self) if TERM.search(text) else text


class Worded(str):
    """A catalog text with terms. Its value: the text in the default words; :func:`say` rewords it."""

    template: str
    words: Words

    def __new__(cls, template: str, words: Words) -> Worded:
        self = super().__new__(cls, words.fill(template, {}))
        self.template, self.words = template, words
        return self

    def for_answers(self, answers: Mapping[str, str]) -> str:
        return self.words.fill(self.template, answers)


def say(text: str, answers: Mapping[str, str]) -> str:
    """A catalog text worded for these answers (a text without terms is returned as it is)."""
    return text.for_answers(answers) if isinstance(text, Worded) else text
