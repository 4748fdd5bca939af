from django import forms

from apps.accounts.models import ApiToken


class ApiTokenForm(forms.Form):
    name = forms.CharField(
        max_length=120, help_text="What will use it, e.g. 'eos epilog' or 'CI uploader'"
    )
    scope = forms.ChoiceField(
        choices=ApiToken.Scope.choices,
        initial=ApiToken.Scope.INGEST,
        help_text="Ingest only for epilogs and uploaders; read for dashboards; write for tools",
    )
