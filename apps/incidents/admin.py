from django.contrib import admin

from apps.incidents.models import Incident, IncidentEvent, PhaseTransition


class PhaseTransitionInline(admin.TabularInline):
    model = PhaseTransition
    extra = 0
    readonly_fields = ["from_phase", "to_phase", "at", "actor", "note"]


@admin.register(Incident)
class IncidentAdmin(admin.ModelAdmin):
    list_display = ["title", "code", "team", "cluster", "job_id", "status", "phase", "severity"]
    list_filter = ["status", "phase", "severity", "team"]
    search_fields = ["title", "code", "job_id", "cluster"]
    inlines = [PhaseTransitionInline]


@admin.register(IncidentEvent)
class IncidentEventAdmin(admin.ModelAdmin):
    list_display = ["at", "incident", "kind", "message"]
    list_filter = ["kind"]
    readonly_fields = ["incident", "at", "actor", "kind", "message", "data"]

    def has_change_permission(self, request, obj=None) -> bool:
        return False  # the timeline is append-only
