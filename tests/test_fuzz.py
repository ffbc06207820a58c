"""Fuzzing every public entry point with arbitrary JSON-like values (bounded, part of ``make test``).

Whatever goes in, an entry point either works or raises a documented error: a
``wf.WindowfitError``, or one of the builtin bases the library documents (``TypeError``,
``ValueError``, ``KeyError``). Never another exception (``RecursionError``, ``OverflowError``,
``AttributeError``, an ``InternalError`` from a caught panic...), never a hang, and never a
lost message: what a store accepted reads back equal, and a fit accounts for every index.

The examples are small and few (each test well under ten seconds on a loaded machine); run
with ``--hypothesis-seed=N`` or more ``max_examples`` to dig further.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
from pathlib import Path
from typing import Any

import pytest
import windowfit as wf
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from windowfit.context import ENV_VARS, ContextManager
from windowfit.errors import InternalError
from windowfit.store import MemoryStore
from windowfit.truncation import ObservationTruncator

FUZZ = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

#: what an entry point may raise on bad input (all library errors derive from WindowfitError)
DOCUMENTED = (wf.WindowfitError, TypeError, ValueError, KeyError)

COUNTER = wf.Counter(model="gpt-4o")

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=30)  # includes lone surrogates
)
json_like = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
ROLES = ["system", "developer", "user", "assistant", "tool", "function", "human", "wizard", ""]
ids = st.sampled_from(["c1", "c2", "c3"]) | st.text(max_size=4) | scalars
parts = st.fixed_dictionaries(
    {"type": st.sampled_from(["text", "image_url", "tool_use", "tool_result", "input_audio", "x"])},
    optional={
        "text": st.text(max_size=20) | scalars,
        "image_url": st.fixed_dictionaries(
            {}, optional={"url": st.text(max_size=10), "width": scalars, "height": scalars}
        )
        | scalars,
        "id": ids,
        "tool_use_id": ids,
        "input": json_like,
        "content": st.text(max_size=20) | json_like,
    },
)
calls = st.fixed_dictionaries(
    {"id": ids, "type": st.just("function")},
    optional={
        "function": st.fixed_dictionaries(
            {"name": st.text(max_size=8) | scalars, "arguments": st.text(max_size=20) | json_like}
        )
        | scalars
    },
)
# near-valid messages (so the deep paths run) mixed with anything at all
messages = (
    st.fixed_dictionaries(
        {"role": st.sampled_from(ROLES) | scalars},
        optional={
            "content": st.text(max_size=40) | st.lists(parts | scalars, max_size=3) | scalars,
            "tool_calls": st.lists(calls, max_size=2) | scalars,
            "tool_call_id": ids,
            "name": st.text(max_size=6) | scalars,
        },
    )
    | json_like
)
histories = st.lists(messages, max_size=8)
counts = scalars | st.integers(min_value=0, max_value=400)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ENV_VARS.values():
        monkeypatch.delenv(var, raising=False)


def documented(fn: Any, *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)``, or None when it raised a documented error (anything else fails)."""
    try:
        return fn(*args, **kwargs)
    except InternalError:  # a caught panic is a bug, whatever its bases
        raise
    except DOCUMENTED:
        return None


@FUZZ
@given(text=st.text(max_size=200) | scalars, message=messages, history=histories)
def test_counting(text: Any, message: Any, history: Any) -> None:
    n = documented(COUNTER.count, text)
    if n is not None:
        assert isinstance(text, str) and n >= 0
    one = documented(COUNTER.count_message, message)
    many = documented(COUNTER.count_messages, history)
    each = documented(COUNTER.count_each_message, history)
    if many is not None:  # additive, as documented
        assert each is not None and many == sum(each) + (COUNTER.reply_priming if history else 0)
    if one is not None:
        assert one == documented(COUNTER.count_messages, [message]) - COUNTER.reply_priming
    documented(COUNTER.count_tools, history)


@FUZZ
@given(
    history=histories,
    budget=counts,
    flags=st.tuples(st.booleans(), st.booleans()),
    pins=st.lists(counts, max_size=2),
)
def test_fit_and_repair(history: Any, budget: Any, flags: Any, pins: Any) -> None:
    for oversize in ("truncate", "drop"):
        r = documented(
            wf.fit,
            history,
            budget,
            counter=COUNTER,
            keep_system=flags[0],
            keep_last_user=flags[1],
            pinned=pins,
            oversize=oversize,
        )
        if r is not None:  # no message lost: every index kept or dropped, once
            assert sorted(r.kept + r.dropped) == list(range(len(history)))
            assert r.tokens == COUNTER.count_messages(r.messages) <= r.budget
            assert r.stats["tokens_dropped"] >= 0
    r = documented(wf.repair, history, counter=COUNTER)
    if r is not None:
        assert sorted(r.kept + r.dropped) == list(range(len(history)))


