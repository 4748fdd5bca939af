"""An upload handler that refuses an oversized file while it arrives, before it is stored."""

from __future__ import annotations

from django.core.files.uploadhandler import FileUploadHandler, SkipFile


class SizeLimitUploadHandler(FileUploadHandler):
    """First in the chain: counts each file's bytes; over ``limit``, the file is skipped.

    The next handlers (memory / temporary file) never see the rest of that file, and
    it is absent from ``request.FILES``; its name is kept in ``oversized`` so the view
    can say so (413 when nothing else came).
    """

    def __init__(self, request, limit: int) -> None:
        super().__init__(request)
        self.limit = limit
        self.oversized: list[str] = []
        self._count = 0

    def new_file(self, *args, **kwargs) -> None:
        super().new_file(*args, **kwargs)
        self._count = 0

    def receive_data_chunk(self, raw_data: bytes, start: int) -> bytes:
        self._count += len(raw_data)
        if self._count > self.limit:
            self.oversized.append(self.file_name or "unnamed")
            raise SkipFile()
        return raw_data

    def file_complete(self, file_size: int) -> None:
        return None
