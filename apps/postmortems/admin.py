from django.contrib import admin

from apps.postmortems.models import (
    Approval,
    IncidentSignature,
    PostMortem,
    PostMortemRevision,
    ReviewComment,
)


@admin.register(PostMortem)
class PostMortemAdmin(admin.ModelAdmin):
    list_display = ["code", "title", "team", "status", "category", "cost_usd", "created_at"]
    list_filter = ["status", "category"]
    search_fields = ["code", "title"]
    readonly_fields = ["snapshot", "search_text"]


admin.site.register(PostMortemRevision)
admin.site.register(ReviewComment)
admin.site.register(Approval)
admin.site.register(IncidentSignature)