@FUZZ
@given(
    text=st.text(max_size=300) | scalars,
    limit=counts,
    direction=st.sampled_from(["head", "tail", "head_tail", "middle"]) | scalars,
)
def test_truncate(text: Any, limit: Any, direction: Any) -> None:
    t = documented(wf.truncate, text, limit, direction=direction, counter=COUNTER)
    if t is not None:
        assert t.tokens <= t.original_tokens
        if isinstance(limit, int) and not isinstance(limit, bool):
            assert COUNTER.count(t.text) <= limit


@FUZZ
@given(
    tool=st.text(max_size=10) | scalars,
    output=st.text(max_size=300) | scalars,
    metadata=json_like,
    limit=counts,
)
def test_observation(tmp_path: Path, tool: Any, output: Any, metadata: Any, limit: Any) -> None:
    t = documented(
        ObservationTruncator, max_lines=limit, max_tokens=50, output_dir=tmp_path / "out"
    )
    if t is None:
        return
    r = documented(t.truncate, tool, output, metadata)
    if r is not None and r["full_output_path"]:  # what was cut is saved whole, as UTF-8
        saved = Path(r["full_output_path"]).read_bytes().decode("utf-8")
        assert len(saved) == len(output) or r["stats"]["compacted"]


@settings(FUZZ, max_examples=50)
@given(
    history=histories,
    state=json_like
    | st.fixed_dictionaries(
        {}, optional={"cut": counts, "summary": json_like, "summarized_until": counts}
    ),
)
def test_manager_prepare_with_any_state(history: Any, state: Any) -> None:
    cm = ContextManager(model="gpt-4o", context_window=3000, output_reserve=300)
    p = documented(cm.prepare, history, state)
    if p is not None:
        assert p.tokens <= 3000 - 300
    a = documented(asyncio.run, cm.aprepare(history, state))
    if p is not None and a is not None:
        assert a.messages == p.messages


@FUZZ
@given(batch=histories, state=json_like, key=st.text(max_size=12) | scalars)
def test_stores_lose_nothing(batch: Any, state: Any, key: Any) -> None:
    store = MemoryStore()
    s = documented(wf.Session, store, key)
    if s is None:
        return
    kept: list[Any] = []
    for m in batch:
        if documented(s.append, m) is not None:
            kept.append(json.loads(json.dumps(m)))  # what the store accepted, as JSON
    assert s.messages == kept
    if documented(s.save_state, state) is not None:
        assert s.load_state()[0] == state
    p = documented(
        s.prepare, ContextManager(model="gpt-4o", context_window=3000, output_reserve=300)
    )
    if kept:
        assert p is not None  # a history the session accepted can always be prepared


@FUZZ
@given(name=st.text(max_size=30) | scalars, number=counts)
def test_models_and_config(name: Any, number: Any) -> None:
    info = documented(wf.get_model, name)
    if info is not None:
        assert info.context_window > 0
    cm = documented(ContextManager, context_window=number, summary_timeout=number)
    if cm is not None:
        assert isinstance(cm.context_window, int) and cm.context_window >= 1
        assert cm.summary_timeout is None or (0 < cm.summary_timeout < math.inf)


# --------------------------------------------------------------------------- link tricks

PLANTS = ["none", "link-file", "link-same", "dangling", "link-dir", "other", "same", "fifo", "dir"]
ROOTS = ["fresh", "ours-0755", "ours-0700", "open-0777", "link-dir", "link-file", "file"]


