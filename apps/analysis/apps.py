from django.apps import AppConfig


class AnalysisConfig(AppConfig):
    name = "apps.analysis"
    label = "analysis"

    def ready(self) -> None:
        from apps.analysis import receivers
        from apps.ingest.signals import artifacts_parsed

        artifacts_parsed.connect(receivers.on_artifacts_parsed, dispatch_uid="analysis-fan-in")
