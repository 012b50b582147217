#!/usr/bin/env python3
"""readme_table.py: the README's performance table, made from RESULTS.md.

Why this exists: the project asks that the README's performance table be
regenerated from tests/bench/RESULTS.md, and a table copied by hand drifts
from the run it claims to show. `make bench` calls this after a full run;
`--check` (run by `make lint`) fails when the README no longer matches the
RESULTS.md beside it. The README line groups rows of RESULTS.md (the
scales of one metric on one line); SPEC below says which rows each line
takes, by the start of their metric cell, and in what order.

  readme_table.py RESULTS.md README.md           rewrite the README's block
  readme_table.py --check RESULTS.md README.md   exit 1 if it would change

The block lies between "<!-- bench-table:begin -->" and
"<!-- bench-table:end -->". A row SPEC names that RESULTS.md lacks (a
section that failed) shows as "not measured" rather than stopping the run.
"""
import re
import sys

BEGIN = "<!-- bench-table:begin -->"
END = "<!-- bench-table:end -->"

DATAPATH = ("same path, no table", None)

# (README metric, [row prefixes], what Sluice's column shows: "value" or
# "ratio", anchor: None or (text before the values, "value" | "ratio" |
# "value+ratio"), target text, the scale name of each row for "no at ...")
SPEC = [
    ("sandbox create / delete, median",
     ["Sandbox create, median (n=", "Sandbox delete, median (n="],
     "value", ("`ip` + `nft -f`: ", "value"), "≤ 10 ms", None),
    ("create / delete with 1,000 sandboxes present",
     ["Sandbox create, median, 1,000 present", "Sandbox delete, median, 1,000 present"],
     "value", None, "≤ 10 ms", None),
    ("TCP throughput, 1 / 100 / 1,000 sandboxes",
     ["TCP throughput (iperf3), 1 sandbox |", "TCP throughput (iperf3), 100 sandboxes |",
      "TCP throughput (iperf3), 1,000 sandboxes (10 learned) |"],
     "ratio", DATAPATH, "≥ 0.95×", ["1", "100", "1,000"]),
    ("TCP throughput with 10,000 / 100,000 learned elements",
     ["TCP throughput (iperf3), 1,000 sandboxes, 10,000 learned |",
      "TCP throughput (iperf3), 1,000 sandboxes, 100,000 learned |"],
     "ratio", DATAPATH, "≥ 0.95×", ["10,000", "100,000"]),
    ("TCP connections/s, 1 / 100 / 1,000 sandboxes",
     ["TCP connections/s, 1 sandbox |", "TCP connections/s, 100 sandboxes |",
      "TCP connections/s, 1,000 sandboxes (10 learned) |"],
     "ratio", DATAPATH, "≥ 0.95×", ["1", "100", "1,000"]),
    ("TCP connections/s with 10,000 / 100,000 learned",
     ["TCP connections/s, 1,000 sandboxes, 10,000 learned |",
      "TCP connections/s, 1,000 sandboxes, 100,000 learned |"],
     "ratio", DATAPATH, "≥ 0.95×", ["10,000", "100,000"]),
    ("TCP connections/s through any nftables filter (the floor: a forward hook with 2 rules, no Sluice table), 1 sandbox",
     ["TCP connections/s, 1 sandbox, any nftables filter"],
     "ratio", DATAPATH, "(reported)", None),
    ("`fw_learn` of one DNS answer, 10 / 10,000 / 100,000 learned",
     ["fw_learn of 1 element (one DNS answer), median, 10 learned",
      "fw_learn of 1 element (one DNS answer), median, 10,000 learned",
      "fw_learn of 1 element (one DNS answer), median, 100,000 learned"],
     "value", None, "-", None),
    ("DNS: added latency of an allowed query (with insertion), 1 / 1,000 sandboxes",
     ["Added latency over the upstream directly, 1 sandbox",
      "Added latency over the upstream directly, 1,000 sandboxes"],
     "value", ("upstream directly", None), "≤ 200 µs", ["1", "1,000"]),
    ("DNS: queries/s with insertions at capacity (each proxy's best of 32, 64 and 128 outstanding), names never repeating (no cache can answer), 1 / 1,000 sandboxes",
     ["Queries/s with insertions, 1 sandbox, every name new, at capacity",
      "Queries/s with insertions, 1,000 sandboxes, every name new, at capacity"],
     "value", ("dnsmasq `--nftset`: ", "value+ratio"), "≥ 2×", ["1", "1,000"]),
    ("DNS: the same at 32 outstanding only, 1 / 1,000 sandboxes",
     ["Queries/s with insertions, 1 sandbox, every name new (no cache can answer; 32",
      "Queries/s with insertions, 1,000 sandboxes, every name new (no cache can answer; 32"],
     "value", ("dnsmasq `--nftset`: ", "value+ratio"), "(reported)", None),
    ("DNS: queries/s with insertions, 5,000 repeating names (Sluice's cache, re-learning each answer; dnsmasq uncached), 1 / 1,000 sandboxes",
     ["Queries/s with insertions, 1 sandbox, 5000 names repeating",
      "Queries/s with insertions, 1,000 sandboxes, 5000 names repeating"],
     "value", ("dnsmasq `--nftset`: ", "value+ratio"), "-", None),
    ("DNS: the upstream alone at the same load (the ceiling of both proxies), 1 / 1,000 sandboxes",
     ["Queries/s of the upstream queried directly, 1 sandbox",
      "Queries/s of the upstream queried directly, 1,000 sandboxes"],
     "value", None, "-", None),
    ("MCP `tools/call` added latency over the same server over Streamable HTTP (durable record included), 1 / 1,000 sandboxes",
     ["tools/call added latency over the same server directly, both over Streamable HTTP, incl. the durable record, 1 sandbox",
      "tools/call added latency over the same server directly, both over Streamable HTTP, incl. the durable record, 1,000 sandboxes"],
     "value", None, "≤ 1 ms", ["1", "1,000"]),
    ("MCP `tools/call` added latency over the server over stdio (durable record included), 1 / 1,000 sandboxes",
     ["tools/call added latency over direct, incl. the durable record, 1 sandbox",
      "tools/call added latency over direct, incl. the durable record, 1,000 sandboxes"],
     "value", ("supergateway adds ", "value+ratio"), "≤ 1 ms", ["1", "1,000"]),
    ("MCP calls/s, one session, 1 / 1,000 sandboxes",
     ["tools/call per second, 1 session, sequential, 1 sandbox",
      "tools/call per second, 1 session, sequential, 1,000 sandboxes"],
     "value", ("supergateway: ", "value+ratio"), "-", None),
    ("durable audit records/s",
     ["Durable records/s (group commit)"],
     "value", ("SQLite, one commit per record: ", "value"), "≥ 50,000", None),
    ("durable record latency, median",
     ["Durable record latency, median"],
     "value", ("one commit per record: ", "value"), "-", None),
    ("audit verification, records/s",
     ["Verification, records/s"],
     "value", None, "≥ 500,000", None),
    ("MCP calls/s, 32 sessions at once, fast upstream",
     ["tools/call per second, 32 sessions calling at once"],
     "value", ("supergateway: ", "value+ratio"), "≥ 3×", None),
    ("MCP bridge process CPU per call (32 sessions)",
     ["bridge process CPU per tools/call"],
     "value", None, "≤ 150 µs", None),
    ("name gate: time added by reading the name, TLS",
     ["Added by reading the name"],
     "value", ("`check: none`", None), "≤ 100 µs", None),
    ("name gate: new TLS connections/s vs `check: none`",
     ["New TLS connections/s, one client"],
     "ratio", ("`check: none`", None), "≥ 0.8×", None),
    ("`sluiced` memory, all processes: idle (RSS) / 1,000 idle sandboxes (summed Pss)",
     ["sluiced resident memory (VmRSS, all its processes), idle |",
      "sluiced memory of all its processes together (Pss summed), 1,000 idle sandboxes"],
     "value", None, "≤ 40 MiB with 1,000 idle", None),
    ("fleet: a budgeted call, added over no budget, shared (PostgreSQL)",
     ["tools/call added latency of the budget over no budget"],
     "value", ("local (SQLite): ", "value+ratio"), "-", None),
    ("fleet: shared reservations/s, one host / two hosts on one row",
     ["shared reservations per second, one host", "shared reservations per second, two hosts"],
     "value", ("SQLite, one upsert per commit: ", "value"), "-", None),
    ("fleet: a call approved on another host, released after the decision",
     ["a call approved on another host"],
     "value", None, "≤ 100 ms", None),
    ("HTTP GET of 1 MiB from a sandbox",
     ["HTTP GET of a 1 MiB object"],
     "value", ("`@anthropic-ai/sandbox-runtime` proxy: ", "value"), "-", None),
]