@settings(FUZZ, max_examples=60)
@given(
    plant=st.sampled_from(PLANTS),
    root=st.sampled_from(ROOTS),
    output=st.text(min_size=1, max_size=400),
    cached=st.booleans(),
)
def test_tool_output_files_survive_link_tricks(
    tmp_path_factory: pytest.TempPathFactory, plant: str, root: str, output: str, cached: bool
) -> None:
    """Whatever someone planted at the output's name or at the private folder, a reported
    path is this user's regular file holding exactly the output, or nothing is reported (a
    save error) and nothing outside is written through a link."""
    import os
    import stat
    import tempfile

    from windowfit.truncation import saved_outputs as observation_files

    base = tmp_path_factory.mktemp("links")
    shared = base / "tmp"
    shared.mkdir()
    victim = base / "victim.txt"
    victim.write_text("someone else's text")
    victim_dir = base / "victim-dir"
    victim_dir.mkdir()
    old_tempdir = tempfile.tempdir
    tempfile.tempdir = str(shared)
    try:
        private = observation_files.private_root()
        if root == "ours-0755" or root == "ours-0700" or root == "open-0777":
            private.mkdir(mode=0o700)
            private.chmod({"ours-0755": 0o755, "ours-0700": 0o700, "open-0777": 0o777}[root])
        elif root == "link-dir":
            private.symlink_to(victim_dir)
        elif root == "link-file":
            private.symlink_to(victim)
        elif root == "file":
            private.write_text("squatter")
        out_dir = private / "tool-output"
        t = ObservationTruncator(
            max_lines=2, output_dir=out_dir, counter=COUNTER, cache_size=4 if cached else 0
        )
        probe = ObservationTruncator(
            max_lines=2, output_dir=base / "probe", counter=COUNTER, cache_size=4
        )
        text = "\n".join([output] * 5)
        name = Path(str(probe.truncate("t", text)["full_output_path"])).name
        planted = cached and root in ("fresh", "ours-0700") and plant != "none"
        if planted:
            out_dir.mkdir(parents=True, exist_ok=True)
            target = out_dir / name
            saved = text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
            if plant == "link-file":
                target.symlink_to(victim)
            elif plant == "link-same":
                copy = base / "same.txt"
                copy.write_text(saved, encoding="utf-8", newline="")
                target.symlink_to(copy)
            elif plant == "dangling":
                target.symlink_to(base / "nowhere")
            elif plant == "link-dir":
                target.symlink_to(victim_dir)
            elif plant == "other":
                target.write_text("x" * len(saved))
            elif plant == "same":
                target.write_text(saved, encoding="utf-8", newline="")
            elif plant == "fifo":
                os.mkfifo(target)
            elif plant == "dir":
                target.mkdir()
        r = t.truncate("t", text)
        path = r["full_output_path"]
        if path is None:
            assert r["stats"]["save_error"]
        else:
            p = Path(path)
            info = os.lstat(p)
            assert stat.S_ISREG(info.st_mode) and info.st_uid == os.getuid()
            assert p.read_bytes().decode("utf-8") == text.encode("utf-8", "surrogatepass").decode(
                "utf-8", "replace"
            )
            assert not any(q.is_symlink() for q in [p.parent, *p.parents][:3])
        safe_root = root in ("fresh", "ours-0755", "ours-0700")
        assert (path is not None) == (safe_root and not (planted and plant == "dir"))
        assert victim.read_text() == "someone else's text"
        assert list(victim_dir.iterdir()) == []
    finally:
        tempfile.tempdir = old_tempdir


# -- tampered manager state ---------------------------------------------------------------------

_TASK = {"role": "user", "content": "Find why the parser drops the last column of the CSV."}


def _agent_run(rounds: int) -> list[dict[str, Any]]:
    run: list[dict[str, Any]] = [{"role": "system", "content": "You are a coding agent."}, _TASK]
    for k in range(rounds):
        cid = f"call_{k}"
        fn = {"name": "grep", "arguments": f'{{"k": {k}}}'}
        run.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": cid, "type": "function", "function": fn}],
            }
        )
        output = " ".join(f"line{k}-{j} column offset" for j in range(50))
        run.append({"role": "tool", "tool_call_id": cid, "content": output})
        run.append({"role": "assistant", "content": f"step {k} done"})
        if k % 7 == 6:
            run.append({"role": "user", "content": f"also check file {k}"})
    return run


def _tampering_manager() -> ContextManager:
    return ContextManager(
        counter=COUNTER,
        context_window=3_000,
        output_reserve=300,
        summarizer="none",
        tool_output_dir="off",
        mask_keep=2,
        mask_clear_at_least=150,
    )


_SAVED: list[Any] = []


def _saved_run() -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """An agent run prepared turn by turn, and its last state (cut, scan, mask, prev set)."""
    if not _SAVED:
        run, cm = _agent_run(30), _tampering_manager()
        state: Any = None
        for i, m in enumerate(run):
            if m["role"] != "tool":
                state = cm.prepare(run[: i + 1], state=state).state
        assert state["cut"] > 1 and state.get("mask_until", 0) > 0 and state["prev"]
        _SAVED.extend([run, state])
    return _SAVED[0], _SAVED[1]


#: fields of the state and where they sit (a key inside "scan" or "prev", or top-level)
_FIELDS = [
    ("scan", "system"),
    ("scan", "last_user"),
    ("scan", "tokens"),
    ("scan", "n"),
    ("scan", "check"),
    ("prev", "head"),
    ("prev", "start"),
    ("prev", "end"),
    ("prev", "tools"),
    (None, "cut"),
    (None, "cut_tokens"),
    (None, "cut_check"),
    (None, "mask_until"),
    (None, "head_user"),
    (None, "retry_turn"),
    (None, "failures"),
    (None, "next_anchor"),
]
_positions = st.integers(min_value=-3, max_value=130) | st.sampled_from([10**9, 2**64])
_values = _positions | scalars | st.lists(_positions, max_size=4) | json_like
tampering = st.lists(st.tuples(st.sampled_from(_FIELDS), _values), min_size=1, max_size=3)


