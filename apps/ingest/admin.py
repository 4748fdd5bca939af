from django.contrib import admin

from apps.ingest.models import Artifact, RankDigest


@admin.register(Artifact)
class ArtifactAdmin(admin.ModelAdmin):
    list_display = ("display_name", "incident", "kind", "parse_status", "size", "created_at")
    list_filter = ("parse_status", "kind", "source")
    search_fields = ("display_name", "code", "sha256", "incident__code")
    readonly_fields = ("code", "storage_key", "sha256", "parsed_key", "metrics_key", "parse_token")


@admin.register(RankDigest)
class RankDigestAdmin(admin.ModelAdmin):
    list_display = ("rank", "host", "artifact", "last_step", "last_nccl_state")
    search_fields = ("host", "artifact__display_name")
