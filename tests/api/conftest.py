"""Fixtures for API tests: tokens of each scope, for our team and for another one."""

from __future__ import annotations

import pytest
from django.core.cache import cache
from django.test import Client

from apps.accounts.services import api_token_create


@pytest.fixture(autouse=True)
def _fresh_rate_limits():
    """Buckets and idempotency answers live in the shared cache: start each test empty."""
    cache.clear()
    yield
    cache.clear()


def _token(team, scope: str, owner=None) -> str:
    return api_token_create(team=team, name=f"{scope} test token", scope=scope, actor=owner)[1]


@pytest.fixture
def ingest_token(team, owner) -> str:
    return _token(team, "ingest", owner)


@pytest.fixture
def read_token(team, owner) -> str:
    return _token(team, "read", owner)


@pytest.fixture
def write_token(team, owner) -> str:
    return _token(team, "write", owner)


@pytest.fixture
def outsider_token(other_team, outsider) -> str:
    return _token(other_team, "write", outsider)


class ApiClient(Client):
    """A Django test client that sends a bearer token on every request."""

    def __init__(self, token: str, **kwargs) -> None:
        super().__init__(HTTP_AUTHORIZATION=f"Bearer {token}", **kwargs)


@pytest.fixture
def api(write_token) -> ApiClient:
    return ApiClient(write_token)


@pytest.fixture
def reader(read_token) -> ApiClient:
    return ApiClient(read_token)


@pytest.fixture
def ingester(ingest_token) -> ApiClient:
    return ApiClient(ingest_token)


@pytest.fixture
def intruder(outsider_token) -> ApiClient:
    return ApiClient(outsider_token)
