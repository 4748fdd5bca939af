from __future__ import annotations

from typing import Any

from django import forms

from apps.incidents.models import PHASE_ORDER, Phase
from apps.postmortems.cost import INPUT_LABELS, CostInputs
from apps.postmortems.models import EDITABLE_FIELDS, SECTIONS, PostMortem, Status


class PostMortemForm(forms.ModelForm):
    expected_revision = forms.IntegerField(widget=forms.HiddenInput)

    class Meta:
        model = PostMortem
        fields = [name for name, _ in EDITABLE_FIELDS]
        labels = dict(EDITABLE_FIELDS)
        widgets = {
            name: forms.Textarea(attrs={"rows": 4})
            for name, _ in EDITABLE_FIELDS
            if name != "title"
        }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        pm = self.instance
        self.fields["expected_revision"].initial = pm.revision
        for phase in PHASE_ORDER:
            self.fields[f"key_action_{phase}"] = forms.CharField(
                required=False,
                max_length=500,
                label=f"Key action — {Phase(phase).label}",
                initial=(pm.phase_key_actions or {}).get(phase, ""),
            )

    def phase_key_actions(self) -> dict[str, str]:
        return {p: self.cleaned_data.get(f"key_action_{p}", "") for p in PHASE_ORDER}

    def narrative(self) -> dict[str, str]:
        return {name: self.cleaned_data.get(name) or "" for name, _ in EDITABLE_FIELDS}


class CostForm(forms.Form):
    """Every input of the cost model; blank means unknown (the term is left out)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for name, label, unit in INPUT_LABELS:
            if name in {"gpu_count", "steps_since_checkpoint"}:
                field: forms.Field = forms.IntegerField(min_value=0, required=False)
            elif name == "waste_fraction":
                field = forms.FloatField(min_value=0, max_value=1, required=False)
            else:
                field = forms.FloatField(min_value=0, required=False)
            field.label = f"{label} ({unit})" if unit and unit != "$" else label
            field.widget.attrs.update({"step": "any", "inputmode": "decimal"})
            self.fields[name] = field

    def clean_baseline_throughput(self) -> float | None:
        value = self.cleaned_data.get("baseline_throughput")
        if value == 0:
            raise forms.ValidationError("The baseline throughput must be above zero.")
        return value

    def inputs(self) -> CostInputs:
        return CostInputs.from_json(self.cleaned_data)


class CommentForm(forms.Form):
    section = forms.ChoiceField(choices=SECTIONS, initial="general")
    body = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), max_length=20_000)


class StatusChangeForm(forms.Form):
    """A review step (submit, send back, approve, publish) with an optional note."""

    status = forms.ChoiceField(
        choices=Status.choices, error_messages={"invalid_choice": "Unknown status “%(value)s”."}
    )
    note = forms.CharField(required=False, max_length=2000, strip=False)


class PostMortemFilterForm(forms.Form):
    q = forms.CharField(required=False, label="Search")
    status = forms.ChoiceField(required=False, choices=[("", "Any status"), *Status.choices])
    category = forms.ChoiceField(required=False, choices=[("", "Any category")])
    cluster = forms.ChoiceField(required=False, choices=[("", "Any cluster")])
    date_from = forms.DateField(
        required=False, label="From", widget=forms.DateInput(attrs={"type": "date"})
    )
    date_to = forms.DateField(
        required=False, label="To", widget=forms.DateInput(attrs={"type": "date"})
    )
    cost_min = forms.DecimalField(required=False, min_value=0, label="Cost at least ($)")
    cost_max = forms.DecimalField(required=False, min_value=0, label="Cost at most ($)")

    def __init__(
        self,
        *args: Any,
        categories: list[str] | None = None,
        clusters: list[str] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.fields["category"].choices = [("", "Any category")] + [
            (c, c) for c in categories or []
        ]
        self.fields["cluster"].choices = [("", "Any cluster")] + [(c, c) for c in clusters or []]
