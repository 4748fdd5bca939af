"""Forms for the investigation writes of the incident page.

Every POST of the investigation sections is read through one of these: a value that is
too long, not one of the choices, or not a date is answered with an error at its field
and nothing is stored — nothing is cut to fit. The services keep their own checks (they
are also called by the proposals and the API).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django import forms
from django.contrib.auth import get_user_model

from apps.incidents.models import Incident
from apps.investigation import protocol, selectors, services
from apps.investigation.models import (
    ActionKind,
    ActionStatus,
    FixKind,
    HypothesisStatus,
    Priority,
)
from apps.investigation.verification import parse_trials

TITLE_MAX = 300  # the title columns (Hypothesis, WhyChain, Fix)
TEXT_MAX = 10_000  # free text: descriptions, tests, results, why levels
SHORT_TEXT_MAX = 2_000  # a contributing factor, an action item
EVIDENCE_MAX_REFS = 50
EVIDENCE_LINE_MAX = 2_000
EVIDENCE_FILE_MAX = 499
TARGET_MAX = 60


def _text(*, required: bool = False, max_length: int = TEXT_MAX, **kwargs: Any) -> forms.CharField:
    # strip=False: what was typed is what is stored (the services strip where it matters).
    return forms.CharField(required=required, max_length=max_length, strip=False, **kwargs)


class EvidenceField(forms.CharField):
    """``file:line [note]`` one a line (a line without ``:line`` is a note) → evidence refs.

    Refused, with the line named, rather than cut: more than 50 refs, a line over 2,000
    characters or a file name of 500 characters or more."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("required", False)
        kwargs.setdefault("strip", False)
        super().__init__(**kwargs)

    def clean(self, value: Any) -> list[dict[str, Any]]:  # type: ignore[override]
        text = super().clean(value) or ""
        lines = [(n, raw.strip()) for n, raw in enumerate(text.splitlines(), 1) if raw.strip()]
        if len(lines) > EVIDENCE_MAX_REFS:
            raise forms.ValidationError(
                f"At most {EVIDENCE_MAX_REFS} evidence lines (this has {len(lines)})."
            )
        for n, line in lines:
            if len(line) > EVIDENCE_LINE_MAX:
                raise forms.ValidationError(
                    f"Evidence line {n} has {len(line)} characters; at most {EVIDENCE_LINE_MAX}."
                )
            ref = services.evidence_parse(line)[0]
            # A ref's file is the text before its first colon (see evidence_parse).
            file_part = line.split(":", 1)[0].strip() if ref["file"] else ""
            if len(file_part) > EVIDENCE_FILE_MAX:
                raise forms.ValidationError(
                    f"Evidence line {n}: the file name has {len(file_part)} characters; "
                    f"at most {EVIDENCE_FILE_MAX}."
                )
        return services.evidence_parse(text)


def _required_text(form: forms.Form, name: str, message: str) -> str:
    value = form.cleaned_data.get(name) or ""
    if not value.strip():
        raise forms.ValidationError(message)
    return value


# ---------------------------------------------------------------- hypotheses


class HypothesisForm(forms.Form):
    title = _text(required=True, max_length=TITLE_MAX)
    description = _text()
    expected_if_true = _text()
    test_plan = _text()
    evidence = EvidenceField()

    def clean_title(self) -> str:
        return _required_text(self, "title", "A hypothesis needs a title.")


class HypothesisEditForm(forms.Form):
    """Only the fields the request carries are changed."""

    title = _text(max_length=TITLE_MAX)
    description = _text()
    expected_if_true = _text()
    test_plan = _text()

    def clean_title(self) -> str:
        if "title" in self.data:
            return _required_text(self, "title", "A hypothesis needs a title.")
        return ""

    def changes(self) -> dict[str, str]:
        return {name: self.cleaned_data[name] for name in self.fields if name in self.data}


