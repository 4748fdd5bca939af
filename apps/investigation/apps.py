from django.apps import AppConfig


class InvestigationConfig(AppConfig):
    name = "apps.investigation"
    label = "investigation"

    def ready(self) -> None:
        from apps.incidents.signals import incident_page_requested
        from apps.investigation import receivers

        incident_page_requested.connect(
            receivers.incident_page, dispatch_uid="investigation-incident-page"
        )
