"""The order flow, declared once: every state and legal transition (``OrderFlow``), and the checks.

Each event but ``fail`` is a step: an external call whose success moves the order on. The
steps are declared in job.py too (with their payloads, for the drill's oracle); importing
this module checks both say the same.
"""

from __future__ import annotations

from statemachine import State, StateMachine

from .. import job
from ..runtime.errors import JobError


class OrderFlow(StateMachine):
    """Every state of an order and every legal transition, declared in one place.

    Each event but ``fail`` is also a STEP: an external call whose success moves
    the order on. Keep states few: a state says where the flow is; whether a
    call really happened is the ``step_log``'s job.
    """

    new = State(initial=True)
    reserved = State()
    charged = State()
    done = State(final=True)
    failed = State(final=True)

    reserve = new.to(reserved)
    charge = reserved.to(charged)
    notify = charged.to(done)
    fail = new.to(failed) | reserved.to(failed) | charged.to(failed)


#: The external steps, in flow order: the ``step`` column of external.db's effects.
#: Declared in job.py, with their payloads, so the drill's oracle knows them
#: without this module; the flow above must have exactly these (checked below).
STEPS: tuple[str, ...] = job.STEPS
FINAL_STATES: tuple[str, ...] = tuple(s.value for s in OrderFlow.final_states)
INITIAL_STATE: str = next(s.value for s in OrderFlow.states if s.initial)
ACTIVE_STATES: tuple[str, ...] = tuple(s.value for s in OrderFlow.states if not s.final)


class IllegalTransition(JobError):
    """An event the flow does not allow in the order's current state."""


#: The legal moves, read once from OrderFlow's declaration: (state, event) -> next state.
#: The orchestrator checks every transition against this table (a dict lookup):
#: building a python-statemachine instance per order costs ~0.1 ms, as much as
#: the transition's own commit. Guards or actions added to OrderFlow (``cond=``,
#: ``on_<event>``) would need the machine itself: see ``machine_for``.
LEGAL_MOVES: dict[tuple[str, str], str] = {
    (state.value, event.id): transition.target.value
    for state in OrderFlow.states for transition in state.transitions for event in transition.events
}
_FLOW_STEPS = {event for (_, event) in LEGAL_MOVES} - {"fail"}
if _FLOW_STEPS != set(STEPS):
    raise ImportError(f"OrderFlow's steps {sorted(_FLOW_STEPS)} differ from job.STEPS {sorted(STEPS)}; "
                      "declare the same steps in both")


class _Holder:
    """A model python-statemachine reads and writes the current state on."""

    def __init__(self, state: str) -> None:
        self.state = state


def machine_for(state: str) -> OrderFlow:
    """The declared machine, restored to ``state`` (for guards, actions, diagrams)."""
    return OrderFlow(model=_Holder(state))


def allowed_events(state: str) -> list[str]:
    return [event for (source, event) in LEGAL_MOVES if source == state]


def next_step(state: str) -> str:
    """The step that moves an order on from ``state`` (the one allowed event that is not ``fail``)."""
    steps = [event for event in allowed_events(state) if event in STEPS]
    if len(steps) != 1:
        raise IllegalTransition(f"state {state!r} has no next step")
    return steps[0]


def check_transition(order_id: str, state: str, event: str) -> str:
    """The state ``event`` leads to from ``state``; an illegal event is a clear error."""
    target = LEGAL_MOVES.get((state, event))
    if target is None:
        allowed = ", ".join(allowed_events(state)) or "none: the order is finished"
        raise IllegalTransition(f"order {order_id}: {event!r} is not allowed in state {state!r} "
                                f"(allowed: {allowed})")
    return target
