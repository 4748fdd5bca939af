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
