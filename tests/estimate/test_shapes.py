"""Every shape a request arrives in: dicts and SDK objects, images, Responses items,
Anthropic system prompts and tool definitions."""

from __future__ import annotations

import base64
import struct

import pytest

from otel_tokens.account.estimate import Estimator, Request
from otel_tokens.account.estimate.images import (
    ANTHROPIC_UNKNOWN_IMAGE,
    OPENAI_UNKNOWN_IMAGE,
    anthropic_image_tokens,
    image_size,
    openai_image_tokens,
    size_from_base64,
)
from otel_tokens.account.estimate.requests import render_message, render_request

from .corpus import _png


def heuristic(request: Request) -> int:
    return Estimator(use_tokenizer=False).estimate(request, provider="x").estimate.input_tokens


def test_dict_and_sdk_tool_calls_render_the_same():
    from openai.types.chat import ChatCompletionMessage

    raw = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function",
         "function": {"name": "get_weather", "arguments": '{"city": "Paris", "unit": "c"}'}}]}  # fmt: skip
    sdk = ChatCompletionMessage.model_validate(raw)
    assert render_message("openai_chat", raw) == render_message("openai_chat", sdk)
    rendered = render_message("openai_chat", raw)
    assert "get_weather" in rendered.texts and '{"city": "Paris", "unit": "c"}' in rendered.texts


def test_anthropic_sdk_blocks_render_like_dicts():
    from anthropic.types import TextBlock, ToolUseBlock

    raw = {"role": "assistant", "content": [
        {"type": "text", "text": "Checking."},
        {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "a.py"}}]}  # fmt: skip
    sdk = {"role": "assistant", "content": [
        TextBlock(type="text", text="Checking."),
        ToolUseBlock(type="tool_use", id="toolu_1", name="read_file", input={"path": "a.py"})]}  # fmt: skip
    assert render_message("anthropic_messages", raw) == render_message("anthropic_messages", sdk)


def test_tool_call_envelopes_are_counted():
    """Seed 003: arguments alone are not the cost of a tool call."""
    call = {"id": "c", "type": "function", "function": {"name": "search", "arguments": "{}"}}
    without = Request("openai_chat", "gpt-4o", [{"role": "assistant", "content": None}])
    with_calls = Request("openai_chat", "gpt-4o", [
        {"role": "assistant", "content": None, "tool_calls": [call, call, call, call]}])
    assert heuristic(with_calls) - heuristic(without) >= 4 * 12  # name, args and framing each


def test_tool_results_and_definitions_count():
    base = [{"role": "user", "content": "hi"}]
    result = {"role": "tool", "tool_call_id": "c1",
              "content": "Disk usage is at 91 percent on /var and rising; " * 10}  # ~120 tokens
    assert heuristic(Request("openai_chat", "gpt-4o", base + [result])) > heuristic(
        Request("openai_chat", "gpt-4o", base)) + 100  # fmt: skip
    tool = {"type": "function", "function": {"name": "lookup", "description": "Look a word up.",
            "parameters": {"type": "object", "properties": {"word": {"type": "string"}}}}}  # fmt: skip
    assert heuristic(Request("openai_chat", "gpt-4o", base, tools=[tool])) > heuristic(
        Request("openai_chat", "gpt-4o", base)) + 10  # fmt: skip


def _gif(w: int, h: int) -> bytes:
    return b"GIF89a" + struct.pack("<HH", w, h) + b"\x00" * 20


def _jpeg(w: int, h: int) -> bytes:
    app0 = b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\x00" + b"\x00" * 9
    sof = b"\xff\xc0" + struct.pack(">HBHHB", 17, 8, h, w, 3) + b"\x00" * 9
    return b"\xff\xd8" + app0 + sof + b"\xff\xd9"


def _webp(w: int, h: int) -> bytes:
    body = b"VP8X" + struct.pack("<I", 10) + b"\x00" * 4 + (w - 1).to_bytes(3, "little") + (
        h - 1).to_bytes(3, "little")  # fmt: skip
    return b"RIFF" + struct.pack("<I", 4 + len(body)) + b"WEBP" + body


@pytest.mark.parametrize("data, size", [
    (_png(1200, 800), (1200, 800)), (_gif(320, 200), (320, 200)),
    (_jpeg(4032, 3024), (4032, 3024)), (_webp(640, 480), (640, 480)),
    (b"not an image at all", None),
])  # fmt: skip
def test_image_headers(data, size):
    assert image_size(data) == size
    assert size_from_base64("data:image/x;base64," + base64.b64encode(data).decode()) == size


