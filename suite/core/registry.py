"""The one registry type: things registered by name (kernels, output formats, parsers, workload kinds, backends,
launcher flavours), one lookup and one error (a UsageError naming the choices, exit 2).

A registry maps each name to a line: the module that holds it (relative to the registry's ``package``, or
absolute), optionally ``module:attribute``; a line may be a richer object with a ``module`` field (a backend's
``Entry``). The module is imported the first time its name is asked for, so that what a run does not use costs
it nothing. ``get`` returns the attribute a line names, else the class the module registered under that name
(``@registry.register("name")``), else the module. With ``plugins`` (an entry-point group), names not listed are
looked for in the installed distributions.

A leaf module (it imports only ``errors``): every layer uses it.
"""

import importlib
from collections.abc import MutableMapping

from .errors import UsageError


class Registry(MutableMapping):
    """Names -> lines, in the order listed (then plugins, then classes registered by decorator alone).

    A mapping of its own lines (``name in R``, ``list(R)``, ``R[name]``, ``R.get(name)`` as any mapping's);
    ``load(name)`` is the lookup that imports."""

    def __init__(self, what: str, lines: dict | None = None, *, package: str | None = None, noun: str | None = None,
                 attribute: str = "name", plugins: str | None = None, plugin_line=None, registers: bool = False):
        self.what, self.noun, self.attribute = what, noun or what.lstrip("-"), attribute
        self.package, self.group, self.plugin_line = package, plugins, plugin_line or (lambda module: module)
        self.registers = registers  # True: each module must register a class under its name
        self._lines = dict(lines or {})
        self._classes: dict[str, type] = {}
        self._plugins: dict | None = None

    # ---- the lines, as a mapping ----
    def __contains__(self, name) -> bool:
        return name in self._lines

    def __iter__(self):
        return iter(self._lines)

    def __len__(self) -> int:
        return len(self._lines)

    def __getitem__(self, name):
        return self._lines[name]

    def __setitem__(self, name, line) -> None:
        self._lines[name] = line

    def __delitem__(self, name) -> None:
        del self._lines[name]

    # ---- registering ----
    def register(self, name: str):
        """Class decorator: ``cls`` is the one called ``name`` (its ``attribute`` is set to it)."""
        def add(cls):
            setattr(cls, self.attribute, name)
            self._classes[name] = cls
            return cls
        return add

    def plugins(self) -> dict:
        """The lines of the entry-point group's names that are not listed, read once."""
        if self.group is None:
            return {}
        if self._plugins is None:
            from importlib.metadata import entry_points

            # ``ep.module``: the value may be ``module`` or the usual ``module:attribute``; registering is the
            # module's @register, so only the module is imported
            self._plugins = {ep.name: self.plugin_line(ep.module) for ep in entry_points(group=self.group)
                             if ep.name not in self._lines}
        return self._plugins

    def lines(self, with_plugins: bool = True) -> dict:
        """Every name's line, listed ones first."""
        return {**self._lines, **(self.plugins() if with_plugins else {})}

    def names(self, with_plugins: bool = True) -> tuple[str, ...]:
        listed = self.lines(with_plugins)
        return (*listed, *(name for name in self._classes if name not in listed))

    # ---- the lookup ----
    def unknown(self, name, what: str | None = None) -> UsageError:
        """The one error of an unknown name."""
        return UsageError(f"{what or self.what}: unknown {self.noun} {name!r}; choose from {', '.join(self.names())}")

    def load(self, name: str, what: str | None = None):
        """What ``name`` stands for (see the module's docstring), imported now if it was not; UsageError naming
        the choices when unknown."""
        found = self.find(name, what)
        if found is None:
            raise self.unknown(name, what)
        return found

    def find(self, name: str, what: str | None = None):
        """Like ``load``, but None for an unknown name (a record from a newer vnetbench)."""
        if name in self._classes:
            return self._classes[name]
        listed = name in self._lines
        line = self._lines[name] if listed else self.plugins().get(name)
        if line is None:
            return None
        module, _, attribute = str(getattr(line, "module", line)).partition(":")
        if listed and self.package:
            module = f"{self.package}.{module}"
        try:
            loaded = importlib.import_module(module)
        except ImportError as exc:  # a plugin whose distribution is broken or half removed: say which
            if listed:
                raise
            raise UsageError(f"{what or self.what}: {name!r}: its module {module} (entry point group {self.group}) "
                             f"does not import: {exc}") from None
        if attribute:
            return getattr(loaded, attribute)
        if name in self._classes:
            return self._classes[name]
        if self.registers:
            raise UsageError(f"{what or self.what}: {name!r}: module {getattr(line, 'module', line)} registers no "
                             f"{self.noun} of that name")
        return loaded

    def values(self) -> list[type]:
        """Every class registered so far (those of modules not imported yet are not)."""
        return list(self._classes.values())
