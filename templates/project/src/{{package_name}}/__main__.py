"""`python -m <package>`: the command line (see cli.py)."""

import sys

from .drill.durability import install_if_drilled

# Only when the drill started this process (it sets the probe's variable): watch
# what the worker really does to stay durable. A no-op otherwise.
install_if_drilled()

from .cli import main  # noqa: E402  (after the probe: nothing may hold the unwrapped functions)

sys.exit(main())
