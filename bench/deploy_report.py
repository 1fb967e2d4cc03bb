"""Put several bench_deploy.py result files side by side (one markdown table, for docs/deploy.md).

    python3 bench/deploy_report.py bench/results/deploy-before.json bench/results/deploy-engine.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

GOALS = ("before issue 25: (b)/(F) <= 2, (a)/(G) <= 1.5, batch cost at the largest N / smallest N <= 1.5; "
         "issue 25: <= 1, <= 1, <= 1.2, at every relay delay D")


def fmt(value, digits=1, unit=" s"):
    return "-" if value is None else "%.*f%s" % (digits, value, unit)


def row(label, s):
    c = s["c_change"]
    total = fmt(c["median_s"]) if s["c_complete"] else "stopped at %.0f s, %d/%d batches" % (
        c["runs"][0]["seconds"], c["runs"][0]["batches"], s["hosts"])
    results = "%d / %d / %s / %d / %d" % (s["a_first"]["results"], s["b_nochange"]["results"],
                                          c["results"] if s["c_complete"] else "-", s["F_ping"]["results"],
                                          s["G_sync_command"]["results"])
    return "| %s | %d | %s | %s | %s | %s | %s | %s | %.2f | %.2f | %s |" % (
        label, s["hosts"], fmt(s["a_first"]["median_s"]), fmt(s["b_nochange"]["median_s"]), total,
        fmt(s["c_batch_interval_s"], 2), fmt(s["F_ping"]["median_s"]), fmt(s["G_sync_command"]["median_s"]),
        s["ratio_b_F"], s["ratio_a_G"], results)


def report(paths):
    results = [json.loads(Path(p).read_text()) for p in paths]
    out = ["| engine | N | (a) first | (b) no-change | (c) rolling change, batch 1 | (c) per batch | (F) ping "
           "| (G) sync+cmd | (b)/(F) | (a)/(G) | host-task results a / b / c / F / G |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    notes = []
    for r in results:
        label = "%s (%s)" % (r["label"], r["collection"]["commit"])
        out += [row(label + delay(s), s) for s in r["sizes"]]
        for g in r["goals"] if isinstance(r["goals"], list) else [r["goals"]]:  # one per delay since issue 25
            notes.append("- %s, measured %s: (b)/(F): %s; (a)/(G): %s; batch cost N=%d / N=%d = %s: %s." % (
                label + delay(g), r["date"], met(g["b_F_met"]), met(g["a_G_met"]), g["batch_hi"], g["batch_lo"],
                fmt(g["batch_ratio_interval"], 2, ""), met(g["batch_met"])))
    return "\n".join(out + [""] + notes) + "\n"


def delay(entry):
    return ", D = %s ms" % entry["delay_ms"] if "delay_ms" in entry else ""


def met(flag):
    return "met" if flag else "**not met**"


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    print(report(sys.argv[1:]), end="")
