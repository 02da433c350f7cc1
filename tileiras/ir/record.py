"""`@record`: small value classes without importing `dataclasses`.

The disassembler and the compiler start a fresh interpreter per file, and
`dataclasses` (with `inspect`, `ast`, ...) costs more to import than reading
a kernel. A record gets `__init__` (fields in annotation order, class
attributes as defaults), `__repr__`, `__eq__`, `__hash__` and, unless
`frozen=False`, immutability, like `@dataclass(frozen=True)`.
"""

from __future__ import annotations

_MISSING = object()


class FrozenInstanceError(AttributeError):
    pass


def _frozen_setattr(self, name, value):
    raise FrozenInstanceError(f"cannot assign to field '{name}'")


def _frozen_delattr(self, name):
    raise FrozenInstanceError(f"cannot delete field '{name}'")


def _make_init(cname: str, names: tuple[str, ...], defaults: dict):
    """One generic `__init__` per record: no `exec`, whose compile step would
    cost every record class tens of microseconds at import."""
    count = len(names)
    known = frozenset(names)

    def __init__(self, *args, **kwargs):
        if len(args) > count:
            raise TypeError(f"{cname}() takes {count} positional arguments but {len(args)} were given")
        vals = dict(zip(names, args))
        if kwargs:
            for k in kwargs:
                if k not in known:
                    raise TypeError(f"{cname}() got an unexpected keyword argument '{k}'")
                if k in vals:
                    raise TypeError(f"{cname}() got multiple values for argument '{k}'")
            vals.update(kwargs)
        if len(vals) < count:
            for n in names:
                if n not in vals:
                    if n not in defaults:
                        raise TypeError(f"{cname}() missing required argument: '{n}'")
                    vals[n] = defaults[n]
        self.__dict__.update(vals)

    return __init__


def record(cls=None, *, frozen: bool = True):
    def wrap(c):
        names: list[str] = []
        for base in reversed(c.__mro__[1:]):
            for n in getattr(base, "__record_fields__", ()):
                if n not in names:
                    names.append(n)
        for n in c.__dict__.get("__annotations__", {}):
            if n not in names:
                names.append(n)
        defaults = {}
        for n in names:
            for k in c.__mro__:
                if n in k.__dict__:
                    defaults[n] = k.__dict__[n]
                    break
        fields = tuple(names)
        c.__init__ = _make_init(c.__name__, fields, defaults)
        c.__record_fields__ = fields
        c.__match_args__ = fields

        def key(self):
            return tuple(map(self.__dict__.__getitem__, fields))

        if "__repr__" not in c.__dict__:
            def __repr__(self):
                return f"{type(self).__name__}(" + ", ".join(f"{n}={getattr(self, n)!r}" for n in fields) + ")"
            c.__repr__ = __repr__
        if "__eq__" not in c.__dict__:
            def __eq__(self, other):
                if other.__class__ is not self.__class__:
                    return NotImplemented
                return key(self) == key(other)
            c.__eq__ = __eq__
        if frozen:
            if "__hash__" not in c.__dict__ or c.__dict__["__hash__"] is None:
                c.__hash__ = lambda self: hash(key(self))
            c.__setattr__ = _frozen_setattr
            c.__delattr__ = _frozen_delattr
        else:
            c.__hash__ = None
        return c

    return wrap if cls is None else wrap(cls)


def replace(obj, **changes):
    """A copy of record `obj` with some fields changed, like `dataclasses.replace`."""
    return type(obj)(**{n: changes.pop(n, getattr(obj, n)) for n in obj.__record_fields__}, **changes)
