"""A local ``bedrock-runtime`` endpoint for the real boto3 client: REST JSON for ``converse`` and
``invoke_model``, the AWS event-stream binary framing for the two streaming operations.

No recording of Bedrock traffic is available here: bodies follow the documented format (the
shapes of botocore's own ``bedrock-runtime`` service model), frames the format botocore's
``eventstream`` parser reads (prelude with lengths and CRC32, typed headers, payload, message
CRC32), said so in each test.
"""

from __future__ import annotations

import base64
import json
import struct
from binascii import crc32
from typing import Any

from ..local_server import Answer, LocalServer


def _header(name: str, value: str) -> bytes:
    raw_name, raw_value = name.encode(), value.encode()
    return struct.pack("B", len(raw_name)) + raw_name + b"\x07" + struct.pack(">H", len(raw_value)) + raw_value


def frame(event_type: str, payload: dict[str, Any]) -> bytes:
    """One event-stream message: ``:event-type`` and a JSON payload."""
    headers = _header(":event-type", event_type) + _header(":content-type", "application/json") \
        + _header(":message-type", "event")  # fmt: skip
    body = json.dumps(payload).encode()
    total = 12 + len(headers) + len(body) + 4
    prelude = struct.pack(">II", total, len(headers))
    prelude += struct.pack(">I", crc32(prelude) & 0xFFFFFFFF)
    message = prelude + headers + body
    return message + struct.pack(">I", crc32(message) & 0xFFFFFFFF)


def chunk(payload: dict[str, Any]) -> bytes:
    """An InvokeModelWithResponseStream ``chunk`` carrying one model event."""
    return frame("chunk", {"bytes": base64.b64encode(json.dumps(payload).encode()).decode()})


class Reply:
    """A queued answer: JSON (with extra headers), event-stream frames, or an error."""

    def __init__(self, body: Any, headers: dict[str, str] | None = None, status: int = 200,
                 frames: list[bytes] | None = None) -> None:  # fmt: skip
        self.body, self.headers, self.status, self.frames = body, headers or {}, status, frames


class BedrockServer(LocalServer):
    def __init__(self) -> None:
        self.queue: list[Reply] = []
        super().__init__(self._answer)

    def _answer(self, path: str, body: Any) -> Answer:
        reply = self.queue.pop(0) if self.queue else Reply({"message": "nothing queued"}, status=500)
        if reply.frames is not None:
            payload, kind = b"".join(reply.frames), "application/vnd.amazon.eventstream"
        else:
            payload, kind = json.dumps(reply.body).encode(), "application/json"
        return reply.status, kind, payload, {"x-amzn-requestid": f"req-{len(self.requests)}", **reply.headers}

    def client(self) -> Any:
        import boto3
        from botocore.config import Config

        return boto3.client("bedrock-runtime", region_name="us-east-1", endpoint_url=self.url,
                            aws_access_key_id="test", aws_secret_access_key="test",
                            config=Config(retries={"total_max_attempts": 1, "mode": "standard"}))  # fmt: skip
