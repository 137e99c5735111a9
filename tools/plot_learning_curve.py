"""Plot a training run's learning curve from its TensorBoard events.

Run: python tools/plot_learning_curve.py runs/<run> [runs/<resumed run> ...] [--out docs/learning_curve.png]
     python tools/plot_learning_curve.py --seeds runs/<seed 1> runs/<seed 2> ... [--out F]

Several run directories (a run and its resumptions) are joined in step order;
with ``--seeds`` they are independent runs instead (training seeds, variants),
and one panel overlays each run's held-out ratio eval/jct_vs_lyra.

Two panels: the held-out evaluation (policy and Lyra mean JCT on the same test
windows, and their ratio eval/jct_vs_lyra), and the per-episode training JCT
(custom/jct_mean_s).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: E402


def scalars(run: Path) -> dict[str, list[tuple[int, float]]]:
    acc = EventAccumulator(str(run), size_guidance={"scalars": 0})
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def plot_seeds(runs: list[Path], out: Path) -> None:
    """One curve of eval/jct_vs_lyra per run, labelled by the run's directory name."""
    fig, ax = plt.subplots(figsize=(7, 4))
    for run in runs:
        points = sorted(scalars(run).get("eval/jct_vs_lyra", []))
        if points:
            steps, values = zip(*points)
            ax.plot(steps, values, marker="o", label=run.name)
    ax.axhline(1.0, color="gray", linestyle="--", label="Lyra heuristic")
    ax.set_xlabel("environment steps")
    ax.set_ylabel("policy / Lyra mean JCT, held-out (lower is better)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    print(f"wrote {out}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("runs", type=Path, nargs="+")
    parser.add_argument("--out", type=Path, default=Path("docs/learning_curve.png"))
    parser.add_argument("--seeds", action="store_true", help="independent runs: overlay their held-out ratios")
    args = parser.parse_args()
    if args.seeds:
        plot_seeds(args.runs, args.out)
        return
    data: dict[str, list[tuple[int, float]]] = {}
    for run in args.runs:
        for tag, points in scalars(run).items():
            data.setdefault(tag, []).extend(points)
    data = {tag: sorted(points) for tag, points in data.items()}
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    for tag, label in (("eval/jct_policy", "policy"), ("eval/jct_lyra", "Lyra heuristic")):
        if tag in data:
            steps, values = zip(*data[tag])
            ax1.plot(steps, values, marker="o", label=label)
    ax1.set_xlabel("environment steps")
    ax1.set_ylabel("mean JCT on held-out test windows (s)")
    if "eval/jct_vs_lyra" in data:
        twin = ax1.twinx()
        steps, values = zip(*data["eval/jct_vs_lyra"])
        twin.plot(steps, values, color="gray", linestyle="--", label="policy / Lyra")
        twin.set_ylabel("policy / Lyra (lower is better)")
        twin.legend(loc="upper right")
    ax1.legend(loc="upper left")
    ax1.set_title("held-out evaluation")
    if "custom/jct_mean_s" in data:
        steps, values = zip(*data["custom/jct_mean_s"])
        ax2.plot(steps, values, alpha=0.4, label="per episode")
        window = 20
        if len(values) >= window:
            smooth = [sum(values[i - window:i]) / window for i in range(window, len(values) + 1)]
            ax2.plot(steps[window - 1:], smooth, label=f"mean of {window}")
        ax2.legend()
    ax2.set_xlabel("environment steps")
    ax2.set_ylabel("mean JCT of a training episode (s)")
    ax2.set_title("training windows")
    fig.suptitle(" + ".join(run.name for run in args.runs))
    fig.tight_layout()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=100)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
