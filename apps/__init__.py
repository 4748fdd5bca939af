"""The Rankscope project package: settings, URLs, Celery app, and the domain apps."""

from apps.celery import app as celery_app

__all__ = ["celery_app"]
