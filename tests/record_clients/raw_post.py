"""POSTs one body straight to the upstream and through the proxy; writes both answers' bytes."""

import os
from pathlib import Path

import httpx

body = Path(os.environ["TEST_BODY"]).read_bytes()
headers = {"content-type": "application/json", "authorization": "Bearer sk-test-raw-0123456789"}
for name, base in (
    ("direct", os.environ["TEST_UPSTREAM"]),
    ("proxied", os.environ[os.environ["TEST_PROXY_VAR"]]),
):
    url = base + os.environ["TEST_PATH"]
    with httpx.stream("POST", url, content=body, headers=headers, timeout=60) as answer:
        Path(os.environ["TEST_OUT"] + name).write_bytes(b"".join(answer.iter_raw()))
