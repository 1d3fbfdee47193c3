"""Scaffold: render a project from the Copier template and run its crash drill.

The names below are the scaffold's API (tests, benchmarks and docs call ``scaffold.generate``).
"""

from advisor.errors import DrillError, ScaffoldError
from advisor.scaffold.generation import (
    DRILL_DEFAULTS,
    Generated,
    drill_events,
    generate,
    generated_strategies,
    next_commands,
    preview,
    recorded_answer,
    run_drill,
    strategy_of,
    template_questions,
    validate_answers,
)

__all__ = [
    "DRILL_DEFAULTS", "DrillError", "Generated", "ScaffoldError", "drill_events", "generate", "generated_strategies", "next_commands", "preview",
    "recorded_answer", "run_drill", "strategy_of", "template_questions", "validate_answers",
]
