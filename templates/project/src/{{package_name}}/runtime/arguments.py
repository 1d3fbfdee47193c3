"""Argument types shared by the command line (cli.py), the drill's options and the strategies' commands.

Each raises ``argparse.ArgumentTypeError``: argparse turns it into one line and exit code 2.
"""

from __future__ import annotations

import argparse


def _integer(text: str, least: int, words: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < least:
        raise argparse.ArgumentTypeError(f"{text} must be {words}")
    return value


def positive_int(text: str) -> int:
    return _integer(text, 1, "at least 1")


def non_negative_int(text: str) -> int:
    return _integer(text, 0, "zero or more")


def non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if value < 0 or value != value:
        raise argparse.ArgumentTypeError(f"{text} must be zero or more")
    return value


def positive_float(text: str) -> float:
    value = non_negative_float(text)
    if value == 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text} must be a number above zero")
    return value


def fraction(text: str) -> float:
    """A probability in [0, 1)."""
    value = non_negative_float(text)
    if value >= 1:
        raise argparse.ArgumentTypeError(f"{text} must be below 1")
    return value


def port_number(text: str) -> int:
    """A TCP port, 0..65535 (0: off, for --metrics-port)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{text} is not a port number (0-65535)")
    return value
