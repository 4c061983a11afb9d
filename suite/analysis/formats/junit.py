"""A comparison as JUnit XML, for CI systems that show test reports: one test case per compared
configuration and metric, a failure for each regression (with the numbers and the t-test's
p-value), a failure for a configuration that no longer passes; skipped: a configuration found in
only one of the stores, a metric measured on one side only, a change beyond the threshold that could
not be tested (fewer than 2 repetitions on a side). A written format of ``compare`` (``--junit FILE``)."""

APPLIES = ("compare",)
OPTION = "--junit"
METAVAR = "FILE.xml"
HELP = ("also write JUnit XML: a test case per configuration and metric, a failure per regression, skipped "
        "where a configuration has no counterpart")
SUFFIXES = None  # any name: each CI system looks where it was told
SUITE = "vnetbench compare"


def _case(suite, classname: str, name: str):
    import xml.etree.ElementTree as ET

    return ET.SubElement(suite, "testcase", classname=classname, name=name, time="0")


def tree(result):
    """The comparison (compare.Comparison) as a JUnit XML tree."""
    import xml.etree.ElementTree as ET

    from .. import format as fmt
    from ..compare import label

    suite = ET.Element("testsuite", name=SUITE)
    failures = skipped = 0
    for change in result.changes:
        case = _case(suite, label(change.key), change.metric.name)
        if change.verdict == "regression":
            failures += 1
            p = change.test.p_value
            unit = f" {change.metric.unit}" if change.metric.unit else ""
            ET.SubElement(case, "failure", type="regression",
                          message=f"{change.metric.name} {fmt.signed_pct(change.change_pct)} "
                                  f"(p = {p:.3g}, threshold {result.threshold_pct:g}%)").text = (
                f"baseline median {fmt.number(change.baseline.median)}{unit} (n={change.baseline.n}), "
                f"current median {fmt.number(change.current.median)}{unit} (n={change.current.n}), "
                f"change {fmt.signed_pct(change.change_pct)}, worse by {fmt.pct(change.worse_pct)}, "
                f"Welch's t-test p = {p:.6g} (alpha {result.alpha:g}), noise floor {fmt.pct(change.noise_floor_pct)}")
        elif change.verdict == "untested":
            skipped += 1
            ET.SubElement(case, "skipped", message=f"{change.metric.name} {fmt.signed_pct(change.change_pct)}, beyond "
                          f"the threshold, but fewer than 2 repetitions on a side: not tested (run with --repeat 3)")
    for key, statuses in result.broken:
        failures += 1
        case = _case(suite, label(key), "passes")
        ET.SubElement(case, "failure", type="broken",
                      message="passed in the baseline, no passing run now").text = \
            ", ".join(f"{n} {status}" for status, n in statuses.items())
    for keys, where in ((result.only_baseline, "baseline"), (result.only_current, "current store")):
        for key in keys:
            skipped += 1
            ET.SubElement(_case(suite, label(key), "passes"), "skipped", message=f"only in the {where}: no counterpart")
    for key, name, why in result.unmatched:
        skipped += 1
        ET.SubElement(_case(suite, label(key), name), "skipped", message=f"{why}: nothing to compare")
    tests = len(result.changes) + len(result.broken) + len(result.only_baseline) + len(result.only_current) + \
        len(result.unmatched)
    suite.set("tests", str(tests))
    suite.set("failures", str(failures))
    suite.set("errors", "0")
    suite.set("skipped", str(skipped))
    root = ET.Element("testsuites", name=SUITE, tests=str(tests), failures=str(failures), errors="0",
                      skipped=str(skipped))
    root.append(suite)
    xml = ET.ElementTree(root)
    ET.indent(xml)
    return xml


def write_compare(path, result) -> str:
    from vnetbench.core.errors import UsageError

    try:
        tree(result).write(path, encoding="utf-8", xml_declaration=True)
    except OSError as exc:
        raise UsageError(f"--junit: cannot write {path}: {exc.strerror}") from None
    return "JUnit XML"
