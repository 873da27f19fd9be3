"""Slots for attributes a dict-based base class sets, with the base class's defaults kept.

twisted.web's ``Request`` and ``HTTPChannel`` keep some 30 attributes each in a per-instance
``__dict__``.  Past CPython's key-sharing limit (30 keys per class) that dict is a combined
hash table of ~1.5 KiB, one per request and one per connection: a tenth of what an open
stream costs (issue 22, 10,000 streams per process).  A subclass that names those attributes
in ``__slots__`` stores them in fixed slots instead (8 bytes each) and the ``__dict__`` stays
unused.  A slot shadows a class-level default of the same name in a base class (reading it
before it is set raises ``AttributeError`` where the base class's code expects the default),
so the subclass copies those defaults onto the instance first: ``class_defaults`` finds them
once, ``fill`` sets them per instance, and ``delete`` puts a default back where the base
class ``del``s an attribute (reading it afterwards gave the class-level value, and still
does).  A name missing from the slots still works (it lands in the ``__dict__``); the tests
assert that none is missing.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable
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
    """Set each default on ``instance`` (into its slot) before the base class's code runs."""
    for name, value in defaults.items():
        object.__setattr__(instance, name, value)


def delete(instance: object, name: str, defaults: dict[str, Any]) -> None:
    """``del instance.name`` as the dict-based base class meant it: back to the class-level
    default when there is one, really deleted otherwise."""
    if name in defaults:
        object.__setattr__(instance, name, defaults[name])
    else:
        object.__delattr__(instance, name)
