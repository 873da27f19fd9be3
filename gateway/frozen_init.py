"""``direct_init``: a frozen dataclass whose ``__init__`` fills the instance dict directly.

Why: the ``__init__`` that ``dataclasses`` writes for a frozen class stores every field through
``object.__setattr__`` (its own ``__setattr__`` refuses), about 0.15 µs per field here.  A /v1
call makes several such records -- its usage, its cost, its outcome, its settlement record
(26 fields) -- and together they were ~2 % of the gateway's samples at full load (issue 22).
Stored straight into ``self.__dict__`` the same values cost a third of that.

Only ``__init__`` changes: the class stays frozen (assignment still raises
``FrozenInstanceError``), and equality, hashing, ``repr`` and ``dataclasses.replace`` are
``dataclasses``' own.  Defaults and ``default_factory`` behave as before.  Classes with
``__slots__`` (no instance dict), ``__post_init__``, ``InitVar`` or ``init=False`` fields are
refused at decoration time rather than half supported.  ``GENERATED`` keeps the ``__init__``
``dataclasses`` wrote for each decorated class, so that a test can hold the two side by side.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T", bound=type)

#: decorated class -> the ``__init__`` that ``dataclasses`` generated for it
GENERATED: dict[type, Callable[..., None]] = {}

_NO_DEFAULT = object()


def direct_init(cls: T) -> T:
    """Replace a frozen dataclass's generated ``__init__`` (apply above ``@dataclass``)."""
    params = getattr(cls, "__dataclass_params__", None)
    if params is None or not params.frozen:
        raise TypeError(f"{cls.__name__}: direct_init is for frozen dataclasses")
    if "__slots__" in cls.__dict__ or hasattr(cls, "__post_init__"):
        raise TypeError(f"{cls.__name__}: slots or __post_init__ are not supported")
    every = cls.__dict__["__dataclass_fields__"].values()
    fields = dataclasses.fields(cls)
    if len(fields) != len(every) or any(not f.init or f.kw_only for f in fields):
        raise TypeError(f"{cls.__name__}: InitVar, init=False and kw_only are not supported")
    taken = {field.name for field in fields}

    def fresh(base: str) -> str:
        """A name for the generated code that no field (a parameter) hides."""
        name = base
        while name in taken:
            name += "_"
        taken.add(name)
        return name

    this, store, missing = fresh("self"), fresh("instance_dict"), fresh("no_default")
    namespace: dict[str, Any] = {missing: _NO_DEFAULT}
    params_text: list[str] = [this]
    body: list[str] = [f"    {store} = {this}.__dict__"]
    for field in fields:
        name = field.name
        if field.default is not dataclasses.MISSING:
            default = fresh(f"default_{name}")
            namespace[default] = field.default
            params_text.append(f"{name}={default}")
        elif field.default_factory is not dataclasses.MISSING:
            factory = fresh(f"factory_{name}")
            namespace[factory] = field.default_factory
            params_text.append(f"{name}={missing}")
            body.append(f"    if {name} is {missing}:\n        {name} = {factory}()")
        else:
            params_text.append(name)
        body.append(f"    {store}[{name!r}] = {name}")
    source = f"def __init__({', '.join(params_text)}):\n" + "\n".join(body)
    exec(source, namespace)  # noqa: S102 -- built from the class's own field names only
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    GENERATED[cls] = cls.__dict__["__init__"]
    cls.__init__ = init  # type: ignore[misc]
    return cls
