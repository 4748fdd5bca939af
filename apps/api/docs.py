"""A browsable reference page built from the OpenAPI schema: no JavaScript, no CDN."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET
from drf_spectacular.generators import SchemaGenerator

_METHOD_ORDER = ["get", "post", "put", "patch", "delete"]


def _schema_ref_name(schema: dict[str, Any]) -> str:
    ref = schema.get("$ref", "")
    if ref:
        return ref.rsplit("/", 1)[-1]
    if schema.get("type") == "array":
        return f"list of {_schema_ref_name(schema.get('items', {}))}"
    return schema.get("format") or schema.get("type") or "object"


@require_GET
def api_docs(request: HttpRequest) -> HttpResponse:
    schema = SchemaGenerator().get_schema(request=None, public=True)
    operations = []
    for path, item in schema.get("paths", {}).items():
        for method in _METHOD_ORDER:
            op = item.get(method)
            if not op:
                continue
            bodies = [
                {"media": media, "schema": _schema_ref_name(body.get("schema", {}))}
                for media, body in (op.get("requestBody", {}).get("content") or {}).items()
            ]
            responses = []
            for code, resp in op.get("responses", {}).items():
                content = resp.get("content") or {}
                media, body = next(iter(content.items()), ("", {}))
                responses.append(
                    {
                        "code": code,
                        "description": resp.get("description", ""),
                        "media": media,
                        "schema": _schema_ref_name(body.get("schema", {})) if media else "",
                    }
                )
            operations.append(
                {
                    "method": method.upper(),
                    "path": path,
                    "id": op.get("operationId", ""),
                    "description": op.get("description", ""),
                    "parameters": op.get("parameters", []),
                    "bodies": bodies,
                    "responses": responses,
                }
            )
    components = sorted(schema.get("components", {}).get("schemas", {}).items())
    return render(
        request,
        "api/docs.html",
        {"info": schema.get("info", {}), "operations": operations, "components": components},
    )
