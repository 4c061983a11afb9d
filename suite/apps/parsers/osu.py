"""OSU Micro-Benchmarks output: the one table a benchmark prints (latency, bandwidth, bi-bandwidth,
multi-pair bandwidth and message rate, collectives; with or without -f).

Rows go to ``metrics["sizes"]`` with the field names of the pingpong and allreduce kernels
(``latency_us``, ``bandwidth_mbps``, ``avg_us``, ``min_us``, ``max_us``, ``iterations``), so per-size
plots, tables and compare read both alike. OSU's MB/s are 10^6 bytes per second, as the kernels'.
"""

import re

from vnetbench.kernels.contract import ends, per_size, size_metric, size_table, smallest_and_largest

from . import ParseError, parse_number

TITLE = re.compile(r"^# (OSU .*?) v(\d[\w.]*)\s*$", re.M)

# pingpong's and allreduce's series, and the ones only OSU has
SERIES = {
    "latency_us": size_metric("latency_us", "latency", "us", "lower"),
    "bandwidth_mbps": size_metric("bandwidth_mbps", "bandwidth", "MB/s", "higher"),
    "bibandwidth_mbps": size_metric("bibandwidth_mbps", "bi-directional bandwidth", "MB/s", "higher"),
    "messages_per_s": size_metric("messages_per_s", "message rate", "1/s", "higher"),
    "avg_us": size_metric("avg_us", "average latency", "us", "lower"),
    "min_us": size_metric("min_us", "minimum latency", "us", "lower"),
    "max_us": size_metric("max_us", "maximum latency", "us", "lower"),
}


def _fields(title: str, header: str) -> list[str]:
    """The row fields, in column order, from the benchmark's title and its '# Size ...' header."""
    columns = re.findall(r"Avg Latency\(us\)|Min Latency\(us\)|Max Latency\(us\)|Latency \(us\)|Iterations|"
                         r"Bandwidth \(MB/s\)|Messages/s|MB/s|P50 Tail Lat\(us\)|P90 Tail Lat\(us\)|"
                         r"P99 Tail Lat\(us\)", header)
    point_to_point = not re.search(r"\b(All|Reduce|Bcast|Gather|Scatter|Barrier|Alltoall|Scan|Neighbor)",
                                   title, re.I)
    names = {"Avg Latency(us)": "latency_us" if point_to_point else "avg_us", "Latency (us)": "latency_us",
             "Min Latency(us)": "min_us", "Max Latency(us)": "max_us", "Iterations": "iterations",
             "Bandwidth (MB/s)": "bibandwidth_mbps" if "Bi-Directional" in title else "bandwidth_mbps",
             "MB/s": "bandwidth_mbps", "Messages/s": "messages_per_s",
             "P50 Tail Lat(us)": "p50_us", "P90 Tail Lat(us)": "p90_us", "P99 Tail Lat(us)": "p99_us"}
    return [names[column] for column in columns]


def parse(text: str) -> dict:
    title = TITLE.search(text)
    if not title:
        raise ParseError("no OSU benchmark title ('# OSU MPI ... Test vX.Y') in the output")
    rest = text[title.end():]
    header = re.search(r"^#\s*Size\b(.*)$", rest, re.M)
    if not header:
        raise ParseError(f"{title.group(1)}: no '# Size ...' table header in the output")
    fields = _fields(title.group(1), header.group(1))
    if not fields:
        raise ParseError(f"{title.group(1)}: no column this parser knows in {header.group(0).strip()!r}")
    rows = []
    for lineno, line in enumerate(rest[header.end():].splitlines(), start=1):
        if not line.strip():
            if rows:
                break  # the table ends at the first empty line after it
            continue
        if line.startswith("#"):
            continue
        cells = line.split()
        if len(cells) != len(fields) + 1 or not cells[0].isdigit():
            raise ParseError(f"{title.group(1)}: table row {lineno} is damaged: {line.strip()[:80]!r} "
                             f"(expected a size and {len(fields)} parse_number(s))")
        row = {"bytes": int(cells[0])}
        for field, cell in zip(fields, cells[1:]):
            row[field] = int(cell) if field == "iterations" and cell.isdigit() else parse_number(cell)
        rows.append(row)
    if not rows:
        raise ParseError(f"{title.group(1)}: the table has no rows")
    return {"benchmark": title.group(1), "osu_version": title.group(2), "sizes": rows}


def metrics(m):
    rows = m.get("sizes") if isinstance(m.get("sizes"), list) else []
    present = [s for s in SERIES if any(isinstance(row, dict) and s in row for row in rows)]
    return [pair for series in present for pair in per_size(m, series, SERIES[series])]


def table(names):
    series = [s for s in SERIES if any(n.startswith(s + "@") for n in names)]
    if not series:
        return []
    return smallest_and_largest(series[0], series[0])(names)


def headline(m):
    small, large = ends(m)
    series = next((s for s in SERIES if s in small), None)
    if series is None:
        return []
    unit = SERIES[series](0).unit
    return [(f"{series} {small['bytes']} B ({unit})", small.get(series)),
            (f"{series} {large['bytes']} B ({unit})", large.get(series))]


COLUMNS = {"bytes": "bytes", "latency_us": "latency (us)", "bandwidth_mbps": "bandwidth (MB/s)",
           "bibandwidth_mbps": "bi-bandwidth (MB/s)", "messages_per_s": "messages/s", "avg_us": "avg (us)",
           "min_us": "min (us)", "max_us": "max (us)", "iterations": "iterations"}


def size_rows(m):
    return size_table(m, COLUMNS)
