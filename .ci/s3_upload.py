"""Uploads the golden datasets to the S3 test server with boto3, a client
independent of deltacells (so a bug shared by our writer and reader cannot
hide), and waits for the server to answer. Endpoint and credentials come from
the standard AWS environment variables.

    s3_upload.py wait BUCKET
    s3_upload.py upload BUCKET PREFIX DIR   # DIR/<dataset>/... -> PREFIX/<dataset>/...
"""

import os
import sys
import time

import boto3
from botocore.config import Config


def client():
    return boto3.client(
        "s3",
        endpoint_url=os.environ["AWS_ENDPOINT_URL"],
        config=Config(retries={"max_attempts": 2}, connect_timeout=2, read_timeout=10),
    )


def wait(bucket):
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        try:
            s3 = client()
            s3.put_object(Bucket=bucket, Key=".ready", Body=b"")
            s3.delete_object(Bucket=bucket, Key=".ready")
            return 0
        except Exception as e:  # the server is still starting
            last = e
            time.sleep(0.5)
    print(f"no S3 server: {last}", file=sys.stderr)
    return 1


def upload(bucket, prefix, root):
    s3 = client()
    count = 0
    for name in sorted(os.listdir(root)):
        dataset = os.path.join(root, name)
        if not os.path.isfile(os.path.join(dataset, "manifest.json")):
            continue
        for dirpath, _, files in os.walk(dataset):
            for f in sorted(files):
                path = os.path.join(dirpath, f)
                key = f"{prefix}/{name}/{os.path.relpath(path, dataset)}"
                with open(path, "rb") as body:
                    s3.put_object(Bucket=bucket, Key=key, Body=body.read())
                count += 1
    print(f"uploaded {count} objects under s3://{bucket}/{prefix}/", file=sys.stderr)
    return 0 if count else 1


if __name__ == "__main__":
    command, *args = sys.argv[1:]
    sys.exit({"wait": wait, "upload": upload}[command](*args))