def test_image_formulas():
    # 1200x800 high detail: short side to 768 -> 1152x768 -> 3x2 tiles
    assert openai_image_tokens((1200, 800), "high", "gpt-4o") == 85 + 170 * 6
    assert openai_image_tokens((4032, 3024), "auto", "gpt-4o") == 85 + 170 * 4
    assert openai_image_tokens((4032, 3024), "low", "gpt-4o") == 85
    assert openai_image_tokens((512, 512), "high", "gpt-4o-mini") == 2833 + 5667
    assert openai_image_tokens(None, "high", "gpt-4o") == OPENAI_UNKNOWN_IMAGE
    assert anthropic_image_tokens((1000, 750)) == 1000
    assert anthropic_image_tokens((3136, 1568)) == round(1568 * 784 / 750)
    assert anthropic_image_tokens(None) == ANTHROPIC_UNKNOWN_IMAGE


def test_images_in_requests_with_and_without_readable_headers():
    png = "data:image/png;base64," + base64.b64encode(_png(1200, 800)).decode()
    def chat(url):  # noqa: E306
        return Request("openai_chat", "gpt-4o", [{"role": "user", "content": [
            {"type": "text", "text": "what is this"},
            {"type": "image_url", "image_url": {"url": url, "detail": "high"}}]}])  # fmt: skip
    text_only = heuristic(Request("openai_chat", "gpt-4o", [{"role": "user", "content": [
        {"type": "text", "text": "what is this"}]}]))  # fmt: skip
    assert heuristic(chat(png)) - text_only == 85 + 170 * 6
    assert heuristic(chat("https://example.com/cat.png")) - text_only == OPENAI_UNKNOWN_IMAGE
    blocks = lambda data: Request("anthropic_messages", "claude-sonnet-4-5", [{"role": "user", "content": [  # noqa: E731
        {"type": "image", "source": data}]}])  # fmt: skip
    b64 = {"type": "base64", "media_type": "image/gif", "data": base64.b64encode(_gif(1000, 750)).decode()}
    url = {"type": "url", "url": "https://example.com/cat.png"}
    assert heuristic(blocks(b64)) - heuristic(blocks(url)) == 1000 - ANTHROPIC_UNKNOWN_IMAGE


def test_responses_input_items():
    items = [
        {"role": "user", "content": [{"type": "input_text", "text": "Summarise the log."}]},
        {"type": "function_call", "call_id": "c1", "name": "read_log", "arguments": '{"n": 50}'},
        {"type": "function_call_output", "call_id": "c1", "output": "line " * 100},
        {"type": "reasoning", "summary": [{"type": "summary_text", "text": "The log is long."}]},
    ]
    _, rendered = render_request(Request("openai_responses", "gpt-4.1", items))
    # reasoning carried back is not billed as input again (a recorded Responses call with a
    # typed reasoning item: 20 tokens billed, 104 if its summary were counted)
    assert [len(r.texts) > 0 for r in rendered] == [True, True, True, False]
    assert rendered[3].fixed == 0
    assert "read_log" in rendered[1].texts
    assert heuristic(Request("openai_responses", "gpt-4.1", items)) > 100
    assert heuristic(Request("openai_responses", "gpt-4.1", "just a string")) > 0
    with_instructions = Request("openai_responses", "gpt-4.1", "hi", system="Be terse. " * 20)
    assert heuristic(with_instructions) > heuristic(Request("openai_responses", "gpt-4.1", "hi")) + 30


