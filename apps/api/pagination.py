"""``?limit=&offset=`` pagination that refuses what it cannot read (400), as documented,
instead of silently reading ``offset=null`` as 0."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter
from rest_framework import pagination, serializers


class StrictLimitOffsetPagination(pagination.LimitOffsetPagination):
    max_limit = 1000

    def _read(self, request, name: str, minimum: int) -> int | None:
        raw = request.query_params.get(name)
        if raw is None or raw == "":
            return None
        try:
            value = int(raw)
        except ValueError:
            raise serializers.ValidationError({name: ["A whole number is required."]}) from None
        if value < minimum:
            raise serializers.ValidationError({name: [f"Must be at least {minimum}."]})
        return value

    def get_limit(self, request) -> int | None:
        value = self._read(request, self.limit_query_param, 1)
        if value is None:
            return self.default_limit
        return min(value, self.max_limit)

    def get_offset(self, request) -> int:
        return self._read(request, self.offset_query_param, 0) or 0


PAGINATION_PARAMETERS = [
    OpenApiParameter(
        "limit",
        {"type": "integer", "minimum": 1},
        OpenApiParameter.QUERY,
        required=False,
        description=f"Page size (default 50, at most {StrictLimitOffsetPagination.max_limit})",
    ),
    OpenApiParameter(
        "offset", {"type": "integer", "minimum": 0}, OpenApiParameter.QUERY, required=False
    ),
]
