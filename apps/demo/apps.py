from django.apps import AppConfig


class DemoConfig(AppConfig):
    """The demo account and incident of ``make run``.

    It sits on top of the app layers, beside the API, because seeding a demo uses
    every app below it (accounts, incidents, uploads).
    """

    name = "apps.demo"
    label = "demo"
