"""The canonical message format and the bookkeeping every adapter shares.

windowfit counts and fits OpenAI Chat Completions messages::

    {"role": "system" | "developer" | "user" | "assistant" | "tool",
     "content": str | None | [{"type": "text", "text": ...}, {"type": "image_url", ...}, ...],
     "tool_calls": [{"id", "type": "function", "function": {"name", "arguments": str}}],
     "tool_call_id": str, "name": str}

Other formats (Responses API items, Anthropic messages, LangChain and PydanticAI objects) are
converted to it with a :class:`Converted` record that remembers where every canonical message came
from, so a fit computed on the canonical list can hand back the caller's *own* objects: untouched
items come back as the very same objects, and an item only part of which was kept is rebuilt by
the adapter from the parts that survive.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from windowfit.errors import ArgumentTypeError, InvalidArgumentError
from windowfit.messages import SYSTEM_ROLES, content_text, history_problems, plain_message

__all__ = [
    "SYSTEM_ROLES",
    "Converted",
    "Ref",
    "as_dict",
    "content_text",
    "history_problems",
    "is_valid_history",
    "json_arguments",
    "make_tool_call",
    "text_part",
]

logger = logging.getLogger(__name__)

T = TypeVar("T")

Ref = tuple[int, "int | None"]
"""Where a canonical message came from: ``(item index, part index)``; part ``None`` = whole item."""


def as_dict(obj: Any) -> Any:
    """A plain-dict view of an SDK object (pydantic model / dataclass); other values unchanged.

    Used only to *read* items: the originals are what adapters hand back. The rule is
    ``windowfit.messages.plain_message``, the one the core's message reader uses.
    """
    return plain_message(obj)


def json_arguments(arguments: Any) -> str:
    """Tool-call arguments as the JSON string the canonical format requires."""
    if arguments is None:
        return "{}"
    if isinstance(arguments, str):
        return arguments
    return json.dumps(arguments, ensure_ascii=False)


def make_tool_call(call_id: str, name: str, arguments: Any) -> dict[str, Any]:
    """One canonical ``tool_calls`` entry."""
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json_arguments(arguments)},
    }


def text_part(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def is_valid_history(messages: Sequence[Mapping[str, Any]]) -> bool:
    """True when :func:`history_problems` finds nothing."""
    return not history_problems(messages)


@dataclass
class Converted(Generic[T]):
    """Canonical messages plus a map back to the items they were converted from.

    ``origins[i]`` lists the :data:`Ref` s of canonical message ``i``: one item or some parts of one
    item (Anthropic user turns, PydanticAI requests), or several whole items (a Responses API turn
    made of reasoning, message and function-call items). A canonical message with no refs (e.g. a
    top-level Anthropic ``system``) maps back to nothing.

    ``rebuild(item, dropped_parts)`` returns a copy of ``item`` without the given parts, or None
    when nothing worth sending is left; adapters whose canonical messages cover whole items need
    none.
    """

    items: list[T]
    messages: list[dict[str, Any]]
    origins: list[tuple[Ref, ...]]
    rebuild: Callable[[T, frozenset[int]], T | None] | None = None
    _parts_of: dict[int, set[int]] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        if len(self.origins) != len(self.messages):
            raise InvalidArgumentError("origins must give one tuple of refs per canonical message")
        for refs in self.origins:
            for item, part in refs:
                if part is not None:
                    self._parts_of.setdefault(item, set()).add(part)

    def __len__(self) -> int:
        return len(self.messages)

    def select(self, kept: Iterable[int]) -> list[T]:
        """The original items behind the kept canonical indices, in item order.

        An item every canonical message of which is kept comes back as the same object; an item
        only some of whose parts are kept is rebuilt without the others (parts no canonical
        message refers to, like PydanticAI's instruction deltas, stay with their item).
        """
        whole: set[int] = set()
        parts: dict[int, set[int]] = {}
        for idx in kept:
            for item, part in self.origins[idx]:
                if part is None:
                    whole.add(item)
                else:
                    parts.setdefault(item, set()).add(part)
        out: list[T] = []
        for item in sorted(whole | parts.keys()):
            if item in whole:
                out.append(self.items[item])
                continue
            dropped = self._parts_of[item] - parts[item]
            if not dropped:
                out.append(self.items[item])
                continue
            if self.rebuild is None:
                raise ArgumentTypeError("this conversion cannot split an item; pass rebuild=")
            rebuilt = self.rebuild(self.items[item], frozenset(dropped))
            if rebuilt is not None:
                out.append(rebuilt)
        return out

    def index_of(self) -> dict[int, int]:
        """``id(canonical message) -> index``: finds which outputs of a manager are inputs."""
        return {id(m): i for i, m in enumerate(self.messages)}

    def reassemble(
        self,
        out: Sequence[Mapping[str, Any]],
        convert_new: Callable[[Sequence[Mapping[str, Any]]], list[T]],
    ) -> list[T]:
        """Items for a prepared canonical list ``out`` (e.g. ``ContextManager.prepare`` output).

        Messages of ``out`` that are the very canonical dicts of this conversion map back to their
        originals (runs of them through :meth:`select`); any other message (a summary, a
        truncated tool result) is new and converted by ``convert_new``, a run at a time so
        tool results stay grouped.
        """
        index = self.index_of()
        result: list[T] = []
        run: list[int] = []
        new: list[Mapping[str, Any]] = []

        def flush() -> None:
            if run:
                result.extend(self.select(run))
                run.clear()
            if new:
                result.extend(convert_new(new))
                new.clear()

        for m in out:
            i = index.get(id(m))
            if i is not None and self.messages[i] is m:
                if new:
                    flush()
                run.append(i)
            else:
                if run:
                    flush()
                new.append(m)
        flush()
        return result


def iter_parts(content: Any) -> Iterator[Any]:
    """The parts of a content value: a list as is, a lone value as a one-element list."""
    if content is None:
        return iter(())
    if isinstance(content, (list, tuple)):
        return iter(content)
    return iter((content,))
