from django.apps import AppConfig


class PostmortemsConfig(AppConfig):
    name = "apps.postmortems"
    label = "postmortems"

    def ready(self) -> None:
        from apps.analysis.signals import analysis_succeeded, host_history_requested
        from apps.postmortems import receivers

        host_history_requested.connect(receivers.host_history, dispatch_uid="postmortems-hosts")
        analysis_succeeded.connect(
            receivers.on_analysis_succeeded, dispatch_uid="postmortems-signature"
        )
