"""The Rankscope project package: settings, URLs, Celery app, and the domain apps."""

# Django, manage.py and `celery -A apps` load the Celery app here, so that shared_task binds
# to it. The offline triage (the `rankscope` package) never imports this package.
from apps.celery import app as celery_app

__all__ = ["celery_app"]
