"""Argument types for the ``gojax`` subcommands that evaluation modules register.

Each is an ``argparse`` ``type=``: it returns the parsed value or raises
``argparse.ArgumentTypeError``, which argparse reports in one line.
"""

from __future__ import annotations

import argparse

__all__ = ["fraction", "non_negative", "positive", "symmetry_arg"]


def positive(text: str) -> int:
    """An argparse type: a positive integer."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return value


def fraction(text: str) -> float:
    """An argparse type: a number in [0, 1]."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be a number in [0, 1], got {text!r}")
    return value


def non_negative(text: str) -> int:
    """An argparse type: an integer >= 0."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be an integer >= 0, got {text!r}")
    return value


def symmetry_arg(text: str) -> int | str:
    """An argparse type: a network evaluation's symmetry, 0..7, ``random`` or ``average``
    (``gojax.evaluate.check_symmetry``)."""
    from gojax.evaluate import check_symmetry

    try:
        return check_symmetry(int(text) if text.lstrip("-").isdigit() else text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
