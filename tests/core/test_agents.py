"""Agent binding: context manager, decorator, asyncio, threads, registry, environment."""

from __future__ import annotations

import asyncio
import contextvars
import threading

import pytest

import otel_tokens
from otel_tokens import Estimate, Usage, settings
from otel_tokens.account.agents import current_agent
from otel_tokens.faults import sink

DEFAULT_MAX_HISTORY = settings.Settings().ledger_max_history


def test_calls_outside_any_binding_go_to_default():
    entry = current_agent()
    assert entry.name == "default"
    assert [e.name for e in otel_tokens.agents()] == ["default"]


def test_context_manager_binds_and_nests():
    with otel_tokens.agent("planner", max_input_tokens=1000) as planner:
        assert current_agent() is planner
        assert planner.state.max_input_tokens == 1000
        with otel_tokens.agent("coder") as coder:
            assert current_agent() is coder
        assert current_agent() is planner
    assert current_agent().name == "default"
    assert {e.name for e in otel_tokens.agents()} == {"planner", "coder", "default"}


def test_same_name_same_entry_and_window_update():
    with otel_tokens.agent("a") as first:
        pass
    with otel_tokens.agent("a", max_input_tokens=500) as second:
        assert second is first
        assert second.state.max_input_tokens == 500


def test_decorator_sync_and_async():
    @otel_tokens.agent("sync-agent")
    def work(x):
        return current_agent().name, x

    @otel_tokens.agent("async-agent")
    async def awork(x):
        await asyncio.sleep(0)
        return current_agent().name, x

    assert work(1) == ("sync-agent", 1)
    assert asyncio.run(awork(2)) == ("async-agent", 2)
    assert work.__name__ == "work"
    assert current_agent().name == "default"


def test_decorator_restores_binding_on_exception():
    @otel_tokens.agent("boom")
    def fail():
        raise KeyError("x")

    with pytest.raises(KeyError):
        fail()
    assert current_agent().name == "default"


def test_asyncio_tasks_inherit_the_binding():
    async def child():
        await asyncio.sleep(0)
        return current_agent().name

    async def main():
        async with otel_tokens.agent("parent"):
            tasks = [asyncio.create_task(child()) for _ in range(5)]
        return await asyncio.gather(*tasks)

    assert asyncio.run(main()) == ["parent"] * 5


def test_threads_follow_only_when_the_context_is_passed():
    seen = {}

    def record(key):
        seen[key] = current_agent().name

    with otel_tokens.agent("worker"):
        plain = threading.Thread(target=record, args=("plain",))
        ctx = contextvars.copy_context()
        passed = threading.Thread(target=ctx.run, args=(record, "passed"))
        plain.start(), passed.start()
        plain.join(), passed.join()
    assert seen == {"plain": "default", "passed": "worker"}


def test_bad_arguments_never_raise_they_warn_count_and_fall_back(caplog):
    """The OpenTelemetry API's rule: a name computed from config must not take an agent down."""
    before = sink().counts.get("argument", 0)
    for bad in ("", "   ", None, 3):
        binding = otel_tokens.agent(bad)  # type: ignore[arg-type]
        assert binding.name == "default"
        with binding as entry:
            assert entry.name == "default" and current_agent() is entry
    with otel_tokens.agent("x", max_input_tokens=-5) as entry:
        assert entry.name == "x" and entry.state.max_input_tokens is None
    assert sink().counts["argument"] == before + 5


def test_ledger_settings_from_environment(monkeypatch, tmp_path, capsys):
    assert current_agent().ledger.max_history == DEFAULT_MAX_HISTORY
    db = tmp_path / "agents.sqlite3"
    monkeypatch.setenv("OTEL_TOKENS_LEDGER_PATH", str(db))
    monkeypatch.setenv("OTEL_TOKENS_LEDGER_MAX_HISTORY", "7")
    settings.reload()
    with otel_tokens.agent("persisted") as entry:
        assert entry.ledger.max_history == 7
        assert entry.ledger.path == str(db)
        entry.ledger.append(Usage(input_tokens=3))
    otel_tokens.clear_agents()
    with otel_tokens.agent("persisted") as entry:
        assert entry.ledger.cumulative.input_tokens == 3
    monkeypatch.setenv("OTEL_TOKENS_LEDGER_MAX_HISTORY", "lots")
    settings.reload()  # one line naming the variable; the default applies, nothing raises
    with otel_tokens.agent("another") as entry:
        assert entry.ledger.max_history == DEFAULT_MAX_HISTORY


def test_one_binding_object_entered_from_many_threads_and_tasks_at_once():
    """Each context keeps its own binding; nothing raises into the host (rule 6)."""
    shared = otel_tokens.agent("shared")
    errors: list[BaseException] = []
    barrier = threading.Barrier(8)

    def in_thread(i):
        try:
            barrier.wait()
            for _ in range(200):
                with shared as entry:
                    assert current_agent() is entry
                    with otel_tokens.agent(f"inner-{i}"):
                        assert current_agent().name == f"inner-{i}"
                    assert current_agent().name == "shared"
                assert current_agent().name == "default"
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=in_thread, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []

    async def task(i):
        async with shared:
            await asyncio.sleep(0.001 * (i % 3))  # interleave the tasks' enters and exits
            assert current_agent().name == "shared"
            async with otel_tokens.agent(f"task-{i}"):
                await asyncio.sleep(0)
                assert current_agent().name == f"task-{i}"
            assert current_agent().name == "shared"
        return current_agent().name

    async def main():
        return await asyncio.gather(*(task(i) for i in range(50)))

    assert asyncio.run(main()) == ["default"] * 50


