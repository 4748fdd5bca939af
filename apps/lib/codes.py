"""Opaque public identifiers: URLs and the API never expose integer primary keys."""

import secrets

_ALPHABET = "23456789abcdefghjkmnpqrstuvwxyz"


def new_code(prefix: str = "", length: int = 12) -> str:
    body = "".join(secrets.choice(_ALPHABET) for _ in range(length))
    return f"{prefix}{body}"
