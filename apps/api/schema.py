"""OpenAPI description of the token authentication (loaded by ApiConfig.ready)."""

from drf_spectacular.extensions import OpenApiAuthenticationExtension


class ApiTokenScheme(OpenApiAuthenticationExtension):
    target_class = "apps.api.authentication.ApiTokenAuthentication"
    name = "apiToken"

    def get_security_definition(self, auto_schema):
        return {
            "type": "http",
            "scheme": "bearer",
            "bearerFormat": "rs_<prefix>_<secret>",
            "description": "A team's API token (scope ingest, read or write).",
        }


# Operations whose request body must be sent (an upload without one is refused with 400).
_BODY_REQUIRED = {"artifacts_upload", "ingest_slurm", "incidents_create"}


def require_request_bodies(result, generator, request, public):
    """drf-spectacular post-processing hook: mark the bodies of ``_BODY_REQUIRED`` required,
    so the schema does not call a bodiless upload valid."""
    for item in result.get("paths", {}).values():
        for operation in item.values():
            if not isinstance(operation, dict) or "requestBody" not in operation:
                continue
            if operation.get("operationId") in _BODY_REQUIRED:
                operation["requestBody"]["required"] = True
    return result
