from django.urls import path
from drf_spectacular.views import SpectacularAPIView

from apps.api import docs, ingest, views

app_name = "api"

urlpatterns = [
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    path("docs/", docs.api_docs, name="docs"),
    path("incidents/", views.IncidentListView.as_view(), name="incidents"),
    path("incidents/<str:code>/", views.IncidentDetailView.as_view(), name="incident"),
    path("incidents/<str:code>/artifacts/", views.ArtifactListView.as_view(), name="artifacts"),
    path(
        "incidents/<str:code>/artifacts/<str:artifact_code>/",
        views.ArtifactDetailView.as_view(),
        name="artifact",
    ),
    path("incidents/<str:code>/analysis/", views.AnalysisStatusView.as_view(), name="analysis"),
    path("incidents/<str:code>/triage/", views.TriageView.as_view(), name="triage"),
    path("incidents/<str:code>/findings/", views.FindingListView.as_view(), name="findings"),
    path(
        "incidents/<str:code>/postmortem.md",
        views.PostmortemMarkdownView.as_view(),
        name="postmortem",
    ),
    path("ingest/slurm", ingest.SlurmIngestView.as_view(), name="ingest-slurm"),
]
