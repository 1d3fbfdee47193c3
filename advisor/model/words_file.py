"""Load ``strategies/stack-words.yaml``: the terms catalog texts may name and each stack's words.

    terms:                       # every term with its default words (true for any stack)
      ack_after_commit: acknowledge a message only after its work commits
    stacks:                      # read in order: per term, the first stack that holds wins
      - id: kafka
        when: {broker: kafka}    # a condition over answers, as everywhere in the catalog
        words:
          ack_after_commit: auto-commit off and `commitSync` after the work is durable

A stack may only reword terms that have a default, and a word may not name another term. Every
problem is a CatalogError naming the file, the key and the reason.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from advisor.model.catalog import Question
from advisor.model.condition_reader import read_when
from advisor.model.parsed_cache import read_yaml
from advisor.model.words import Stack, Words
from advisor.model.yaml_reader import Reader

WORDS_FILE = "stack-words.yaml"
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


def load_words(path: Path, questions: Mapping[str, Question]) -> Words:
    """The stack words in ``path`` (none when the catalog has no such file), each stack's ``when``
    checked against the questions."""
    if not path.exists():
        return Words()
    top = Reader(path, read_yaml(path))
    top.only("terms", "stacks")
    terms = top.child("terms")
    for name in terms.data:
        if not isinstance(name, str) or not _NAME.match(name):
            raise terms.error(str(name), "a term is lowercase words joined by '_' (used as [[term]])")
    defaults = {name: terms.text(name) for name in terms.data}
    if not defaults:
        raise top.error("terms", "expected at least one term with its default words")
    stacks: list[Stack] = []
    for i, raw in enumerate(top.items("stacks")):
        s = Reader(path, raw, f"stacks[{i}]")
        s.only("id", "when", "words")
        sid = s.text("id")
        if any(other.id == sid for other in stacks):
            raise s.error("id", f"duplicate stack id {sid!r}")
        words = s.child("words")
        if not words.data:
            raise s.error("words", "expected the terms this stack rewords")
        for name in words.data:
            if name not in defaults:
                raise words.error(str(name), f"unknown term; a stack rewords the terms under `terms:`: {', '.join(defaults)}")
        stacks.append(Stack(sid, read_when(s, questions), {name: words.text(name) for name in words.data}))
    return Words(defaults, tuple(stacks))
