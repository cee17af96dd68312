"""Fill a bucket of the testbed's S3 server with model directories, through the S3 API.

Run by the KServe environment's Python (boto3 comes with ``kserve-storage``)::

    python s3_seed.py ENDPOINT BUCKET LOCAL_DIR=PREFIX [LOCAL_DIR=PREFIX ...]

with ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY`` in the environment. The bucket is created
if it does not exist; every file under ``LOCAL_DIR`` becomes ``PREFIX/<relative path>``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import boto3
from botocore.client import Config


def main(endpoint: str, bucket: str, pairs: list[str]) -> None:
    """Create ``bucket`` and upload each directory under its prefix."""
    s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                      config=Config(s3={"addressing_style": "path"}))
    existing = {b["Name"] for b in s3.list_buckets().get("Buckets", [])}
    if bucket not in existing:
        s3.create_bucket(Bucket=bucket)
    for pair in pairs:
        local, _, prefix = pair.partition("=")
        root = Path(local)
        for path in sorted(p for p in root.rglob("*") if p.is_file()):
            key = f"{prefix.strip('/')}/{path.relative_to(root)}"
            s3.upload_file(str(path), bucket, key)
            print(f"s3://{bucket}/{key}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3:])
