"""A real S3 API for the tests: one SeaweedFS server per test session, a prefix per test."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from django.test import override_settings

from tests.objectstore import SeaweedFS


@pytest.fixture(scope="session")
def seaweedfs() -> Iterator[SeaweedFS]:
    """Started on first use (a few seconds), stopped when the session ends."""
    store = SeaweedFS().start()
    try:
        yield store
    finally:
        store.stop()


class S3Place:
    """This test's corner of the store: its key prefix and the env of its processes."""

    def __init__(self, store: SeaweedFS, prefix: str) -> None:
        self.store = store
        self.prefix = prefix

    def env(self) -> dict[str, str]:
        return self.store.env(self.prefix)

    def keys(self) -> list[str]:
        return self.store.keys(self.prefix)

    def uploads(self) -> list[dict]:
        return self.store.uploads(self.prefix)


@pytest.fixture
def s3(seaweedfs, settings) -> Iterator[S3Place]:
    """Default storage is the S3 store (in this process) for the test, under a new prefix."""
    prefix = f"t-{uuid.uuid4().hex[:12]}"
    with override_settings(STORAGES=seaweedfs.storages(prefix)):
        yield S3Place(seaweedfs, prefix)
