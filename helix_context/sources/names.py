"""How a source folder is named in the sources table, and where a stored name is on this machine.

On a SQLite genome (one user, one machine) a source is its absolute folder, as always.

On a team genome the sources table is shared by every developer's backend, so an absolute folder
would name a place that exists on one machine only: the others would find it missing (and retire
its files for everyone). A folder inside a mapped root is therefore stored as `@ROOT/rel` (`@ROOT`
for the root itself), and each backend finds it through its own map (sources/roots.py).

A folder outside every mapped root is **refused** on a team genome, with the command that fixes it
(`helix sources map NAME FOLDER`). The other choice, a personal absolute source that only this
machine indexes, would still put this developer's folder names and private files into every
teammate's answers (the genes are shared even when the watching is not), and would need an owner
on each source row. A team genome holds what the team shares; a personal folder belongs in a
personal (SQLite) genome. Mapping a root is one command and also names the files already indexed
under it (commands.py).
"""

from __future__ import annotations

from pathlib import Path

from helix_context.config import Settings
from helix_context.errors import SourceError
from helix_context.sources.roots import PREFIX, RootMap, is_shared


class SourceNames:
    """The naming rule of one genome: `roots` is this machine's map on a team genome, None on SQLite."""

    def __init__(self, roots: RootMap | None) -> None:
        self.roots = roots
        self._checked_out: dict[str, bool] = {}  # root name → its mapped checkout is a folder here

    @classmethod
    def of(cls, settings: Settings) -> SourceNames:
        """Read afresh each time: `helix sources map` may have changed the map since the backend started."""
        return cls(RootMap.load(settings.home) if settings.genome.url else None)

    @property
    def team(self) -> bool:
        return self.roots is not None

    def key(self, folder: Path) -> str:
        """The stored name of a resolved folder that becomes a source (refused outside the mapped roots)."""
        if self.roots is None:
            return str(folder)
        shared = self.roots.shared_name(folder)
        if shared is None:
            mapped = ", ".join(f"@{n} = {p}" for n, p in sorted(self.roots.roots.items())) or "none"
            raise SourceError(
                f"{folder} is outside every shared root mapped on this machine (mapped: {mapped}). A team genome "
                f"stores sources relative to a named root, so every developer's backend finds them in its own "
                f"checkout: map it first, `helix sources map NAME {folder}` (NAME as your team calls the "
                "repository), then add it again")
        return shared

    def _here(self, key: str) -> Path | None:
        """Where a stored name (a source or a file) is on this machine; None when its root is not mapped here."""
        if not is_shared(key):
            return Path(key)
        if self.roots is None or self.checkout_gone(key):
            return None
        return self.roots.local_folder(key)

    def checkout_gone(self, key: str) -> bool:
        """A shared name whose root is mapped here to a folder that is not there (moved, deleted to clone
        again, an unmounted drive). Why not "missing": every file under it would read as deleted, and the
        index pass (or a refresh) would retire the team's genes for everyone; its genes stay, and the
        source is indexed here again once the checkout is back (or the root mapped again)."""
        name = key[len(PREFIX):].partition("/")[0]
        folder = None if self.roots is None else self.roots.roots.get(name)
        if folder is None:
            return False
        if name not in self._checked_out:
            self._checked_out[name] = folder.is_dir()
        return not self._checked_out[name]

    def elsewhere(self, key: str) -> bool:
        """A team genome's source stored as an absolute folder (added before shared roots existed) that is
        not a folder on this machine: it is another developer's. Why not "missing": a missing source
        retires its files, and on a shared genome that would delete the team's index of another machine's
        checkout. The cost: on the machine it came from, deleting the folder no longer retires its files;
        mapping its root (`helix sources map`) gives it a shared name, which has neither problem."""
        return self.team and not is_shared(key) and not Path(key).is_dir()

    def folder(self, key: str) -> Path | None:
        """Where a stored source is on this machine; None when its root is not mapped here, or when it is
        another machine's absolute folder (`elsewhere`): such a source is never indexed nor retired here."""
        return None if self.elsewhere(key) else self._here(key)

    def why_not_here(self, key: str) -> str | None:
        """What to do about a stored source this machine cannot index, or None when it can."""
        if self.folder(key) is not None:
            return None
        if self.elsewhere(key):
            return (f"not on this machine: {key} was stored as an absolute folder before shared roots existed, "
                    "and this machine has no such folder (another developer's); its genes stay and are answered. "
                    f"On the machine that has it, `helix sources map NAME {key}` gives it a shared name; then map "
                    "your checkout here: helix sources map NAME PATH-OF-YOUR-CHECKOUT")
        if self.roots is None:
            return f"{key} is a team genome's shared source; this genome is not a team genome"
        name = key[len(PREFIX):].partition("/")[0]
        if self.checkout_gone(key):
            return (f"not indexed on this machine: root {name!r} is mapped here to {self.roots.roots[name]}, which "
                    f"is not a folder (moved or deleted?); its genes stay and are answered. Map your checkout "
                    f"again: helix sources map {name} PATH-OF-YOUR-CHECKOUT")
        why = (self.roots.describe(key) if name in self.roots.roots
               else f"root {name!r} is not mapped on this machine: helix sources map {name} PATH-OF-YOUR-CHECKOUT")
        return f"not indexed on this machine ({why}); the backends that map it keep it up to date"

    def stored(self, local: str | Path) -> str:
        """The stored name of a file on this machine (as the ingest names it: ingest/pipeline.py); a name
        that is already shared (an import into a team genome keeps the team's names) stays as it is."""
        if is_shared(str(local)):
            return str(local)
        shared = self.roots.shared_name(Path(local)) if self.roots is not None and self.roots.roots else None
        return shared or str(local)

    def local(self, stored: str) -> str | None:
        """The file on this machine of a stored file name (None: its root is not mapped here)."""
        found = self._here(stored)
        return None if found is None else str(found)

    def candidates(self, raw: str, resolved: str) -> list[str]:
        """The stored names a user may mean by `raw` (as typed, resolved, or its shared form)."""
        found = [raw, resolved]
        if self.roots is not None and not is_shared(raw):
            shared = self.roots.shared_name(Path(resolved))
            if shared is not None:
                found.insert(0, shared)
        return list(dict.fromkeys(found))
