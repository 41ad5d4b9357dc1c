"""Signs and sends S3 requests with botocore, for sigv4's Go tests.

usage: botocore_client.py ENDPOINT ACCESS_KEY SECRET_KEY KEY...
Puts, gets and presigns each KEY in bucket "bucket" with botocore's default
settings (path-style addressing so no DNS is needed), prints one line per
request, and exits non-zero on the first failure.
"""
import ssl
import sys
import urllib.request

import botocore.session
from botocore.config import Config


def main():
    endpoint, ak, sk, keys = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    session = botocore.session.get_session()
    client = session.create_client(
        "s3", endpoint_url=endpoint, region_name="us-east-1",
        aws_access_key_id=ak, aws_secret_access_key=sk, verify=False,
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}))
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    for key in keys:
        body = ("botocore body of " + key).encode()
        client.put_object(Bucket="bucket", Key=key, Body=body, Metadata={"note": "  a   b "})
        print("put", key)
        client.get_object(Bucket="bucket", Key=key, Range="bytes=0-3")
        print("get", key)
        url = client.generate_presigned_url(
            "get_object", Params={"Bucket": "bucket", "Key": key}, ExpiresIn=300)
        with urllib.request.urlopen(url, context=ctx) as resp:
            assert resp.status == 200, resp.status
        print("presigned get", key)
        url = client.generate_presigned_url(
            "put_object", Params={"Bucket": "bucket", "Key": key}, ExpiresIn=300)
        # An explicit empty Content-Type: urllib would add its own, which a
        # Signature Version 2 URL (botocore's default for presigning) signs.
        req = urllib.request.Request(url, data=b"presigned", method="PUT",
                                     headers={"Content-Type": ""})
        with urllib.request.urlopen(req, context=ctx) as resp:
            assert resp.status == 200, resp.status
        print("presigned put", key)
    client.list_objects_v2(Bucket="bucket", Prefix="a b+c/ключ", StartAfter="~x=y&z")
    print("list")


if __name__ == "__main__":
    main()
