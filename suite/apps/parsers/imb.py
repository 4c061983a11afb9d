"""Intel MPI Benchmarks (IMB-MPI1) tables: PingPong, PingPing, Sendrecv, Exchange and the collectives.

Each benchmark's table (for the largest process count it ran at) goes to
``metrics["benchmarks"][NAME]`` as rows ``{"bytes", "repetitions", ...}``. PingPong's rows also
become the pingpong kernel's series (``latency_us@NB`` from t[usec], ``bandwidth_mbps@NB``) and
Allreduce's the allreduce kernel's (``avg_us@NB``), so plots and compare read them alike; the
others are ``imb_<name>_us@NB`` (t_avg) and ``imb_<name>_mbps@NB``. IMB 2021's Mbytes/sec are
10^6 bytes per second (1 byte in 0.38 us prints 2.66), as OSU's and the kernels'.
"""

import re

from vnetbench.kernels.contract import Metric, ends, smallest_and_largest

from . import ParseError, parse_number

SECTION = re.compile(r"^# Benchmarking (\S+)\s*\n# #processes = (\d+)", re.M)
COLUMNS = {"#bytes": "bytes", "#repetitions": "repetitions", "t[usec]": "t_us", "t_min[usec]": "min_us",
           "t_max[usec]": "max_us", "t_avg[usec]": "avg_us", "Mbytes/sec": "mbps", "Msg/sec": "messages_per_s"}


def _table(name: str, body: str) -> list[dict]:
    lines = [line for line in body.splitlines() if line.strip() and not line.startswith("#-")]
    header = next((i for i, line in enumerate(lines) if line.split()[:1] == ["#bytes"]), None)
    if header is None:
        raise ParseError(f"IMB {name}: no '#bytes #repetitions ...' table header")
    try:
        fields = [COLUMNS[column] for column in lines[header].split()]
    except KeyError as exc:
        raise ParseError(f"IMB {name}: unknown column {exc.args[0]!r}") from None
    rows = []
    for line in lines[header + 1:]:
        if line.startswith("#"):
            break
        cells = line.split()
        if len(cells) != len(fields) or not cells[0].isdigit():
            raise ParseError(f"IMB {name}: table row {len(rows) + 1} is damaged: {line.strip()[:80]!r}")
        rows.append({field: int(cell) if field in ("bytes", "repetitions") else parse_number(cell)
                     for field, cell in zip(fields, cells)})
    if not rows:
        raise ParseError(f"IMB {name}: the table has no rows")
    return rows


def parse(text: str) -> dict:
    if "Intel(R) MPI Benchmarks" not in text:
        raise ParseError("no 'Intel(R) MPI Benchmarks' banner in the output")
    sections = list(SECTION.finditer(text))
    if not sections:
        raise ParseError("IMB: no '# Benchmarking NAME' table in the output")
    benchmarks = {}
    for i, section in enumerate(sections):
        end = sections[i + 1].start() if i + 1 < len(sections) else len(text)
        name, processes = section.group(1), int(section.group(2))
        rows = _table(name, text[section.end():end])
        if name not in benchmarks or processes >= benchmarks[name]["processes"]:
            benchmarks[name] = {"processes": processes, "rows": rows}
    if "All processes entering MPI_Finalize" not in text:
        raise ParseError(f"IMB: the output ends before 'All processes entering MPI_Finalize' (truncated after "
                         f"{', '.join(benchmarks)})")
    return {"benchmarks": benchmarks}


def _series(name: str, field: str) -> tuple[str, str, str, str] | None:
    """(series, label, unit, better) a benchmark's column becomes, or None for columns not reported."""
    if name == "PingPong":
        return {"t_us": ("latency_us", "latency", "us", "lower"),
                "mbps": ("bandwidth_mbps", "bandwidth", "MB/s", "higher")}.get(field)
    if name == "Allreduce" and field == "avg_us":
        return ("avg_us", "average latency", "us", "lower")
    key = name.lower()
    return {"t_us": (f"imb_{key}_us", f"{name} time", "us", "lower"),
            "avg_us": (f"imb_{key}_us", f"{name} time", "us", "lower"),
            "mbps": (f"imb_{key}_mbps", f"{name} bandwidth", "MB/s", "higher")}.get(field)


def metrics(m):
    out = []
    benchmarks = m.get("benchmarks") if isinstance(m.get("benchmarks"), dict) else {}
    for name, table in benchmarks.items():
        rows = table.get("rows") if isinstance(table, dict) else None
        for row in rows if isinstance(rows, list) else []:
            size = row.get("bytes") if isinstance(row, dict) else None
            if not isinstance(size, int) or isinstance(size, bool):
                continue
            for field, value in row.items():
                found = _series(name, field)
                if found:
                    series, label, unit, better = found
                    out.append((Metric(f"{series}@{size}B", f"{label} at {size} B", unit, better, size=size), value))
    return out


def table(names):
    for small, large in (("latency_us", "bandwidth_mbps"), ("avg_us", "avg_us")):
        chosen = smallest_and_largest(small, large)(names)
        if chosen:
            return chosen
    return sorted(names)[:2]


def headline(m):
    benchmarks = m.get("benchmarks") or {}
    out = []
    for name, table in benchmarks.items():
        small, large = ends({"sizes": table.get("rows")})
        key = "t_us" if "t_us" in small else "avg_us"
        if key in small:
            out.append((f"{name} {large['bytes']} B (us)", large.get(key)))
    return out[:4]
