"""The profile as ``report`` shows it: one short row per profiled record (the last ``MAX_ROWS``)."""

MAX_ROWS = 20
TOP_CALLS = 3


def row(record: dict) -> dict | None:
    """The report's row of a record that has a profile, else None."""
    profile = record.get("profile")
    if not isinstance(profile, dict):
        return None
    calls = [(name, c) for name, c in (profile.get("calls") or {}).items()
             if name not in ("MPI_Init", "MPI_Init_thread", "MPI_Finalize")]
    calls.sort(key=lambda item: -item[1].get("seconds", 0))
    trace = profile.get("trace") or {}
    return {"run_id": record.get("run_id"), "repetition": record.get("repetition", 0), "kernel": record["kernel"],
            "topology": (record.get("topology") or {}).get("name"), "ranks": record.get("ranks"),
            "mode": profile.get("mode"), "status": profile.get("status"), "mpi_pct": profile.get("mpi_pct"),
            "top_calls": [{"call": name, "seconds": c.get("seconds"), "calls": c.get("calls")}
                          for name, c in calls[:TOP_CALLS]],
            "cost_pct": (profile.get("cost") or {}).get("estimated_pct"),
            "trace": trace.get("path"), "truncated": bool(trace.get("truncated"))}


class Profiles:
    """The rows of the profiled records of a store read a record at a time, the last MAX_ROWS kept."""

    def __init__(self):
        self.rows: list[dict] = []

    def add(self, record: dict) -> None:
        found = row(record)
        if found is not None:
            self.rows = [*self.rows[-(MAX_ROWS - 1):], found]


def grid_rows(rows: list[dict]) -> tuple[list[str], list[list[str]]]:
    """(headers, body) of the report's profile table."""
    headers = ["run", "kernel", "topology", "ranks", "in MPI", "top calls (s)", "profile"]
    body = []
    for r in rows:
        top = ", ".join(f"{c['call'][4:]} {c['seconds']:.3g}" for c in r["top_calls"]) or "-"
        status = r["status"] if r["status"] != "ok" else r["mode"]
        if r["truncated"]:
            status += " (truncated)"
        body.append([f"{r['run_id']}/{r['repetition'] + 1}", r["kernel"], str(r["topology"]), str(r["ranks"]),
                     "-" if r["mpi_pct"] is None else f"{r['mpi_pct']:.1f}%", top, status])
    return headers, body
