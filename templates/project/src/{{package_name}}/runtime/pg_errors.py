"""Which PostgreSQL errors are an outage to ride out (runtime/outage.py), not a mistake to report.

A server restarting, shutting down, refusing connections or cutting one passes by itself; a
wrong host name, database or password does not. store.py asks this of every psycopg error.
"""

from __future__ import annotations

#: SQLSTATEs (besides class 08) of a server that cannot serve this connection now: admin/crash
#: shutdown, "cannot connect now" (starting up, in recovery), too many connections: pause, retry.
_PG_UNAVAILABLE_STATES = ("57P01", "57P02", "57P03", "53300")
#: Connection failures have no SQLSTATE (libpq reports them as text): these say the
#: server is down, restarting or overloaded, not that the URL or password is wrong.
_PG_UNAVAILABLE_WORDS = ("connection refused", "starting up", "shutting down", "not yet accepting",
                         "recovery mode", "server closed the connection", "timeout expired", "timed out",
                         "too many clients", "no route to host", "network is unreachable",
                         "terminating connection")


def postgresql_unavailable(exc: BaseException, *, connecting: bool = False) -> bool:
    """Is this psycopg error an outage worth waiting for (not a mistake to report at once)?"""
    import psycopg  # only asked about PostgreSQL errors, so it is installed

    if not isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError)):
        return False
    sqlstate = getattr(exc, "sqlstate", None)
    if sqlstate:
        return sqlstate.startswith("08") or sqlstate in _PG_UNAVAILABLE_STATES
    # No SQLSTATE. While connecting, only the words tell a server that is down from a
    # wrong host, database or password; once connected, it is the connection that broke.
    text = str(exc).lower()
    return not connecting or any(word in text for word in _PG_UNAVAILABLE_WORDS)
