"""An application as the analysis layer sees it: the kernel contract filled from its declaration.

The declaration travels in every record (``record["app"]``: parser name and regex metrics), so
report, compare, plots and html read an application's records without its YAML.
"""

from vnetbench.kernels.contract import Metric

from . import parsers

ELAPSED = Metric("elapsed_s", "elapsed", "s", "lower", scaling=True)

# app name -> its workload, as last seen in a record (table_metrics and breakdown get only a name)
_SEEN: dict[str, "AppContract"] = {}


class AppContract:
    def __init__(self, name: str, declaration: dict):
        self.DESCRIPTION = f"application {name}"
        parser = declaration.get("parser")
        self.parser = parsers.PARSERS.load(parser) if parser in parsers.PARSERS else None
        self.regex = [Metric(m["name"], m["name"], m.get("unit") or "", m.get("better"), scaling=bool(m.get("scaling")))
                      for m in declaration.get("metrics") or [] if isinstance(m, dict) and isinstance(m.get("name"), str)]

    def metrics(self, m: dict):
        out = [(ELAPSED, m.get("elapsed_s"))]
        if self.parser is not None:
            out += self.parser.metrics(m)
        return out + [(metric, m.get(metric.name)) for metric in self.regex]

    def table(self, names):
        chosen = ["elapsed_s", *(self.parser.table(names) if self.parser else []), *(r.name for r in self.regex)]
        return [name for name in dict.fromkeys(chosen) if name in names]

    def size_rows(self, m: dict) -> list[dict]:
        return self.parser.size_rows(m) if hasattr(self.parser, "size_rows") else []

    def headline(self, m: dict):
        out = [("elapsed (s)", m.get("elapsed_s"))]
        if self.parser is not None:
            out += self.parser.headline(m)
        return out + [(f"{r.name} ({r.unit})" if r.unit else r.name, m.get(r.name)) for r in self.regex][:4]


def of_record(record: dict) -> AppContract | None:
    """The workload of an application record (remembered by name), or None for a kernel's record."""
    app = record.get("app")
    if not isinstance(app, dict) or not isinstance(record.get("kernel"), str):
        return None
    workload = AppContract(record["kernel"], app)
    _SEEN[record["kernel"]] = workload
    return workload


def known(name: str) -> AppContract | None:
    return _SEEN.get(name)
