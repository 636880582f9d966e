"""An append-only list seen through frozen, length-limited views.

A snapshot must be immutable, yet copying every finished request (or every token of a long
completion) on each step would make watching the engine cost O(history) per step. The driver
thread owns a plain list and only ever appends to it; each snapshot keeps a :class:`Frozen`
view that remembers the length at publication time. Items below that length never change, so
the UI thread can read them without locks (list append is atomic under the GIL).
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Sequence
from itertools import islice
from typing import Generic, TypeVar, cast, overload

T = TypeVar("T")


class PrefixView(Sequence[T], Generic[T]):
    """The first ``length`` items of something that only grows; subclasses say how to read one.

    Shared by the driver's :class:`Frozen` token lists, vLLM's growing logprobs (read lazily)
    and a trace's snapshots (built on demand): index checks, slices and iteration live here.
    """

    __slots__ = ("_length",)

    def __init__(self, length: int) -> None:
        self._length = length

    def _at(self, index: int) -> T:
        raise NotImplementedError

    @overload
    def __getitem__(self, index: int) -> T: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[T]: ...
    def __getitem__(self, index: int | slice) -> T | Sequence[T]:
        if isinstance(index, slice):
            return [self._at(i) for i in range(*index.indices(self._length))]
        if index < 0:
            index += self._length
        if not 0 <= index < self._length:
            raise IndexError(index)
        return self._at(index)

    def __len__(self) -> int:
        return self._length

    def __iter__(self) -> Iterator[T]:
        for i in range(self._length):
            yield self._at(i)


class Frozen(PrefixView[T]):
    """The first ``length`` items of an append-only list; never changes once made."""

    __slots__ = ("_items",)

    def __init__(self, items: list[T] | None = None, length: int | None = None) -> None:
        # Both slots set here, not through PrefixView.__init__: the driver makes a few of
        # these per running request per step, and the extra call is a third of the cost.
        self._items: list[T] = items if items is not None else []
        self._length = len(self._items) if length is None else length

    def _at(self, index: int) -> T:
        return self._items[index]

    def __iter__(self) -> Iterator[T]:
        return islice(self._items, self._length)

    def extends(self, other: Frozen[T]) -> bool:
        """True when both views share one list and this one is at least as long.

        Then ``self`` is ``other`` plus ``self[len(other):]``: a trace can write only the tail.
        """
        return self._items is other._items and self._length >= other._length

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Frozen | list | tuple):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Frozen({list(self)!r})"


class Growing(Generic[T]):
    """The driver-side owner of an append-only list; hands out :class:`Frozen` views."""

    __slots__ = ("_items", "_view")

    def __init__(self) -> None:
        self._items: list[T] = []
        self._view: Frozen[T] = Frozen(self._items, 0)

    def append(self, item: T) -> None:
        self._items.append(item)

    def extend(self, items: Sequence[T]) -> None:
        self._items.extend(items)

    def __len__(self) -> int:
        return len(self._items)

    def view(self) -> Frozen[T]:
        """A frozen view of everything appended so far (reused while nothing was appended)."""
        if self._view._length != len(self._items):
            self._view = Frozen(self._items, len(self._items))
        return self._view


class Packed(Frozen[int]):
    """Token ids held as machine integers: what a finished request keeps in memory.

    A list of token ids costs ~36 bytes a token (a pointer and an int object: ids past 256
    are not shared), so the window of finished requests a long watch keeps (10 000 of a few
    hundred tokens each) held ~15 KB a request, ~300 MB in all; an ``array`` holds 4 bytes
    a token. It reads as any :class:`Frozen` does; it never grows.
    """

    __slots__ = ()

    def __init__(self, values: Sequence[int]) -> None:
        try:
            items = array("i", values)
        except OverflowError:  # an id past 2**31 (no vocabulary is that large): 8 bytes
            items = array("q", values)
        # array reads like the list Frozen expects: indexing, len, islice, identity.
        super().__init__(cast("list[int]", items))

    def __repr__(self) -> str:
        return f"Packed({list(self)!r})"


def packed(values: Sequence[int]) -> Packed:
    """``values`` as :class:`Packed` (itself when it already is)."""
    return values if isinstance(values, Packed) else Packed(values)
