#!/usr/bin/env python
"""Django's command-line utility for administrative tasks."""

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "apps.settings")
    from apps.lib.env import SettingError

    try:
        from django.core.management import execute_from_command_line

        execute_from_command_line(sys.argv)
    except SettingError as exc:
        sys.stderr.write(f"rankscope: {exc}\n")
        sys.exit(2)


if __name__ == "__main__":
    main()
