"""KServe's storage initializer: download each ``SOURCE_URI DEST_DIR`` pair of the arguments.

What the ``kserve/storage-initializer`` image's entrypoint does, run by the KServe
environment's Python with the init container's arguments and environment: the download is
``kserve_storage.Storage.download`` (credentials from ``STORAGE_CONFIG``, the ``AWS_*``
variables, ... exactly as KServe's code reads them). A failure exits non-zero with the error
as the last line of the output (the pod's termination message).
"""

from __future__ import annotations

import sys

from kserve_storage import Storage


def main(argv: list[str]) -> int:
    """Download every pair; return the process's exit status."""
    if len(argv) < 2 or len(argv) % 2:
        print("usage: storage_initializer.py SOURCE_URI DEST_DIR [SOURCE_URI DEST_DIR ...]",
              file=sys.stderr)
        return 2
    for source, dest in zip(argv[::2], argv[1::2], strict=True):
        try:
            Storage.download(source, dest)
        except Exception as exc:  # any failure is the container's failure, reported as such
            print(f"{type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
