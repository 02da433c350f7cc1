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
        params = []
        for n in names:
            params.append(f"{n}=__d_{n}" if n in defaults else n)
        setter = "object.__setattr__(self, {n!r}, {n})" if frozen else "self.{n} = {n}"
        body = "\n".join("    " + setter.format(n=n) for n in names) or "    pass"
        src = f"def __init__(self, {', '.join(params)}):\n{body}\n" if names else "def __init__(self):\n    pass\n"
        env = {f"__d_{n}": v for n, v in defaults.items()}
        exec(src, env)  # noqa: S102 - generated from the class's own field names
        c.__init__ = env["__init__"]
        c.__record_fields__ = tuple(names)
        c.__match_args__ = tuple(names)

        def key(self):
            return tuple(getattr(self, n) for n in names)

        if "__repr__" not in c.__dict__:
            def __repr__(self):
                return f"{type(self).__name__}(" + ", ".join(f"{n}={getattr(self, n)!r}" for n in names) + ")"
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
