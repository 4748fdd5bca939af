"""The upload form: many files in one field (multi-select or drag and drop)."""

from __future__ import annotations

from django import forms


class MultipleFileInput(forms.ClearableFileInput):
    allow_multiple_selected = True


class MultipleFileField(forms.FileField):
    widget = MultipleFileInput

    def __init__(self, *args, **kwargs) -> None:
        # A 0-byte file reaches the upload service, which refuses it by name and says why
        # ("empty file"); the form would only say "choose at least one file".
        kwargs.setdefault("allow_empty_file", True)
        super().__init__(*args, **kwargs)

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
