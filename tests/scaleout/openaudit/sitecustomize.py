"""Loaded by every Rankscope process a shares-nothing test starts (on its PYTHONPATH).

Records each file the process (and the children it forks) opens under
``RANKSCOPE_TEST_OPEN_WATCH`` into ``RANKSCOPE_TEST_OPEN_LOG``, through a Python audit
hook: the test then checks that no "host" opened a path of another host's disk.
"""

import os
import sys

_watch = os.environ.get("RANKSCOPE_TEST_OPEN_WATCH")
_log_path = os.environ.get("RANKSCOPE_TEST_OPEN_LOG")

if _watch and _log_path:
    _fd = os.open(_log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    _root = os.path.realpath(_watch) + os.sep

    def _hook(event, args):
        if event != "open" or not args:
            return
        path = args[0]
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        if not isinstance(path, str):
            return
        full = os.path.realpath(path) if os.path.isabs(path) else os.path.abspath(path)
        if full.startswith(_root):
            mode = args[1] if len(args) > 1 and isinstance(args[1], str) else ""
            os.write(_fd, f"{os.getpid()}\t{mode}\t{full}\n".encode())

    sys.addaudithook(_hook)
