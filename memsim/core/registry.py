"""One registry type for memsim's extension points, keyed by the name used in YAML and on the CLI.

Mapping strategies (one per family), lowerings (one per op kind), collectives, topologies and
importers each keep a ``Registry``: names to values, each name once, listed in sorted order, and
looked up with an error that names the field and every known name. How members are found is the
same for all: a registry given a ``package`` imports every module of that package (``pkgutil``)
the first time it is read, and each module registers itself as it is imported, so adding a
family, collective, topology or importer is adding one file to its package. Registering never
reads the registry, so modules register in any order and import nothing heavy to do it.
"""
from __future__ import annotations

import importlib
import pkgutil
import threading
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from memsim.core.errors import ConfigError

T = TypeVar("T")


class Registry(Generic[T]):
    """Values of one kind by name. ``what`` says what a value is (in the duplicate error),
    ``field`` where its name comes from (in the unknown-name error: ``system.topology``, ``kind``),
    ``package`` the package whose modules register the members (None: they are registered in the
    module that holds the registry)."""

    def __init__(self, what: str, *, field: str, package: str | None = None) -> None:
        self.what = what
        self.field = field
        self.package = package
        self._entries: dict[str, T] = {}
        self._found = package is None
        self._finding = False
        self._lock = threading.RLock()  # one thread imports the members; another waits for all of them

    def add(self, name: str, value: T) -> T:
        """Register ``value`` as ``name``; a name registered twice is refused."""
        if name in self._entries:
            raise ValueError(f"{self.what} {name!r} is registered twice")
        self._entries[name] = value
        return value

    def register(self, name: str) -> Callable[[T], T]:
        """A decorator that registers what it decorates as ``name``."""
        def deco(value: T) -> T:
            return self.add(name, value)
        return deco

    def unregister(self, name: str) -> None:
        """Remove ``name`` (a test that registered a member of its own)."""
        del self._entries[name]

    def get(self, name: str) -> T:
        """The value registered as ``name``; an unknown name is a ``ConfigError`` on the field."""
        self._find()
        if name not in self._entries:
            raise ConfigError(f"{name!r} is not one of {', '.join(self.names())}", field=self.field)
        return self._entries[name]

    __getitem__ = get

    def names(self) -> tuple[str, ...]:
        """Every registered name, sorted."""
        self._find()
        return tuple(sorted(self._entries))

    def items(self) -> tuple[tuple[str, T], ...]:
        return tuple((name, self._entries[name]) for name in self.names())

    def values(self) -> tuple[T, ...]:
        return tuple(value for _, value in self.items())

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.names())

    def __contains__(self, name: object) -> bool:
        self._find()
        return name in self._entries

    def __repr__(self) -> str:
        return f"Registry({self.what!r}, field={self.field!r}, names={self.names()!r})"

    def _find(self) -> None:
        """Import the package's modules once. A module that reads the registry while it is being
        imported sees the members registered so far."""
        if self._found:
            return
        with self._lock:
            if self._found or self._finding:
                return
            self._finding = True
            try:
                assert self.package is not None
                package = importlib.import_module(self.package)
                for module in pkgutil.iter_modules(package.__path__):
                    importlib.import_module(f"{package.__name__}.{module.name}")
                self._found = True
            finally:
                self._finding = False
