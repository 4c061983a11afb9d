"""Things registered by name (backends, launcher flavours): ``@registry.register("name")`` on a class,
lookup by name with a one-line error naming those available.

A leaf module (it imports only ``errors``): topologies/ and the runtime both use it.
"""

import importlib

from .errors import UsageError


class Registry:
    """Classes by name, in the order they were registered. With ``modules`` (name -> module of
    ``package``) the names are known before their modules are imported: each module is imported the
    first time its name is asked for, so that what a run does not use costs it nothing."""

    def __init__(self, what: str, attribute: str = "name", modules: dict[str, str] | None = None,
                 package: str | None = None):
        self.what, self.attribute = what, attribute
        self.modules, self.package = dict(modules or {}), package
        self._classes: dict[str, type] = {}

    def register(self, name: str):
        """Class decorator: ``cls`` is the one called ``name`` (its ``attribute`` is set to it)."""
        def add(cls):
            setattr(cls, self.attribute, name)
            self._classes[name] = cls
            return cls
        return add

    def names(self) -> tuple[str, ...]:
        return tuple(self.modules or self._classes)

    def get(self, name: str, what: str | None = None) -> type:
        """The class called ``name``; UsageError naming the ones available."""
        if name not in self.names():
            raise UsageError(f"{what or self.what}: {name!r} is not available in this vnetbench; "
                             f"available: {', '.join(self.names())}")
        if name not in self._classes:
            importlib.import_module(f"{self.package}.{self.modules[name]}")
        return self._classes[name]

    def values(self) -> list[type]:
        """Every class registered so far (those of modules not imported yet are not)."""
        return list(self._classes.values())
