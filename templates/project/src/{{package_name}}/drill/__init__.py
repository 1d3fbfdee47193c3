"""The proof: the crash drill, its oracle (job.py recomputed), its verdict and the durability probe.

Refreshed by `copier update`. `python -m <package> drill` runs it; nothing in runtime/ imports it.
"""
