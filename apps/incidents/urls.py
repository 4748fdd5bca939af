from django.urls import path

from apps.incidents import views

app_name = "incidents"

urlpatterns = [
    path("", views.incident_list, name="list"),
    path("new/", views.incident_create, name="create"),
    path("<str:code>/", views.incident_detail, name="detail"),
    path("<str:code>/phase/", views.incident_phase, name="phase"),
    path("<str:code>/status/", views.incident_status, name="status"),
]