def test_eight_threads_ten_thousand_completions_each_are_exact():
    threads_n, per_thread = 8, 10_000
    with otel_tokens.agent("busy", max_input_tokens=200_000) as entry:
        pass
    barrier = threading.Barrier(threads_n)

    def work(t):
        barrier.wait()
        for n in range(per_thread):
            usage = Usage(input_tokens=100 + t, output_tokens=n % 7, cache_read_tokens=t,
                          cost_usd=0.001)  # fmt: skip
            if n % 2:
                handle = entry.state.start_streaming(Estimate(90, "full"))
                key = (t, n)
                entry.ledger.stream_update(key, usage.replace(output_tokens=0))
                entry.state.complete(usage, handle)
                entry.ledger.stream_finalize(key, usage)
            else:
                entry.state.complete(usage)
                entry.ledger.append(usage)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(threads_n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    total = threads_n * per_thread
    out_per_thread = sum(n % 7 for n in range(per_thread))
    assert entry.state.turn_count == total
    assert entry.state.total_output_tokens == threads_n * out_per_thread
    assert entry.state.status == "idle" and entry.state.current_estimate is None
    assert entry.state.max_observed_input_tokens == 100 + threads_n - 1
    c = entry.ledger.cumulative
    assert c.requests == total
    assert c.input_tokens == sum((100 + t) * per_thread for t in range(threads_n))
    assert c.output_tokens == threads_n * out_per_thread
    assert c.cache_read_tokens == sum(t * per_thread for t in range(threads_n))
    assert c.cost_usd == pytest.approx(total * 0.001, abs=1e-12)
    assert entry.ledger.lifetime == c
    assert entry.ledger.in_flight == {}
    assert len(entry.ledger) == DEFAULT_MAX_HISTORY and entry.ledger.evicted == total - len(entry.ledger)


def test_a_locked_ledger_file_does_not_stop_the_host(monkeypatch, tmp_path):
    """A new agent on a file another process holds locked: the binding never raises, a row
    that cannot be written yet stays pending (a direct ``append`` says so, as documented), and
    it is written once the lock is gone: nothing lost."""
    import sqlite3

    from otel_tokens.errors import LedgerPersistenceError

    db = tmp_path / "agents.sqlite3"
    monkeypatch.setenv("OTEL_TOKENS_LEDGER_PATH", str(db))
    settings.reload()
    with otel_tokens.agent("first"):
        pass  # creates the schema
    blocker = sqlite3.connect(db, isolation_level=None, timeout=0.1)
    blocker.execute("BEGIN EXCLUSIVE")
    try:
        with otel_tokens.agent("second") as entry:  # must not raise into the host
            with pytest.raises(LedgerPersistenceError, match="locked"):
                entry.ledger.append(Usage(input_tokens=1))
        assert entry.ledger.path == str(db)
        assert entry.ledger.pending_writes == 1
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    entry.ledger.flush()
    assert entry.ledger.pending_writes == 0
    rows = sqlite3.connect(db).execute(
        "SELECT input_tokens FROM otel_tokens_requests WHERE ledger='second'").fetchall()
    assert rows == [(1,)]


@pytest.mark.parametrize("with_file", [False, True], ids=["in memory", "ledger file"])
def test_agents_past_the_active_bound_go_dormant_and_come_back_whole(monkeypatch, tmp_path, with_file):
    """Past MAX_ACTIVE_AGENTS the least recently used agents leave memory; the next call of one
    finds its TokenState and its ledger's totals as they were (history: from the file, or
    counted as evicted in memory), and an agent still bound is never split in two."""
    import gc

    from otel_tokens.account import agents as registry

    if with_file:
        monkeypatch.setenv("OTEL_TOKENS_LEDGER_PATH", str(tmp_path / "l.db"))
        settings.reload()
    monkeypatch.setattr(registry, "MAX_ACTIVE_AGENTS", 50)
    held = registry.get_agent("held")
    first = registry.get_agent("a-0")
    first.state.complete(Usage(input_tokens=120, output_tokens=30))
    first.ledger.append(Usage(input_tokens=120, output_tokens=30), cost_usd=0.25)
    del first
    for i in range(1, 200):
        registry.get_agent(f"a-{i}").ledger.append(Usage(input_tokens=1))
    gc.collect()
    assert "a-0" not in registry._live and len(registry._registry) == 50
    back = registry.get_agent("a-0")
    assert back.state.turn_count == 1 and back.state.input_tokens == 120
    assert back.ledger.cumulative.input_tokens == 120 and back.ledger.cumulative.cost_usd == 0.25
    assert back.ledger.cost_by_model() == {None: 0.25}
    assert registry.get_agent("held") is held  # held elsewhere: the same entry, never a second
    assert len(registry._dormant) <= 200
