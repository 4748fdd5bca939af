from django.apps import AppConfig


class PostmortemsConfig(AppConfig):
    name = "apps.postmortems"
    label = "postmortems"
