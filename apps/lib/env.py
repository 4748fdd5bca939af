"""Typed reads of environment variables.

A malformed value stops start-up with a message that names the variable, because
a service that starts on a silently wrong setting is worse than one that does not
start at all.
"""

from __future__ import annotations

import os
from urllib.parse import urlsplit


class SettingError(Exception):
    """A configuration variable holds a value we cannot use."""

    def __init__(self, name: str, value: str, expected: str) -> None:
        super().__init__(f"Environment variable {name}={value!r} is invalid: expected {expected}.")
        self.name = name


def env_str(name: str, default: str) -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    value = raw.strip().lower()
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off"}:
        return False
    raise SettingError(name, raw, "one of 1/0, true/false, yes/no, on/off")


def env_int(name: str, default: int, *, minimum: int | None = None) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw.strip().replace("_", ""))
    except ValueError:
        raise SettingError(name, raw, "a whole number") from None
    if minimum is not None and value < minimum:
        raise SettingError(name, raw, f"a whole number of at least {minimum}")
    return value


def env_float(name: str, default: float, *, minimum: float | None = None) -> float:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw.strip())
    except ValueError:
        raise SettingError(name, raw, "a number") from None
    if minimum is not None and value < minimum:
        raise SettingError(name, raw, f"a number of at least {minimum}")
    return value


def env_choice(name: str, default: str, *, choices: tuple[str, ...]) -> str:
    """One of ``choices`` (compared as written, after trimming)."""
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    value = raw.strip()
    if value not in choices:
        raise SettingError(name, raw, "one of " + ", ".join(choices))
    return value


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_url(name: str, default: str, *, schemes: tuple[str, ...]) -> str:
    """A URL whose scheme is one of `schemes`; anything else names the variable."""
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        parts = urlsplit(raw.strip())
    except ValueError:
        raise SettingError(name, raw, f"a URL with scheme {'/'.join(schemes)}") from None
    if parts.scheme not in schemes:
        raise SettingError(name, raw, f"a URL with scheme {' or '.join(schemes)}")
    return raw.strip()