def cells(line):
    """The cells of a Markdown table row, or None for any other line."""
    line = line.rstrip("\n")
    if not line.startswith("| ") or not line.endswith(" |"):
        return None
    return [c.strip() for c in line[2:-2].split(" | ")]


def median_of(cell):
    """"1.34 ms (0.97–5.66)" -> "1.34 ms"; a cell without a range as is."""
    return re.sub(r" \([^()]*\)$", "", cell).strip()


def join_same_unit(vals):
    """["1.34 ms", "0.77 ms"] -> "1.34 / 0.77 ms"; mixed units kept whole."""
    units = [v.split(" ", 1)[1] if " " in v else "" for v in vals]
    if len(set(units)) == 1 and units[0]:
        return " / ".join(v.split(" ", 1)[0] for v in vals) + " " + units[0]
    return " / ".join(vals)


def ratio_parts(cell):
    """"1.01× (pairs 0.89–1.16)" -> ("1.01×", "0.89–1.16"); no pairs -> ""."""
    m = re.match(r"^(\S+×)(?: \(pairs ([^()]*)\))?$", cell)
    if not m:
        return cell, ""
    return m.group(1), m.group(2) or ""


def read_rows(path):
    rows = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            c = cells(line)
            if c is None or len(c) != 6 or c[0] in ("metric", "---"):
                continue
            rows.append(c)
    return rows


