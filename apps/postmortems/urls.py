from django.urls import path

from apps.postmortems import views

app_name = "postmortems"

urlpatterns = [
    path("", views.postmortem_list, name="list"),
    path("<str:code>/", views.postmortem_detail, name="detail"),
    path("<str:code>/edit/", views.postmortem_edit, name="edit"),
    path("<str:code>/cost/", views.postmortem_cost, name="cost"),
    path("<str:code>/status/", views.postmortem_status, name="status"),
    path("<str:code>/snapshot/", views.postmortem_resnapshot, name="resnapshot"),
    path("<str:code>/comments/", views.postmortem_comment, name="comment"),
    path("<str:code>/markdown/", views.postmortem_markdown, name="markdown"),
]