class HypothesisTestForm(forms.Form):
    status = forms.ChoiceField(
        choices=[(v, label) for v, label in HypothesisStatus.choices if v != "pending"],
        error_messages={"required": "Choose supported, refuted or inconclusive."},
    )
    test_plan = _text()
    test_result = _text(
        required=True, error_messages={"required": "Say which test was run and what it showed."}
    )
    evidence = EvidenceField()

    def clean_test_result(self) -> str:
        return _required_text(self, "test_result", "Say which test was run and what it showed.")


# ---------------------------------------------------------------- five whys


class WhyChainForm(forms.Form):
    title = _text(required=True, max_length=TITLE_MAX)
    why = _text()
    answer = _text()
    evidence = EvidenceField()

    def clean_title(self) -> str:
        return _required_text(self, "title", "Name the symptom the chain starts from.")

    def levels(self) -> list[dict[str, Any]]:
        data = self.cleaned_data
        if not (data["why"].strip() or data["answer"].strip()):
            return []
        return [{"why": data["why"], "answer": data["answer"], "evidence": data["evidence"]}]


class WhyStepForm(forms.Form):
    why = _text(required=True)
    answer = _text(required=True)
    evidence = EvidenceField()


class WhyStepChangeForm(forms.Form):
    """Edit a level, or remove it (``action=remove``, the other fields are then ignored)."""

    action = forms.ChoiceField(choices=[("", "save"), ("remove", "remove")], required=False)
    why = _text()
    answer = _text()

    @property
    def removes(self) -> bool:
        return self.cleaned_data.get("action") == "remove"


class FactorForm(forms.Form):
    text = _text(required=True, max_length=SHORT_TEXT_MAX)

    def clean_text(self) -> str:
        return _required_text(self, "text", "Describe the contributing factor.")


class FactorChangeForm(forms.Form):
    action = forms.ChoiceField(choices=[("", "save"), ("remove", "remove")], required=False)
    text = _text(max_length=SHORT_TEXT_MAX)

    @property
    def removes(self) -> bool:
        return self.cleaned_data.get("action") == "remove"


# ---------------------------------------------------------------- fixes


class FixForm(forms.Form):
    title = _text(required=True, max_length=TITLE_MAX)
    kind = forms.ChoiceField(choices=FixKind.choices, required=False)
    detail = _text()
    applied = forms.BooleanField(required=False)

    def clean_title(self) -> str:
        return _required_text(self, "title", "Name the fix.")

    def clean_kind(self) -> str:
        return self.cleaned_data.get("kind") or FixKind.IMMEDIATE


class _IncidentForm(forms.Form):
    """A form whose choices depend on the incident (its team, its files)."""

    def __init__(self, *args: Any, incident: Incident, **kwargs: Any) -> None:
        self.incident = incident
        super().__init__(*args, **kwargs)


class FixVerifyForm(_IncidentForm):
    baseline = _text()
    post_fix = _text()
    baseline_files = forms.MultipleChoiceField(required=False)
    post_files = forms.MultipleChoiceField(required=False)
    target = _text(max_length=TARGET_MAX)
    tolerance = forms.FloatField(
        required=False,
        min_value=0,
        max_value=100,
        error_messages={"invalid": "Tolerance is a percentage, e.g. 5."},
    )
    problem_resolved = forms.ChoiceField(
        required=False, choices=[("", "Not tested"), ("yes", "gone"), ("no", "still occurs")]
    )

    def __init__(self, *args: Any, incident: Incident, **kwargs: Any) -> None:
        super().__init__(*args, incident=incident, **kwargs)
        self.tables = {
            a.code: table for a, table in selectors.incident_metrics_tables(incident=incident)
        }
        choices = [(code, code) for code in self.tables]
        for name in ("baseline_files", "post_files"):
            field = self.fields[name]
            assert isinstance(field, forms.MultipleChoiceField)
            field.choices = choices
            field.error_messages["invalid_choice"] = (
                "That metrics file is not part of this incident."
            )

    def _trials(self, name: str) -> dict[str, list[float]]:
        try:
            return parse_trials(self.cleaned_data.get(name) or "")
        except ValueError as exc:
            raise forms.ValidationError(f"Could not read the numbers: {exc}") from None

    def clean_baseline(self) -> dict[str, list[float]]:
        return self._trials("baseline")

    def clean_post_fix(self) -> dict[str, list[float]]:
        return self._trials("post_fix")

    def clean_tolerance(self) -> float:
        value = self.cleaned_data.get("tolerance")
        return (5.0 if value is None else value) / 100

    def clean_target(self) -> str:
        return (self.cleaned_data.get("target") or "").strip()

    def clean_problem_resolved(self) -> bool | None:
        return {"yes": True, "no": False}.get(self.cleaned_data.get("problem_resolved") or "")

    def _with_files(self, trials: dict[str, list[float]], codes: list[str]) -> dict:
        out = {name: list(values) for name, values in trials.items()}
        for code in codes:
            summary = selectors.metrics_trial_summary(table=self.tables[code])
            for name, value in summary.items():
                out.setdefault(name, []).append(value)
        return out

    def trials(self) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
        """Baseline and post-fix trials: the typed numbers plus one trial per picked file."""
        data = self.cleaned_data
        return (
            self._with_files(data["baseline"], data["baseline_files"]),
            self._with_files(data["post_fix"], data["post_files"]),
        )


