from django.apps import AppConfig


class InvestigationConfig(AppConfig):
    name = "apps.investigation"
    label = "investigation"
