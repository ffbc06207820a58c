"""`windowfit demo`: runs offline, fast, and shows the showcase's claims; the simulator is sound."""

from __future__ import annotations

import pytest
from windowfit.cli import showcase as demo
from windowfit.cli.showcase import PLANTED_FACTS, simulate_session


def test_simulated_session_is_deterministic_and_well_formed() -> None:
    a = simulate_session(120, seed=3)
    b = simulate_session(120, seed=3)
    assert a.messages == b.messages and a.calls == b.calls
    assert a.messages[0]["role"] == "system"
    assert len(a.calls) == len(a.call_turns) and a.calls == sorted(a.calls)
    # every call point ends on a user message or on complete tool results
    open_calls: set[str] = set()
    for k, m in enumerate(a.messages, 1):
        if m["role"] == "tool":
            open_calls.discard(m["tool_call_id"])
        elif m.get("tool_calls"):
            open_calls = {c["id"] for c in m["tool_calls"]}
        if k in a.calls:
            assert m["role"] in ("user", "tool") and not open_calls
    text = " ".join(str(m.get("content") or "") for m in a.messages)
    assert any("\u4e00" <= ch <= "\u9fff" for ch in text)  # Chinese and English turns
    assert a.facts == [fact for _, _, _, fact in PLANTED_FACTS]
    for fact in a.facts:  # each fact is stated exactly once
        assert text.count(fact) == 1, fact


def test_plain_output_without_rich(capsys: pytest.CaptureFixture[str]) -> None:
    out = demo._Out()
    out._console = None
    out._table_cls = None
    out.heading("Title")
    out.table(["name", "value"], [["a", 1], ["longer name", 22]])
    printed = capsys.readouterr().out
    assert "== Title" in printed
    assert "longer name     22" in printed


def test_demo_runs_offline_and_fast(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import socket

    def no_network(*args, **kwargs):
        raise AssertionError("the demo must not touch the network")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    assert demo.run_demo() == 0
    printed = capsys.readouterr().out
    for section in (
        "1. Counting",
        "2. Fitting",
        "3. Truncating",
        "4. A long agent session",
        "5. A router and an agent",
    ):
        assert section in printed
    assert "planted facts in the final prompt" in printed
    assert f"{len(PLANTED_FACTS)} of {len(PLANTED_FACTS)}" in printed
    assert "prefix reused" in printed
    # the router's view shows the task it routes on; no manager fell back to plain fitting
    router_view = printed.split("The router's 300-token view")[1]
    assert "  USER: " in router_view
    section5 = printed.split("5. A router and an agent")[1]
    assert "fallback" not in section5
