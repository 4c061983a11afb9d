"""The analysis layer: records in, tables, comparisons and plots out.

- ``records``: a store's sound records (streamed by ``Store.entries``), migrated, keyed by configuration;
- ``digest``: a store read once into what ``report`` shows, holding no records (``compare.Side`` does
  the same for each side of a comparison): memory follows configurations x repetitions, not bytes;
- ``metrics``: the numbers in a record, as its kernel declares them (kernels/contract.py);
- ``stats``: summaries of repetitions, Welch's t-test, percentage change (pure);
- ``tables``: the study-shaped tables as data (cells, overhead or N/A, scaling);
- ``breakdown``: where a headline number comes from, per configuration;
- ``predictions``: stored predictions (``vnetbench predict``'s records) beside the runs they predict;
- ``compare``: two stores, configuration by configuration, with verdicts;
- ``format``: how every number reads; ``render``: a document as data (what every command prints);
  ``report``: records and tables laid out as documents;
- ``formats``: the output formats, one module each (table, markdown, csv, json, osu; written: plot,
  html, junit), each saying what it applies to (run, report, compare); ``--format`` choices come from
  its registry. ``plots`` draws (matplotlib only when drawing).

Adding an output format is adding a module to ``formats/`` and its line to ``formats.FORMATS``.
"""


def study(records: list[dict], form: str = "table", baseline: str = "native", **context) -> str:
    """The study-shaped summary of ``records`` in ``form``."""
    from . import report, tables

    return report.render_study(tables.build(records, baseline), form, baseline=baseline, **context)
