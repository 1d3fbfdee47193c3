"""``advisor probe``: crash-drill a team's own job (a shell command) with kills and restarts, in
its own process group, and judge it — the runner, the process groups, the report and its verdict."""
