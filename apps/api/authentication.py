"""Token authentication for the REST API: ``Authorization: Bearer rs_<prefix>_<secret>``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rest_framework import authentication, exceptions

from apps.accounts.models import ApiToken, Team
from apps.accounts.selectors import api_token_authenticate
from apps.accounts.services import api_token_touch

if TYPE_CHECKING:
    from rest_framework.request import Request


@dataclass
class TokenUser:
    """Who a token request acts as: the token's team, not a person.

    It is authenticated (DRF's IsAuthenticated passes) but is not a database user, so
    services get ``actor=None`` and the timeline names the token instead.
    """

    token: ApiToken
    team: Team = field(init=False)
    is_authenticated: bool = True
    is_anonymous: bool = False
    is_active: bool = True
    is_staff: bool = False
    is_superuser: bool = False
    pk: None = None

    def __post_init__(self) -> None:
        self.team = self.token.team

    def __str__(self) -> str:
        return f"token {self.token.name!r} (rs_{self.token.prefix}_…)"

    def get_username(self) -> str:
        return str(self)


class ApiTokenAuthentication(authentication.BaseAuthentication):
    keywords = ("bearer", "token")

    def authenticate(self, request: Request) -> tuple[TokenUser, ApiToken] | None:
        header = authentication.get_authorization_header(request).split()
        if not header or header[0].lower().decode(errors="replace") not in self.keywords:
            return None
        if len(header) != 2:
            raise exceptions.AuthenticationFailed(
                "Invalid Authorization header: expected 'Bearer rs_<prefix>_<secret>'."
            )
        try:
            raw = header[1].decode("ascii")
        except UnicodeDecodeError:
            raise exceptions.AuthenticationFailed("Invalid token.") from None
        token = api_token_authenticate(raw=raw)
        if token is None:
            raise exceptions.AuthenticationFailed("Invalid or revoked token.")
        api_token_touch(token=token)
        return TokenUser(token=token), token

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="api"'
