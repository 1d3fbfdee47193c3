"""A strategy's ``controls:`` list: the essential controls a design review checks (STYLE.md 14).

Each control is a question asked of the team (yes / no / unknown), why it matters, how to check
it, how to fix it, when it applies, how much it costs to put in place (``effort``) and, rarely,
the control whose answer stands for it under other answers (``stands_in_for``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from advisor.model.catalog import EFFORTS, Control, ControlCase, Question
from advisor.model.condition_reader import read_conditions, read_url
from advisor.model.yaml_reader import Reader

CONTROL_KEYS = ("id", "question", "why", "how_to_check", "fix", "applies_when", "reference", "cases", "covers",
                "effort", "stands_in_for")  # fmt: skip
_CONTROL_ID = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")


def _cases(c: Reader, questions: Mapping[str, Question]) -> tuple[ControlCase, ...]:
    cases = []
    for j, raw_case in enumerate(c.data.get("cases") or []):
        k = Reader(c.path, raw_case, f"{c.key}.cases[{j}]")
        k.only("when", "why", "how_to_check", "fix")
        when = read_conditions(k, "when", questions)
        if not when:
            raise k.error("when", "a case needs the answers it holds for")
        words = {key: k.text(key) if k.data.get(key) is not None else None for key in ("why", "how_to_check", "fix")}
        if not any(words.values()):
            raise k.error("why", "a case rewords at least one of why, how_to_check, fix")
        cases.append(ControlCase(when, words["why"], words["how_to_check"], words["fix"]))
    return tuple(cases)


def load_controls(
    r: Reader, questions: Mapping[str, Question], pitfall_ids: tuple[str, ...] = ()
) -> tuple[Control, ...]:
    """A strategy's ``controls:`` list (optional; when present, a non-empty list of mappings).

    ``covers`` names pitfalls of the same strategy (``pitfall_ids``) the control guards against.
    """
    if r.data.get("controls") is None:
        return ()
    controls: list[Control] = []
    stand_ins: list[tuple[Reader, str]] = []
    for i, raw in enumerate(r.items("controls")):
        c = Reader(r.path, raw, f"controls[{i}]")
        c.only(*CONTROL_KEYS)
        cid = c.text("id")
        if not _CONTROL_ID.match(cid):
            raise c.error("id", f"{cid!r} is not a control id: use lowercase words joined by '-'")
        if any(other.id == cid for other in controls):
            raise c.error("id", f"duplicate control id {cid!r} (control ids are unique per strategy)")
        covers = c.texts("covers", required=False)
        for j, pid in enumerate(covers):
            if pid not in pitfall_ids:
                known = ", ".join(pitfall_ids)
                raise c.error(f"covers[{j}]", f"{pid!r} is not a pitfall of this strategy; known: {known}")
        effort = c.text("effort", "code")
        if effort not in EFFORTS:
            raise c.error("effort", f"{effort!r} is not an effort; valid, cheapest first: {', '.join(EFFORTS)}")
        stands_in_for = c.text("stands_in_for") if c.data.get("stands_in_for") is not None else None
        if stands_in_for is not None:
            stand_ins.append((c, stands_in_for))
        controls.append(
            Control(
                id=cid,
                question=c.text("question"),
                why=c.text("why"),
                how_to_check=c.text("how_to_check"),
                fix=c.text("fix"),
                applies_when=read_conditions(c, "applies_when", questions),
                reference=read_url(c, "reference"),
                cases=_cases(c, questions),
                covers=covers,
                effort=effort,
                stands_in_for=stands_in_for,
            )
        )
    known_ids = [c.id for c in controls]
    for c, other in stand_ins:
        if other not in known_ids or other == c.text("id"):
            raise c.error("stands_in_for", f"{other!r} is not another control of this strategy; known: {', '.join(known_ids)}")
    return tuple(controls)
