"""A local websocket server speaking the Gemini Live API (``BidiGenerateContent``) as the
Gemini API documents it: a ``setupComplete`` for the ``setup`` message, then for each
``clientContent`` turn the model's turn (``serverContent.modelTurn`` parts, then
``generationComplete``) and ``turnComplete`` with the turn's ``usageMetadata`` (camelCase,
per-modality details; zero counts left out, as proto3 JSON does). TLS on 127.0.0.1 with a
certificate made here: the SDK speaks ``wss`` to the Gemini API's host only.

``drop_mid_turn``: the next turn's connection is cut (no close frame) after its first part.
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import socket
import ssl
import tempfile
import threading
from typing import Any

from websockets.sync.server import ServerConnection, serve

MODEL = "gemini-live-2.5-flash-preview"


def usage(text_in: int, audio_in: int, cached: int, text_out: int, audio_out: int,
          thoughts: int = 0) -> dict[str, Any]:  # fmt: skip
    """A turn's ``usageMetadata`` of these counts, as the Live API sends it."""
    prompt = text_in + audio_in
    body: dict[str, Any] = {
        "promptTokenCount": prompt, "responseTokenCount": text_out + audio_out,
        "totalTokenCount": prompt + text_out + audio_out + thoughts,
        "promptTokensDetails": [d for d in ({"modality": "TEXT", "tokenCount": text_in},
                                            {"modality": "AUDIO", "tokenCount": audio_in})
                                if d["tokenCount"]],
        "responseTokensDetails": [d for d in ({"modality": "TEXT", "tokenCount": text_out},
                                              {"modality": "AUDIO", "tokenCount": audio_out})
                                  if d["tokenCount"]],
    }  # fmt: skip
    if cached:
        body["cachedContentTokenCount"] = cached
        body["cacheTokensDetails"] = [{"modality": "TEXT", "tokenCount": cached}]
    if thoughts:
        body["thoughtsTokenCount"] = thoughts
    return body


#: a turn's usageMetadata as a public report of a raw Live API capture shows it (AUDIO out;
#: thoughts reported apart, outside the total)
CAPTURED = {"promptTokenCount": 522, "responseTokenCount": 42, "totalTokenCount": 564,
            "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 332},
                                    {"modality": "AUDIO", "tokenCount": 165}],
            "responseTokensDetails": [{"modality": "AUDIO", "tokenCount": 42}],
            "thoughtsTokenCount": 136}  # fmt: skip


def _certificate(folder: str) -> tuple[str, str]:
    """A self-signed certificate for 127.0.0.1 (cert and key files in ``folder``)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .sign(key, hashes.SHA256()))  # fmt: skip
    cert_path, key_path = f"{folder}/cert.pem", f"{folder}/key.pem"
    with open(cert_path, "wb") as fh:
        fh.write(cert.public_bytes(serialization.Encoding.PEM))
    with open(key_path, "wb") as fh:
        fh.write(key.private_bytes(serialization.Encoding.PEM,
                                   serialization.PrivateFormat.PKCS8,
                                   serialization.NoEncryption()))  # fmt: skip
    return cert_path, key_path


class LiveServer:
    """The server, on 127.0.0.1 (TLS) in a thread of its own; ``usages``: the next turns'."""

    def __init__(self) -> None:
        self.usages: list[dict[str, Any]] = []
        self.drop_mid_turn = False
        self.setups: list[dict[str, Any]] = []
        self._folder = tempfile.TemporaryDirectory()
        cert, key = _certificate(self._folder.name)
        served = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        served.load_cert_chain(cert, key)
        self.client_ssl = ssl.create_default_context(cafile=cert)
        self._server = serve(self._handle, "127.0.0.1", 0, ssl=served)
        self.port = self._server.socket.getsockname()[1]
        self.base_url = f"https://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def client(self) -> Any:
        """A real google-genai client (Gemini API) whose Live sessions come here."""
        from google import genai

        return genai.Client(
            api_key="test-key",
            http_options={"base_url": self.base_url, "async_client_args": {"ssl": self.client_ssl}},
        )

    def _handle(self, ws: ServerConnection) -> None:
        self.setups.append(json.loads(ws.recv()))
        ws.send(json.dumps({"setupComplete": {}}))
        for raw in ws:
            message = json.loads(raw)  # the SDK sends its own key spelling: both are accepted
            if ("clientContent" in message or "client_content" in message) and not self._turn(ws):
                return

    def _turn(self, ws: ServerConnection) -> bool:
        """One model turn; False when the connection was cut."""
        ws.send(json.dumps({"serverContent": {"modelTurn": {"parts": [{"text": "Bon"}]}}}))
        if self.drop_mid_turn:
            ws.socket.shutdown(socket.SHUT_RDWR)
            return False
        ws.send(json.dumps({"serverContent": {"modelTurn": {"parts": [{"text": "jour."}]}}}))
        ws.send(json.dumps({"serverContent": {"generationComplete": True}}))
        used = self.usages.pop(0) if self.usages else CAPTURED
        ws.send(json.dumps({"serverContent": {"turnComplete": True}, "usageMetadata": used}))
        return True

    def close(self) -> None:
        self._server.shutdown()
        self._thread.join(timeout=10)
        self._folder.cleanup()
