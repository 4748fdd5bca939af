from django.urls import path

from apps.analysis import views

app_name = "analysis"

# Mounted at /incidents/<code>/analysis/ by apps/urls.py.
urlpatterns = [
    path("", views.analysis_panel, name="panel"),
    path("rerun/", views.analysis_rerun, name="rerun"),
    path("triage.json", views.analysis_triage_json, name="triage_json"),
]
