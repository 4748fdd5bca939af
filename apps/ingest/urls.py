from django.urls import path

from apps.ingest import views

app_name = "ingest"

# Mounted under incidents/<str:code>/artifacts/ (apps/urls.py).
urlpatterns = [
    path("", views.artifact_list, name="list"),
    path("upload/", views.artifact_upload, name="upload"),
    path("<str:artifact_code>/", views.artifact_view, name="view"),
]
