"""Operations on a data directory: `status`, `reset`, `reconcile` (and the local broker of a queue project).

Refreshed by `copier update`; cli.py wires them to their commands.
"""
