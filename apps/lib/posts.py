"""The answer of a POST that changes a record's state from a form.

A form with field errors shows the page again with them (status 422, nothing stored);
a valid form runs the change, and a refusal of the change itself (a transition the
record's rules forbid) comes back as a message on the page the user is sent to.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django import forms
from django.contrib import messages
from django.http import HttpRequest, HttpResponse


def change_from_form(
    request: HttpRequest,
    form: forms.Form,
    *,
    refuse: Callable[[forms.Form], HttpResponse],
    change: Callable[[dict[str, Any]], object],
    refused_by: type[Exception],
    then: Callable[[], HttpResponse],
) -> HttpResponse:
    """``refuse(form)`` if the form is invalid; otherwise ``change(cleaned_data)``, a
    ``refused_by`` error shown as a message, and ``then()`` (a redirect)."""
    if not form.is_valid():
        return refuse(form)
    try:
        change(form.cleaned_data)
    except refused_by as exc:
        messages.error(request, str(exc))
    return then()
