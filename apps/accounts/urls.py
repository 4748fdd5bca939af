from django.urls import path

from apps.accounts import views

app_name = "accounts"

urlpatterns = [
    path("", views.team_list, name="teams"),
    path("<str:team_code>/tokens/", views.token_list, name="tokens"),
    path("<str:team_code>/tokens/<str:code>/revoke/", views.token_revoke, name="token-revoke"),
]
