"""``python -m rankscope triage PATH…``: the same as the ``rankscope`` command."""

from .cli import command

command()
