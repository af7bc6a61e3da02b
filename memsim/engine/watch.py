"""What the shortcuts keep of each server's use: who used it last, and how often that changed.

Replay remembers a task only if no other task touched its resources while it ran, and
fast-forward forgets a step's history when another operator's demand reached its resources:
both ask how often a server changed hands. A ``Touches`` on each server (``Server.watch``,
installed by ``engine/shortcuts.py`` when a shortcut is on) counts it, told of every request
and count of bytes: ``touches``, how often one came from another owner than the one before,
and ``switches``, how often a demand or communication request did (prefetches never delay
those). The shortcuts find them by server (``Watches``, from ``install``). A plain run
installs none, and its requests pay nothing for it.
"""
from __future__ import annotations

from collections.abc import Iterable

from memsim.engine.resources import PREFETCH, Job, Server

Watches = dict[Server, "Touches"]


class Touches:
    """The owners of one server's requests, as the shortcuts need them (``resources.Watch``)."""

    __slots__ = ("last_any", "touches", "last_owner", "switches")

    def __init__(self) -> None:
        self.last_any: Job | None = None
        self.touches = 0  # how often any request came from another owner than the one before
        self.last_owner: Job | None = None
        self.switches = 0  # how often a demand request came from another owner than the one before

    def request(self, owner: Job | None, priority: int) -> None:
        if owner is not self.last_any:
            self.last_any = owner
            self.touches += 1
        if priority < PREFETCH and owner is not self.last_owner:  # prefetches never delay demand traffic
            self.last_owner = owner
            self.switches += 1

    def touch(self, owner: Job) -> None:
        if owner is not self.last_any:
            self.last_any = owner
            self.touches += 1

    def replayed(self, owner: Job) -> None:
        """A replayed task of ``owner``'s used the server: it changed hands, if it was another's."""
        if owner is not self.last_any:
            self.last_any, self.last_owner = owner, owner
            self.touches += 1
            self.switches += 1


def install(servers: Iterable[Server]) -> Watches:
    """A ``Touches`` on each of ``servers`` (a server listed twice gets one)."""
    watches: Watches = {}
    for server in servers:
        if server not in watches:
            server.watch = watches[server] = Touches()
    return watches
