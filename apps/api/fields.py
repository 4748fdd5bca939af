"""Serializer fields whose OpenAPI description says exactly what their validation accepts.

DRF trims text before it checks its length and refuses a blank value; its decimal field
takes a minimum the schema's pattern does not show; a file field is described as a URI.
Clients generated from the schema (and schema-driven tests) would then send requests the
server refuses, or believe refused ones valid. These fields close those gaps.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiSerializerFieldExtension
from drf_spectacular.plumbing import build_basic_type
from drf_spectacular.types import OpenApiTypes
from rest_framework import serializers


class Text(serializers.CharField):
    """Text whose length limit applies to what was sent, before surrounding spaces are
    trimmed, and which, unless blank is allowed, must hold a non-space character."""

    def to_internal_value(self, data: Any) -> str:
        if isinstance(data, str) and self.max_length is not None and len(data) > self.max_length:
            self.fail("max_length", max_length=self.max_length)
        return super().to_internal_value(data)


class Money(serializers.DecimalField):
    """A non-negative amount with at most two decimals, sent as a string or a number."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("max_digits", 10)
        kwargs.setdefault("decimal_places", 2)
        kwargs.setdefault("min_value", 0)
        super().__init__(**kwargs)


class Upload(serializers.FileField):
    """A file part of a multipart request."""


class JsonObjectText(Text):
    """A JSON object sent as the text of a form field (``job=<record.json``)."""


class TextExtension(OpenApiSerializerFieldExtension):
    target_class = Text
    match_subclasses = True

    def map_serializer_field(self, auto_schema, direction):
        schema = auto_schema._map_serializer_field(self.target, direction, bypass_extensions=True)
        if direction == "request":
            # No NUL characters (refused by validation); unless blank is allowed, at least
            # one character that is not a space (blank after trimming is refused).
            schema["pattern"] = (
                r"^[^\x00]*$" if self.target.allow_blank else r"^[^\x00]*\S[^\x00]*$"
            )
        return schema


class MoneyExtension(OpenApiSerializerFieldExtension):
    target_class = Money

    def map_serializer_field(self, auto_schema, direction):
        digits = self.target.max_digits - self.target.decimal_places
        return {
            "type": "string",
            "format": "decimal",
            "pattern": rf"^\d{{1,{digits}}}(\.\d{{1,{self.target.decimal_places}}})?$",
        }


class JsonObjectTextExtension(OpenApiSerializerFieldExtension):
    target_class = JsonObjectText

    def map_serializer_field(self, auto_schema, direction):
        return {"type": "object", "additionalProperties": True}


class UploadExtension(OpenApiSerializerFieldExtension):
    target_class = Upload

    def map_serializer_field(self, auto_schema, direction):
        return build_basic_type(OpenApiTypes.BINARY)
