"""Which token scopes may do what. Signed-in people act with their team role instead."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rest_framework import permissions

from apps.accounts.models import ApiToken

if TYPE_CHECKING:
    from rest_framework.request import Request
    from rest_framework.views import APIView

READ = "read"
WRITE = "write"
INGEST = "ingest"

# What each kind of access needs from a token's scope.
ALLOWED_SCOPES: dict[str, set[str]] = {
    READ: {ApiToken.Scope.READ, ApiToken.Scope.WRITE},
    WRITE: {ApiToken.Scope.WRITE},
    INGEST: {ApiToken.Scope.INGEST, ApiToken.Scope.WRITE},
}


def request_token(request: Request) -> ApiToken | None:
    return request.auth if isinstance(request.auth, ApiToken) else None


class TokenScope(permissions.BasePermission):
    """Checks a token's scope: reads need read, writes need write, unless the view's
    ``access_by_method`` says otherwise (uploads accept ingest tokens)."""

    message = "This token's scope does not allow this request."

    def has_permission(self, request: Request, view: APIView) -> bool:
        token = request_token(request)
        if token is None:
            return bool(request.user and request.user.is_authenticated)
        by_method: dict[str, str] = getattr(view, "access_by_method", {})
        default = READ if request.method in permissions.SAFE_METHODS else WRITE
        needed = by_method.get(request.method or "", default)
        if token.scope not in ALLOWED_SCOPES[needed]:
            self.message = (
                f"This token's scope ({token.scope}) does not allow this request "
                f"(needs {' or '.join(sorted(ALLOWED_SCOPES[needed]))})."
            )
            return False
        return True
