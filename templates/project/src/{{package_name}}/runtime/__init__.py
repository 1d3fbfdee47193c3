"""The shared runtime every strategy runs on: store, effects, external service, signals, state, owners.

Refreshed by `copier update`; edit job.py and settings.py instead. It imports nothing from drill/, ops/ or cli.py.
"""
