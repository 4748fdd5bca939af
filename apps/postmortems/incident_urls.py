"""Mounted at incidents/<code>/postmortem/: the incident page's panel and one-click drafting."""

from django.urls import path

from apps.postmortems import views

app_name = "incident_postmortem"

urlpatterns = [
    path("", views.incident_panel, name="panel"),
    path("draft/", views.incident_draft, name="draft"),
]
