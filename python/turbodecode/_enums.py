"""Enumerations given as members or as their names."""

from __future__ import annotations

import enum
from typing import Any


def name_of(value: Any) -> Any:
    """The name the library takes: a member's value, or the string given."""
    return value.value if isinstance(value, enum.Enum) else value


def as_member(kind: type[enum.Enum], value: Any) -> Any:
    """``value`` as a member of ``kind`` when it names one; else unchanged, for the library to
    reject with an error naming the field."""
    try:
        return kind(value)
    except ValueError:
        return value
