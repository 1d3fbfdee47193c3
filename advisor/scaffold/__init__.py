"""Scaffold: render a project from the Copier template (generation.py), run its crash drill
(drill.py), read a generated project's recorded answers (project.py).

The names below are the scaffold's API as its callers use it (``scaffold.generate``, tests and
benchmarks); the template's questions it re-exports live in ``advisor.model.template_questions``.
Patch a name where it is looked up (``advisor.scaffold.generation.validate_answers``), not here.
"""

from advisor.errors import DrillError, ScaffoldError
from advisor.model.template_questions import generated_strategies, template_questions, validate_answers
from advisor.scaffold.drill import DRILL_DEFAULTS, drill_events, run_drill
from advisor.scaffold.generation import Generated, generate, next_commands, preview
from advisor.scaffold.project import package_of, recorded_answer, strategy_of

__all__ = [
    "DRILL_DEFAULTS", "DrillError", "Generated", "ScaffoldError", "drill_events", "generate", "generated_strategies",
    "next_commands", "package_of", "preview", "recorded_answer", "run_drill", "strategy_of", "template_questions",
    "validate_answers",
]
