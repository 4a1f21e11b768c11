"""The efficiency study's outputs: results.md (table) and sst2_vs_flops.png (plot)."""

from __future__ import annotations

from pathlib import Path
from typing import Dict, List


def write_markdown(path: Path, rows: List[Dict], budgets: List[float], meta: Dict) -> None:
    """results.md: one row per objective, one column per budget (median of seeds, range)."""
    head = ["objective"] + [f"{b:.3g} FLOPs" for b in budgets]
    lines = [f"SST-2 dev accuracy (%), median of seeds {meta['seeds']} (min-max), after "
             f"pre-training at equal train FLOPs ({meta['convention']} convention); "
             f"steps in parentheses.", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for objective in meta["objectives"]:
        cells = [objective]
        for b in budgets:
            row = next((r for r in rows if r["objective"] == objective
                        and r["planned_flops"] == b), None)
            cells.append("–" if row is None else
                         f"{row['median']:.2f} ({min(row['accuracies']):.1f}–"
                         f"{max(row['accuracies']):.1f}; {row['steps']} steps)")
        lines.append("| " + " | ".join(cells) + " |")
    random_row = next((r for r in rows if r["objective"] == "random_init"), None)
    if random_row is not None:
        lines += ["", f"Random initialisation (budget 0): {random_row['median']:.2f} "
                      f"({min(random_row['accuracies']):.1f}–{max(random_row['accuracies']):.1f})."]
    lines += ["", "| objective | budget (FLOPs) | steps | run FLOPs | pre-training s | "
                  "accuracies |", "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['objective']} | {r['planned_flops']:.3g} | {r['steps']} | "
                     f"{r['flops']:.3g} | {r['pretrain_seconds']:.0f} | "
                     f"{', '.join(f'{a:.2f}' for a in r['accuracies'])} |")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def write_plot(path: Path, rows: List[Dict], meta: Dict) -> None:
    """SST-2 dev accuracy (median, min-max bars) against pre-training FLOPs, one line per objective."""
    import matplotlib  # the `study` extra; only the plot needs it

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for objective in meta["objectives"]:
        points = sorted((r for r in rows if r["objective"] == objective), key=lambda r: r["flops"])
        if not points:
            continue
        x = [r["flops"] for r in points]
        y = [r["median"] for r in points]
        err = [[r["median"] - min(r["accuracies"]) for r in points],
               [max(r["accuracies"]) - r["median"] for r in points]]
        ax.errorbar(x, y, yerr=err, marker="o", capsize=3, label=objective)
    random_row = next((r for r in rows if r["objective"] == "random_init"), None)
    if random_row is not None:
        ax.axhline(random_row["median"], color="gray", linestyle="--",
                   label="random init (0 FLOPs)")
    ax.set_xscale("log")
    ax.set_xlabel(f"pre-training train FLOPs ({meta['convention']} convention)")
    ax.set_ylabel("SST-2 dev accuracy (%)")
    ax.set_title(f"{meta['model']}: median of {len(meta['seeds'])} fine-tuning seeds")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
