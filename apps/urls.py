from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from django.views.generic import RedirectView

from apps.lib.health import healthz

urlpatterns = [
    path("", RedirectView.as_view(pattern_name="incidents:list", permanent=False)),
    path("healthz", healthz, name="healthz"),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("incidents/", include("apps.incidents.urls")),
    path("incidents/<str:code>/investigation/", include("apps.investigation.urls")),
    path("incidents/<str:code>/postmortem/", include("apps.postmortems.incident_urls")),
    path("postmortems/", include("apps.postmortems.urls")),
    path("teams/", include("apps.accounts.urls")),
    path("api/v1/", include("apps.api.urls")),
    path("incidents/<str:code>/analysis/", include("apps.analysis.urls")),
    path("incidents/<str:code>/artifacts/", include("apps.ingest.urls")),
]