def find(rows, prefix):
    # A prefix ending in " |" must match the whole metric cell.
    exact = prefix.endswith(" |")
    want = prefix[:-2] if exact else prefix
    for r in rows:
        if (r[0] == want) if exact else r[0].startswith(want):
            return r
    return None


def line_for(rows, spec):
    label, prefixes, show, anchor, target, scales = spec
    found = [find(rows, p) for p in prefixes]
    if any(r is None for r in found):
        return f"| {label} | not measured in this run | - | {target} | - |"
    if show == "ratio":
        rs = [ratio_parts(r[3]) for r in found]
        sluice = " / ".join(x for x, _ in rs)
        pairs = [p for _, p in rs if p]
        # Data-path ratios are against the unfiltered path.
        sluice += " unfiltered" if anchor == DATAPATH else ""
        if pairs:
            sluice += " (pairs " + " / ".join(pairs) + ")"
    else:
        sluice = join_same_unit([median_of(r[1]) for r in found])
    if anchor is None:
        anch = "-"
    else:
        text, what = anchor
        if what is None:
            anch = text
        else:
            vals = [median_of(r[2].split(": ", 1)[-1]) for r in found]
            anch = text + join_same_unit(vals)
            if what == "value+ratio":
                rs = [ratio_parts(r[3]) for r in found]
                extra = " / ".join(x for x, _ in rs)
                pairs = [p for _, p in rs if p]
                if pairs:
                    extra += "; pairs " + " / ".join(pairs)
                anch += f" (Sluice ÷ anchor {extra})"
    # Rows without a target ("-") beside judged ones say nothing.
    mets = [r[5] for r in found]
    judged = [i for i, m in enumerate(mets) if m != "-"]
    missed = [i for i in judged if mets[i] != "yes"]
    if not judged:
        met = "-"
    elif not missed:
        met = "yes"
    else:
        # "no data": the measurement failed, which is not a miss.
        met = "**no**" if any(mets[i] != "no data" for i in missed) else "**no data**"
        if scales and len(missed) < len(judged):
            met += " at " + " and ".join(scales[i] for i in missed)
    return f"| {label} | {sluice} | {anch} | {target} | {met} |"


def header(path):
    cmd = started = took = ""
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = re.match(r"^- Command: `(.*)` \(run as root", line)
            if m:
                cmd = m.group(1)
            m = re.match(r"^- Started: (.*); the benchmarks took (.*) s$", line)
            if m:
                started, took = m.group(1), m.group(2)
    return cmd, started, took


def block(results):
    rows = read_rows(results)
    cmd, started, took = header(results)
    out = [BEGIN,
           "The latest run, on a shared 2-core VM",
           f"(`{cmd}`, started {started}, {took} s; data-path pairs vary by",
           "±10–30 % between runs on this machine, so rows near 0.95× flip",
           "between runs). This table is made from `tests/bench/RESULTS.md` by",
           "`tests/bench/readme_table.py`, which `make bench` runs:",
           "",
           "| metric | Sluice | anchor | target | met? |",
           "|---|---|---|---|---|"]
    out += [line_for(rows, s) for s in SPEC]
    out.append(END)
    return "\n".join(out) + "\n"


def main(argv):
    check = len(argv) > 1 and argv[1] == "--check"
    args = argv[2:] if check else argv[1:]
    if len(args) != 2:
        sys.stderr.write("usage: readme_table.py [--check] RESULTS.md README.md\n")
        return 2
    results, readme = args
    with open(readme, encoding="utf-8") as f:
        text = f.read()
    a, b = text.find(BEGIN), text.find(END)
    if a < 0 or b < a:
        sys.stderr.write(f"readme_table.py: {readme} has no {BEGIN} ... {END} block\n")
        return 2
    new = text[:a] + block(results) + text[b + len(END) + 1:]
    if check:
        if new != text:
            sys.stderr.write(f"readme_table.py: the table in {readme} does not match {results};"
                             " run: python3 tests/bench/readme_table.py"
                             f" {results} {readme}\n")
            return 1
        return 0
    if new != text:
        with open(readme, "w", encoding="utf-8") as f:
            f.write(new)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