def _tampered(state: dict[str, Any], edits: list[Any]) -> dict[str, Any]:
    out = json.loads(json.dumps(state))
    for (where, key), value in edits:
        target = out if where is None else out[where]
        target[key] = value
    return out


@settings(FUZZ, max_examples=60)
@given(edits=tampering)
# an edited cut left at the summary's edge kept the tokens of the old cut, and the state
# saved back carried more tokens before its cut than the whole history holds
@example(edits=[((None, "cut"), 1), ((None, "mask_until"), None)])
def test_manager_state_with_tampered_fields(edits: list[Any]) -> None:
    """Tampered fields never raise, never drop the system prompt, the task or the output the
    agent acts on, and the state saved back is sound (it reloads with nothing to reset)."""
    run, state = _saved_run()
    cm = _tampering_manager()
    p = cm.prepare(run, state=_tampered(state, edits))
    assert p.tokens <= 3_000 - 300
    sent = {id(m) for m in p.messages}
    newest_tool = max(i for i, m in enumerate(run) if m["role"] == "tool")
    latest_user = max(i for i, m in enumerate(run) if m["role"] == "user")
    for i in (0, latest_user, newest_tool):
        assert id(run[i]) in sent, f"messages[{i}] was not sent"
    if all(where == "scan" for (where, _), _ in edits):  # a carried cache: never what is sent
        assert p.messages == cm.prepare(run, state=state).messages
    again = cm.prepare(run, state=json.loads(json.dumps(p.state)))
    assert again.stats["state_reset"] is False, again.stats["state_reset_reason"]


# ----------------------------------------------------------------------------- nesting

NESTING_LIMIT = 64  # the reader's documented bound (InvalidMessageError beyond it)


@st.composite
def nested_messages(draw: st.DrawFn) -> tuple[list[Any], int, bool]:
    """A short history whose last message nests deeply somewhere the reader recurses
    (tool_result content, tool_use input, an unknown part), sometimes made to contain itself.
    Returns it with the depth of its deepest value as the reader counts levels (a tool_result
    block inside another's content is one level deeper; a value inside an input or an unknown
    part's dict or list is one level deeper) and whether it is cyclic."""
    wrappers = draw(st.integers(0, 3 * NESTING_LIMIT))
    where = draw(st.sampled_from(["tool_result", "input", "unknown"]))
    cyclic = draw(st.booleans())
    leaf: Any = draw(st.text(max_size=5))
    deepest: Any = None
    if where == "tool_result":
        value: Any = leaf
        for _ in range(wrappers):
            value = [{"type": "tool_result", "tool_use_id": "t", "content": value}]
            deepest = value if deepest is None else deepest
        content = value if wrappers else [leaf]
        levels = wrappers - 1
    elif where == "input":
        value = deepest = {"leaf": leaf}
        for _ in range(wrappers):
            value = {"k": value} if draw(st.booleans()) else [value]
        content = [{"type": "tool_use", "id": "u", "name": "f", "input": value}]
        levels = wrappers + 1
    else:
        value = deepest = {"type": "custom", "text": leaf}
        for _ in range(wrappers):
            value = {"type": "custom", "inner": [value]}
        content = [value]
        levels = 2 * wrappers + 1
    if cyclic:  # the deepest container holds the message's own content
        block = {"type": "tool_result", "tool_use_id": "t", "content": content}
        if deepest is None:
            content.append(block)
        elif isinstance(deepest, list):
            deepest.append(block)
        else:
            deepest["again"] = content
    role = "assistant" if where == "input" else "user"
    prefix = draw(st.lists(st.sampled_from([{"role": "user", "content": "hi"}]), max_size=2))
    return [*prefix, {"role": role, "content": content}], levels, cyclic


@settings(FUZZ, max_examples=60)
@given(case=nested_messages())
def test_nesting_is_read_or_refused_by_index_and_field(case: tuple[list[Any], int, bool]) -> None:
    history, levels, cyclic = case
    index = len(history) - 1
    refuse = cyclic or levels > NESTING_LIMIT
    for entry in (
        lambda: COUNTER.count_messages(history),
        lambda: wf.fit(history, 10**6, counter=COUNTER),
        lambda: wf.repair(history, counter=COUNTER),
        lambda: wf.render_history(history, 1000, counter=COUNTER),
    ):
        try:
            entry()
        except wf.InvalidMessageError as e:
            assert re.match(rf"message {index}: content\[\d+\].*nested more than", str(e)), e
            assert refuse, f"refused at {levels} levels: {e}"
        else:
            assert not refuse, f"read {levels} levels (cyclic: {cyclic})"