# ---------------------------------------------------------------- action items


class _OwnerField(forms.ModelChoiceField):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(
            queryset=get_user_model().objects.none(),
            to_field_name="username",
            required=False,
            error_messages={"invalid_choice": "The owner must be a member of the incident's team."},
            **kwargs,
        )


def _checklist_choices() -> list[tuple[str, str]]:
    return [(key, protocol.CHECKLIST_LABELS.get(key, key)) for key in protocol.CHECKLISTS]


class _ActionForm(_IncidentForm):
    def __init__(self, *args: Any, incident: Incident, **kwargs: Any) -> None:
        super().__init__(*args, incident=incident, **kwargs)
        owner = self.fields["owner"]
        assert isinstance(owner, forms.ModelChoiceField)
        owner.queryset = get_user_model().objects.filter(teams=incident.team)


class ActionItemForm(_ActionForm):
    text = _text(required=True, max_length=SHORT_TEXT_MAX)
    kind = forms.ChoiceField(choices=ActionKind.choices, required=False)
    checklist = forms.ChoiceField(choices=[("", "—"), *_checklist_choices()], required=False)
    owner = _OwnerField()
    priority = forms.ChoiceField(choices=Priority.choices, required=False)
    due_date = forms.DateField(
        required=False, error_messages={"invalid": "Due date must be a date (YYYY-MM-DD)."}
    )

    def clean_text(self) -> str:
        return _required_text(self, "text", "Say what should be done.")

    def clean_kind(self) -> str:
        return self.cleaned_data.get("kind") or ActionKind.PREVENTION

    def clean_priority(self) -> str:
        return self.cleaned_data.get("priority") or Priority.P2


class ActionSeedForm(forms.Form):
    checklist = forms.ChoiceField(
        choices=_checklist_choices, error_messages={"invalid_choice": "Unknown checklist."}
    )


class ActionUpdateForm(_ActionForm):
    """Only what the request carries is changed (blank status/priority: left as is)."""

    status = forms.ChoiceField(choices=ActionStatus.choices, required=False)
    owner = _OwnerField()
    due_date = forms.DateField(
        required=False, error_messages={"invalid": "Due date must be a date (YYYY-MM-DD)."}
    )
    priority = forms.ChoiceField(choices=Priority.choices, required=False)

    def changes(self) -> dict[str, Any]:
        """Keyword arguments for ``action_item_update`` (``False`` = leave as is)."""
        data = self.cleaned_data
        due: dt.date | bool | None = data["due_date"] if "due_date" in self.data else False
        return {
            "status": data["status"] or None,
            "owner": data["owner"] if "owner" in self.data else False,
            "due_date": due,
            "priority": data["priority"] or None,
        }
