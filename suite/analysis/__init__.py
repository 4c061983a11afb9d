"""The analysis layer: records in, tables, comparisons and plots out.

- ``records``: a store's sound records (streamed by ``Store.entries``), migrated, keyed by configuration;
- ``digest``: a store read once into what ``report`` shows, holding no records (``compare.Side`` does
  the same for each side of a comparison): memory follows configurations x repetitions, not bytes;
- ``metrics``: the numbers in a record, as its kernel declares them (kernels/contract.py);
- ``stats``: summaries of repetitions, Welch's t-test, percentage change (pure);
- ``tables``: the study-shaped tables as data (cells, overhead or N/A, scaling);
- ``breakdown``: where a headline number comes from, per configuration;
- ``compare``: two stores, configuration by configuration, with verdicts;
- ``format``: how every number reads; ``render``: one renderer per format (text via rich,
  markdown, csv, json) for every document; ``report``: records and tables laid out as documents;
- ``osu``: per-size rows in the OSU micro-benchmarks' layout; ``junit``: a comparison as JUnit XML;
- ``plots`` and ``html`` on top (matplotlib only when drawing).

Adding a report format is adding a renderer to ``render.FORMATS``.
"""


def study(records: list[dict], form: str = "table", baseline: str = "native", **context) -> str:
    """The study-shaped summary of ``records`` in ``form``."""
    from . import report, tables

    return report.render_study(tables.build(records, baseline), form, baseline=baseline, **context)