def test_anthropic_system_prompts_and_tool_definitions():
    msgs = [{"role": "user", "content": "hello"}]
    plain = heuristic(Request("anthropic_messages", "claude-sonnet-4-5", msgs))
    system_str = heuristic(Request("anthropic_messages", "claude-sonnet-4-5", msgs, system="Be brief. " * 30))
    system_blocks = heuristic(Request("anthropic_messages", "claude-sonnet-4-5", msgs,
                                      system=[{"type": "text", "text": "Be brief. " * 30}]))  # fmt: skip
    assert system_str == system_blocks > plain + 50
    tool = {"name": "read_file", "description": "Read a file.",
            "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}}  # fmt: skip
    with_tools = heuristic(Request("anthropic_messages", "claude-sonnet-4-5", msgs, tools=[tool]))
    assert with_tools > plain + 346  # Anthropic's tool-use system prompt plus the definition


def _wav(seconds: float, rate: int = 16_000) -> str:
    import base64
    import struct

    frames = b"\x00\x00" * int(rate * seconds)
    header = b"RIFF" + struct.pack("<I", 36 + len(frames)) + b"WAVEfmt " + struct.pack(
        "<IHHIIHH", 16, 1, 1, rate, rate * 2, 2, 16) + b"data" + struct.pack("<I", len(frames))  # fmt: skip
    return base64.b64encode(header + frames).decode()


def test_audio_is_counted_by_its_duration_never_as_text():
    def request(seconds: float) -> Request:
        return Request("openai_chat", "gpt-4o-audio-preview", [{"role": "user", "content": [
            {"type": "input_audio", "input_audio": {"data": _wav(seconds), "format": "wav"}}]}])  # fmt: skip

    _, (short,) = render_request(request(2.0))
    _, (long,) = render_request(request(30.0))
    assert short.texts == ["user"] and long.texts == ["user"]  # the base64 is not text
    assert long.fixed - short.fixed == 280  # 10 tokens a second
    assert short.complete


def _pdf(pages: int) -> str:
    import base64

    body = b"%PDF-1.4\n" + b"".join(b"%d 0 obj << /Type /Page /Parent 1 0 R >> endobj\n" % (i + 2) for i in range(pages))
    return base64.b64encode(body + b"1 0 obj << /Type /Pages /Count %d >> endobj\n%%%%EOF" % pages).decode()


def test_anthropic_documents_count_by_page_and_unknown_media_is_marked():
    from otel_tokens.account.estimate.media import ANTHROPIC_PER_PDF_PAGE

    def document(source: dict) -> Request:
        return Request("anthropic_messages", "claude-sonnet-4-5", [{"role": "user", "content": [
            {"type": "document", "source": source}, {"type": "text", "text": "Summarise."}]}])  # fmt: skip

    _, (three,) = render_request(document({"type": "base64", "media_type": "application/pdf", "data": _pdf(3)}))
    _, (by_url,) = render_request(document({"type": "url", "url": "https://example.com/x.pdf"}))
    assert three.fixed - by_url.fixed == 2 * ANTHROPIC_PER_PDF_PAGE
    assert three.complete and not by_url.complete
    _, (image,) = render_request(Request("anthropic_messages", "claude-sonnet-4-5", [{"role": "user", "content": [
        {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}}]}]))  # fmt: skip
    assert not image.complete


def test_responses_hosted_tools_and_chains():
    from otel_tokens.account.estimate import Estimator

    plain = Request("openai_responses", "gpt-4.1", "news?")
    searching = Request("openai_responses", "gpt-4.1", "news?", tools=[{"type": "web_search_preview"}])
    estimator = Estimator(use_tokenizer=False)
    assert estimator.estimate(searching, provider="openai").estimate.input_tokens \
        - estimator.estimate(plain, provider="openai").estimate.input_tokens == 267  # fmt: skip
    filing = estimator.estimate(Request("openai_responses", "gpt-4.1", "q", tools=[{"type": "file_search"}]),
                                provider="openai")  # fmt: skip
    assert not filing.complete  # retrieved chunks are billed as input: unknown before the call
    follow = Request("openai_responses", "gpt-4.1", [{"type": "function_call_output", "call_id": "c",
                                                      "output": "sunny"}], chained="resp_1")  # fmt: skip
    unknown = estimator.estimate(follow, provider="openai")
    assert not unknown.complete
    estimator.remember("resp_1", 900)
    known = estimator.estimate(follow, provider="openai")
    assert known.complete and known.estimate.input_tokens - unknown.estimate.input_tokens >= 850


def test_pdf_pages_come_from_the_ends_of_the_file_only():
    import base64

    from otel_tokens.account.estimate.media import pdf_pages

    middle = b"x" * 300_000  # never decoded
    tail_count = b"%PDF-1.7\n" + middle + b"\n5 0 obj << /Count 12 /Kids [] /Type /Pages >> endobj\n%%EOF"
    linearized = b"%PDF-1.5\n1 0 obj << /Linearized 1 /L 5000 /N 7 /T 4000 >> endobj" + middle
    hidden = b"%PDF-1.4\n" + middle + b"<< /Type /Pages /Count 3 >>" + middle  # only in the middle
    assert [pdf_pages(base64.b64encode(p).decode()) for p in (tail_count, linearized, hidden)] == [12, 7, None]
    assert pdf_pages(base64.b64encode(b"not a pdf").decode()) is None
