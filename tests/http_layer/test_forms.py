"""The text fields of a multipart form, read from bytes a program built: by the form's own
boundary, files never read as fields, untrusted values bounded (a 10 kB value, NUL bytes,
invalid UTF-8, a form cut short, thousands of parts)."""

from __future__ import annotations

import requests

from otel_tokens.capture.http.forms import aiohttp_form, from_bytes, httpx_form

KIND = "multipart/form-data; boundary=b0undary"


def _form(*parts: tuple[str, bytes, str | None], close: bool = True) -> bytes:
    out = []
    for name, value, filename in parts:
        disposition = f'form-data; name="{name}"' + (f'; filename="{filename}"' if filename else "")
        out.append(b"--b0undary\r\nContent-Disposition: " + disposition.encode() + b"\r\n\r\n")
        out.append(value + b"\r\n")
    return b"".join(out) + (b"--b0undary--\r\n" if close else b"")


def test_the_text_fields_of_a_form_and_never_a_files_bytes():
    # a file whose bytes look like a form's field comes first: it is skipped whole
    sneaky = b'Content-Disposition: form-data; name="model"\r\n\r\nnot-this-one'
    body = _form(("file", sneaky, "a.wav"), ("model", b"gpt-4o-transcribe", None),
                 ("stream", b"true", None))  # fmt: skip
    assert from_bytes(KIND, body) == {"model": "gpt-4o-transcribe", "stream": "true"}
    assert (
        from_bytes('multipart/form-data; boundary="b0undary"', body)["model"] == "gpt-4o-transcribe"
    )


def test_untrusted_forms_are_bounded_and_never_raise():
    long_value = _form(("model", b"m" * 10_000, None), ("prompt", b"x", None))
    assert from_bytes(KIND, long_value) == {"prompt": "x"}  # 10 kB: not a model's name
    odd = from_bytes(KIND, _form(("model", b"gpt\x00\xff\xfe", None)))
    assert odd == {"model": "gpt\x00\ufffd\ufffd"}
    cut = _form(("model", b"gpt-image-1", None), ("prompt", b"a fox", None), close=False)
    assert from_bytes(KIND, cut[:-4]) == {"model": "gpt-image-1"}  # the unended part: unread
    assert from_bytes(KIND, b"--b0undary\r\nContent-Disposition: form-data") == {}
    many = _form(*[(f"f{i}", b"v", None) for i in range(5000)])
    assert len(from_bytes(KIND, many)) == 32
    assert from_bytes("application/json", b"{}") is None
    assert from_bytes("multipart/form-data", b"--x") is None  # no boundary
    assert from_bytes(KIND, iter([b"streamed"])) is None


def test_each_clients_form_object():
    import aiohttp
    import httpx

    request = httpx.Request("POST", "http://h/v1/images/edits", data={"model": "gpt-image-1"},
                            files={"image": ("a.png", b"\x89PNG", "image/png")})  # fmt: skip
    assert httpx_form(request) == {"model": "gpt-image-1"}
    prepared = requests.Request("POST", "http://h/v1/images/edits", data={"model": "gpt-image-1"},
                                files={"image": ("a.png", b"\x89PNG")}).prepare()  # fmt: skip
    assert from_bytes(prepared.headers["content-type"], prepared.body) == {"model": "gpt-image-1"}
    form = aiohttp.FormData({"model": "dall-e-2"})
    form.add_field("image", b"\x89PNG", filename="a.png")
    assert aiohttp_form(form, None) == {"model": "dall-e-2"}
    assert aiohttp_form({"model": "whisper-1", "file": object()}, None) == {"model": "whisper-1"}
    assert aiohttp_form(object(), None) is None
