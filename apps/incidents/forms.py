from __future__ import annotations

from django import forms

from apps.accounts.models import Team
from apps.incidents.models import DESCRIPTIVE_FIELDS, Incident, Phase, Severity, Status


class IncidentForm(forms.ModelForm):
    team = forms.ModelChoiceField(queryset=Team.objects.none(), empty_label=None)

    class Meta:
        model = Incident
        fields = ["team", *DESCRIPTIVE_FIELDS]
        labels = {
            "job_id": "Job id",
            "gpu_count": "GPUs",
            "gpu_type": "GPU type",
            "gpu_hour_usd": "$ per GPU-hour",
            "remaining_run_hours": "Hours the run still had to go",
            "problem_started_at": "Problem started (UTC)",
            "detected_at": "Detected (UTC)",
        }
        widgets = {
            "problem_started_at": forms.DateTimeInput(attrs={"type": "datetime-local"}),
            "detected_at": forms.DateTimeInput(attrs={"type": "datetime-local"}),
        }

    def __init__(self, *args, teams=None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["team"].queryset = teams if teams is not None else Team.objects.none()
        self.fields["gpu_hour_usd"].required = False
        first = self.fields["team"].queryset.first()
        if first is not None and not self.is_bound:
            self.fields["gpu_hour_usd"].initial = first.default_gpu_hour_usd


class IncidentFilterForm(forms.Form):
    q = forms.CharField(required=False, label="Search")
    status = forms.ChoiceField(required=False, choices=[("", "Any status"), *Status.choices])
    severity = forms.ChoiceField(required=False, choices=[("", "Any severity"), *Severity.choices])
    phase = forms.ChoiceField(required=False, choices=[("", "Any phase"), *Phase.choices])
    cluster = forms.ChoiceField(required=False, choices=[("", "Any cluster")])

    def __init__(self, *args, clusters: list[str] | None = None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["cluster"].choices = [("", "Any cluster")] + [(c, c) for c in clusters or []]


NOTE_MAX = 2000


class PhaseForm(forms.Form):
    """Move the investigation to a phase, with what was concluded (written to the timeline)."""

    phase = forms.ChoiceField(
        choices=Phase.choices, error_messages={"invalid_choice": "Unknown phase “%(value)s”."}
    )
    note = forms.CharField(required=False, max_length=NOTE_MAX, strip=False)


class StatusForm(forms.Form):
    status = forms.ChoiceField(
        choices=Status.choices, error_messages={"invalid_choice": "Unknown status “%(value)s”."}
    )
