from django.contrib import admin

from apps.analysis.models import AnalysisRun, Finding


class FindingInline(admin.TabularInline):
    model = Finding
    extra = 0
    fields = ("order", "phase", "kind", "title", "confidence")
    readonly_fields = fields
    can_delete = False


@admin.register(AnalysisRun)
class AnalysisRunAdmin(admin.ModelAdmin):
    list_display = (
        "code",
        "incident",
        "status",
        "trigger",
        "attempts",
        "created_at",
        "finished_at",
    )
    list_filter = ("status", "trigger")
    search_fields = ("code", "incident__code", "incident__title")
    readonly_fields = (
        "code",
        "incident",
        "fingerprint",
        "inputs",
        "task_id",
        "attempts",
        "engine_version",
        "timings",
        "error",
        "created_at",
        "enqueued_at",
        "started_at",
        "heartbeat_at",
        "finished_at",
    )
    exclude = ("document",)
    inlines = [FindingInline]
