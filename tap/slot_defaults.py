"""Slots for attributes a dict-based base class sets, with the base class's defaults kept.

twisted.web's ``Request`` and ``HTTPChannel`` keep some 30 attributes each in a per-instance
``__dict__``.  Past CPython's key-sharing limit (30 keys per class) that dict is a combined
hash table of ~1.5 KiB, one per request and one per connection: a tenth of what an open
stream costs (issue 22, 10,000 streams per process).  A subclass that names those attributes
in ``__slots__`` stores them in fixed slots instead (8 bytes each) and the ``__dict__`` stays
unused.  A slot shadows a class-level default of the same name in a base class (reading it
before it is set raises ``AttributeError`` where the base class's code expects the default),
so the subclass copies those defaults onto the instance first: ``class_defaults`` finds them
once and ``fill`` sets them per instance.  Where the base class ``del``s such an attribute
(reading it afterwards gave the class-level value), ``restore_on_delete`` makes ``del`` put
the default back.  It does so with a descriptor on those few names, not a ``__delattr__`` on
the class: in CPython a Python-level ``__delattr__`` also takes over ``__setattr__`` (one
type slot serves both), and made every attribute store on a request or channel ~10x slower
(a fifth of a request's time in twisted.web, issue 22).  ``del`` of any other slotted name
empties the slot, as ``del`` of an instance attribute without a class default would.  A name
missing from the slots still works (it lands in the ``__dict__``); the tests assert that none
is missing.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from typing import Any


def class_defaults(base: type, names: Iterable[str]) -> dict[str, Any]:
    """name -> class-level value in ``base``'s MRO, for each of ``names`` that has one.

    Methods, properties and other descriptors must not be slotted (a slot would hide them):
    naming one is a programming error."""
    found: dict[str, Any] = {}
    for name in names:
        for klass in base.__mro__:
            if name in vars(klass):
                value = vars(klass)[name]
                descriptor = hasattr(value, "__get__") and not isinstance(value, type)
                if inspect.isfunction(value) or descriptor:
                    raise TypeError(f"{base.__name__}.{name} is a method or descriptor, "
                                    "not a data attribute: it cannot be slotted")
                found[name] = value
                break
    return found


def fill(instance: object, defaults: dict[str, Any]) -> None:
    """Set each default on ``instance`` (into its slot) before the base class's code runs.

    ``setattr`` rather than ``object.__setattr__``: the same store (the classes define no
    ``__setattr__``; the tests assert it), without looking the wrapper up per name -- about
    half the time, once per request and once per connection."""
    for name, value in defaults.items():
        setattr(instance, name, value)


def filler(defaults: dict[str, Any]) -> Callable[[object], None]:
    """``fill`` with ``defaults`` fixed, as one function of plain attribute stores: the same
    stores (a slot, or a ``_Restoring`` descriptor's ``__set__``) without a ``setattr`` call
    and a dict walk per name -- about a quarter of the time, on every request (issue 22)."""
    for name in defaults:
        if not name.isidentifier():
            raise ValueError(f"not an attribute name: {name!r}")
    namespace = {f"_value_{index}": value for index, value in enumerate(defaults.values())}
    lines = [f"    instance.{name} = _value_{index}" for index, name in enumerate(defaults)]
    source = "def fill(instance):\n" + ("\n".join(lines) or "    pass")
    exec(source, namespace)  # noqa: S102 -- attribute names checked above
    fill_all: Callable[[object], None] = namespace["fill"]
    return fill_all


class _Restoring:
    """A slot whose ``del`` puts its class default back instead of emptying it."""

    __slots__ = ("_default", "_member")

    def __init__(self, member: Any, default: Any) -> None:
        self._member = member
        self._default = default

    def __get__(self, instance: object, owner: type | None = None) -> Any:
        if instance is None:
            return self
        return self._member.__get__(instance, owner)

    def __set__(self, instance: object, value: Any) -> None:
        self._member.__set__(instance, value)

    def __delete__(self, instance: object) -> None:
        self._member.__set__(instance, self._default)


def restore_on_delete(cls: type, names: Iterable[str], defaults: dict[str, Any]) -> None:
    """After ``del instance.name`` (for each of ``names``), ``instance.name`` reads as its
    default again, as it did when the base class's instances kept it in a ``__dict__``."""
    for name in names:
        setattr(cls, name, _Restoring(vars(cls)[name], defaults[name]))
