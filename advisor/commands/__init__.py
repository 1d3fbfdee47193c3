"""The ``advisor`` commands, one module per group (advice, review, project, probe): each parses
nothing (``advisor/cli.py`` does), calls the library and prints; heavy imports stay inside."""
