"""The upload form: many files in one field (multi-select or drag and drop)."""

from __future__ import annotations

from django import forms


class MultipleFileInput(forms.ClearableFileInput):
    allow_multiple_selected = True


class MultipleFileField(forms.FileField):
    widget = MultipleFileInput

    def clean(self, data, initial=None):
        single = super().clean
        if isinstance(data, list | tuple):
            return [single(d, initial) for d in data]
        return [single(data, initial)] if data else []


class UploadForm(forms.Form):
    files = MultipleFileField(
        label="Logs, metrics and dumps",
        help_text="Plain files, .gz, .tar, .tar.gz/.tgz or .zip; many at once.",
        required=True,
        error_messages={"required": "Choose at least one file to upload."},
    )
