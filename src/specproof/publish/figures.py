"""Figures for one study (matplotlib, Agg): PDF and PNG of each.

speedup_vs_k: geometric-mean speedup vs K per pair (greedy, fixed K) with 95% CIs.
acceptance: acceptance by draft position with CIs (greedy, largest fixed K per pair).
verify_cost: target verify cost vs B (one line per target / n_ubatch) and draft step cost.
cost_decomposition: stacked D_real, R_target, X per committed token, per configuration.
agreement: Q matched/total per target and path (grid and qualification).
pit: histogram of the certificate's PIT values (id, rank and, where recorded, q/p-ratio order).
break_even (several sets): the cost model's best speedup over the verify slope and the draft
ratio, with every mapped configuration at its own ratios (analysis.breakeven).
"""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from ..analysis.analyze import StudyAnalysis  # noqa: E402

NAMES = ["speedup_vs_k", "acceptance", "verify_cost", "cost_decomposition", "agreement", "pit"]


def _save(fig, out: Path, name: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    for ext in ("pdf", "png"):
        fig.savefig(out / f"{name}.{ext}", dpi=150, metadata={"CreationDate": None} if ext == "pdf" else None)
    plt.close(fig)


def speedup_vs_k(a: StudyAnalysis, out: Path) -> None:
    fig, ax = plt.subplots(figsize=(6, 3.6))
    rows = [r for r in a.speedups if r["policy"] == "fixed" and r["temperature"] == 0 and r["workload"] == "all"]
    for pair in dict.fromkeys(r["pair"] for r in rows):
        pr = sorted((r for r in rows if r["pair"] == pair), key=lambda r: r["k"])
        k = [r["k"] for r in pr]
        g = np.array([r["gmean_speedup"] for r in pr])
        err = np.array([[r["gmean_speedup"] - r["ci_low"] for r in pr], [r["ci_high"] - r["gmean_speedup"] for r in pr]])
        ax.errorbar(k, g, yerr=err, marker="o", capsize=3, label=pair)
    ax.axhline(1.0, color="k", lw=0.8, ls="--")
    ax.set_xticks(sorted({r["k"] for r in rows}))  # K is an integer: no ticks between the Ks run
    ax.set_xlabel("speculation length K")
    ax.set_ylabel("speedup over target-only (x)")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    _save(fig, out, "speedup_vs_k")


def acceptance(a: StudyAnalysis, out: Path) -> None:
    fig, ax = plt.subplots(figsize=(6, 3.4))
    cc = a.config_costs[(a.config_costs["policy"] == "fixed") & (a.config_costs["temperature"] == 0)]
    for pair, g in cc.groupby("pair", sort=False):
        cfg = g.loc[g["k"].idxmax(), "config"]
        rows = [r for r in a.acceptance if r["pair"] == pair and r["config"] == cfg]
        pos = [r["position"] for r in rows]
        al = np.array([r["alpha"] for r in rows])
        err = np.array([[r["alpha"] - r["ci_low"] for r in rows], [r["ci_high"] - r["alpha"] for r in rows]])
        ax.errorbar(pos, al, yerr=np.clip(err, 0, None), marker="o", capsize=3, label=f"{pair} ({cfg})")
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("draft position i")
    ax.set_ylabel(r"acceptance $\alpha_i$")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    _save(fig, out, "acceptance")


def verify_cost(a: StudyAnalysis, out: Path) -> None:
    fig, ax = plt.subplots(figsize=(6, 3.4))
    m = a.micro
    for name, g in m[m["role"] == "target"].groupby("name", sort=False):
        ub = g["n_ubatch"].iloc[0]  # NaN for torch targets, which have no micro-batch
        ax.plot(g["B"], g["median_ms"], marker=".", label=name if pd.isna(ub) else f"{name} (n_ubatch={int(ub)})")
    for r in m[m["role"] == "draft"].itertuples():
        ax.axhline(r.median_ms, ls=":", color="gray", label=f"draft step {r.name}: {r.median_ms:.1f} ms")
    bs = sorted(m["B"].unique())
    # B is an integer: no ticks between the Bs measured; every second one once they crowd
    ax.set_xticks(bs if len(bs) <= 10 else bs[::2])
    ax.set_xlabel("positions verified in one call, B")
    ax.set_yscale("log")  # one interrupted sample can be 10x the curve: a log axis keeps the curve readable
    ax.set_ylabel("median ms per call (log scale)")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    _save(fig, out, "verify_cost")


def machines_verify_cost(micro: dict, out: Path) -> None:
    """One study frozen on several machines: each target's verify cost v(B)/v(1) vs B,
    one panel per machine (the same targets in the same colours)."""
    fig, axes = plt.subplots(1, len(micro), figsize=(3.2 * len(micro), 2.8), sharey=True, squeeze=False)
    names = list(dict.fromkeys(n for m in micro.values() for n in m[m["role"] == "target"]["name"]))
    colours = {n: plt.cm.tab10(i) for i, n in enumerate(names)}
    for ax, (label, m) in zip(axes[0], micro.items()):
        for name, g in m[m["role"] == "target"].groupby("name", sort=False):
            g = g.sort_values("B")
            ax.plot(g["B"], g["median_ms"] / g["median_ms"].iloc[0], marker=".", color=colours[name], label=name)
        ax.set_title(label, fontsize=8)
        ax.set_xlabel("positions per call, B", fontsize=7)
        ax.tick_params(labelsize=7)
    axes[0][0].set_ylabel("v(B) / v(1)", fontsize=7)
    axes[0][-1].legend(fontsize=6)
    _save(fig, out, "verify_cost_machines")


def break_even_map(points: dict[str, pd.DataFrame], alpha: np.ndarray, alpha_from: str, out: Path) -> None:
    """The cost model's best speedup max_K E[C|K] / (1 + K (s + r)) at ``alpha`` over the
    verify slope s and the draft ratio r (filled contours, the 1x line bold), and each set's
    mapped configurations (``breakeven.map_points``) at their own (s_K, r), coloured by
    their realized speedup on the same scale, one marker per set and target (the legend),
    each point labelled with its K only (the values are in the paper's table).
    ``alpha_from`` names the configuration whose acceptance draws the contours."""
    from ..analysis.breakeven import best_predicted
    allp = pd.concat(points.values(), ignore_index=True)
    s_max = max(0.25, 1.25 * allp["verify_slope"].max())
    r_max = max(0.6, 1.25 * allp["draft_ratio"].max())
    s_grid, r_grid = np.meshgrid(np.linspace(0, s_max, 200), np.linspace(0, r_max, 200))
    best, _ = best_predicted(alpha, s_grid + r_grid)
    fig, ax = plt.subplots(figsize=(6.4, 5.2))
    levels = np.arange(0.2, max(2.0, float(best.max())) + 0.2, 0.2)
    norm = matplotlib.colors.TwoSlopeNorm(vmin=levels[0], vcenter=1.0, vmax=levels[-1])
    filled = ax.contourf(s_grid, r_grid, best, levels=levels, cmap="RdBu", norm=norm, alpha=0.55)
    ax.contour(s_grid, r_grid, best, levels=[1.0], colors="k", linewidths=1.6)
    ax.plot([], [], color="k", lw=1.6, label="model breaks even (1×)")
    fig.colorbar(filled, ax=ax, label="speedup (model: fill; realized: points)")
    _map_points(ax, points, norm)
    ax.set_xlim(0, s_max)
    ax.set_ylim(-0.03 * r_max, r_max)  # a draft that runs no model sits just above 0, visible
    ax.axhline(0, color="0.4", lw=0.5)
    ax.set_xlabel("verify slope per drafted position, (v(K+1)/v(1) − 1)/K, target steps", fontsize=8)
    ax.set_ylabel("draft step / target step, c/v(1)", fontsize=8)
    ax.set_title(f"contours at the acceptance of {alpha_from}", fontsize=6)
    ax.legend(fontsize=5.5, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2, frameon=False)
    _save(fig, out, "break_even")


def _map_points(ax, points: dict[str, pd.DataFrame], norm) -> None:
    """Each set's configurations on the map, one marker per (set, target, draft); a point's
    K is written above it, or below where the previous point of its group lies within 0.03
    of the slope axis (K = 2 and 6 of one target often nearly coincide)."""
    markers = iter(("o", "s", "^", "D", "v", "P", "X", "*", "h", "<", ">", "p", "8", "H", "d", "1"))
    for label, p in points.items():
        for (target, draft), g in p.groupby(["target", "draft"], sort=False):
            ax.scatter(g["verify_slope"], g["draft_ratio"], c=g["gmean"], cmap="RdBu", norm=norm,
                       marker=next(markers), edgecolors="k", s=40, zorder=3, label=f"{target}+{draft} ({label})")
            below, last = False, None
            for r in g.sort_values("verify_slope").itertuples():
                below = last is not None and r.verify_slope - last < 0.03 and not below
                ax.annotate(f"{r.k}", (r.verify_slope, r.draft_ratio), xytext=(0, -9 if below else 5),
                            textcoords="offset points", fontsize=6, ha="center")
                last = r.verify_slope


def break_even_figure(records: dict[str, Path], out: Path) -> None:
    """break_even.{pdf,png} for the record sets ``records`` (set -> its directory): each
    set's mapped configurations, the contours at the first set's acceptance."""
    from ..analysis.analyze import analyze
    from ..analysis.breakeven import map_alpha, map_points
    analyses = {s: analyze(d) for s, d in records.items()}
    points = {s: map_points(a.config_costs, a.micro, a.speedups) for s, a in analyses.items()}
    first = next(iter(records))
    pair, config, alpha = map_alpha(analyses[first].config_costs, points[first])
    break_even_map(points, alpha, f"{pair} {config} ({first})", out)


def cost_decomposition(a: StudyAnalysis, out: Path) -> None:
    cc = a.config_costs
    fig, ax = plt.subplots(figsize=(6, 0.32 * len(cc) + 1.3))
    labels = [f"{r.pair}\n{r.config}" for r in cc.itertuples()]
    y = np.arange(len(cc))
    left = np.zeros(len(cc))
    for term, color in (("D_real", "tab:orange"), ("R_target", "tab:blue"), ("X", "tab:gray")):
        ax.barh(y, cc[term], left=left, color=color, label=term)
        left += cc[term].to_numpy()
    ax.axvline(1.0, color="k", lw=0.8, ls="--")
    ax.set_yticks(y, labels, fontsize=6.5)
    ax.invert_yaxis()
    ax.set_xlabel("cost per committed token, in target-only token costs (< 1 pays off)", fontsize=8)
    # above the axes: inside, it would cover the longest bar
    ax.legend(fontsize=7, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=3, frameon=False)
    _save(fig, out, "cost_decomposition")


def agreement(a: StudyAnalysis, out: Path) -> None:
    c = a.agreement_counts[a.agreement_counts["path"] == "speculative"]
    fig, ax = plt.subplots(figsize=(6, 0.3 * len(c) + 1.2))
    frac = c["Q_matched"] / c["total"]
    labels = [f"{r.source}: {r.target} {r.verify_mode}" for r in c.itertuples()]
    ax.barh(np.arange(len(c)), frac, color=["tab:green" if f == 1 else "tab:red" for f in frac])
    for i, r in enumerate(c.itertuples()):
        ax.text(min(frac.iloc[i], 0.98), i, f" {r.Q_matched}/{r.total}", va="center", ha="right", fontsize=6, color="w")
    ax.set_yticks(np.arange(len(c)), labels, fontsize=6)
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.set_xlabel("Q: runs whose ids equal the sealed reference")
    _save(fig, out, "agreement")


def pit_histogram(orders: dict[str, np.ndarray], out: Path) -> None:
    """One panel per order (title -> PIT values); uniform on [0, 1] under exactness."""
    fig, axes = plt.subplots(1, len(orders), figsize=(2.4 * len(orders) + 1.2, 2.6), sharey=True, squeeze=False)
    axes = axes[0]
    for ax, (title, u) in zip(axes, orders.items()):
        ax.hist(u, bins=20, range=(0, 1), density=True, color="tab:blue", alpha=0.8)
        ax.axhline(1.0, color="k", lw=0.8, ls="--")
        ax.set_title(f"PIT, {title} (n={len(u)})", fontsize=8)
        ax.set_xlabel("u")
    axes[0].set_ylabel("density")
    _save(fig, out, "pit")


def make_all(a: StudyAnalysis, records: Path, out: Path) -> None:
    from ..records import read_parquet
    speedup_vs_k(a, out)
    acceptance(a, out)
    verify_cost(a, out)
    cost_decomposition(a, out)
    agreement(a, out)
    pit = read_parquet(Path(records) / "pit.parquet")
    spec = pit[pit["path"] == "speculative"]
    orders = {"id order": spec["u"], "rank order": spec["u_rank"]}
    if "u_ratio" in spec:
        orders["q/p-ratio order"] = spec["u_ratio"]
    pit_histogram({t: u.to_numpy() for t, u in orders.items()}, out)


# A redrawn figure matches the one a paper shows when at most PIXEL_SHARE of its pixels
# differ by more than PIXEL_STEP (of full scale) in some channel: floating-point noise in
# the analysis may move an antialiased edge by a pixel, a figure drawn from other records
# or another figure moves far more.
PIXEL_STEP, PIXEL_SHARE = 0.1, 0.001


def redraw_error(shown: Path, draw) -> str | None:
    """None when every PNG that ``draw(out)`` makes in a temporary directory is in
    ``shown`` with the same size and the same pixels (within PIXEL_STEP on all but
    PIXEL_SHARE of them); else one line naming the shown file and how it differs."""
    import tempfile

    from matplotlib.image import imread
    with tempfile.TemporaryDirectory() as tmp:
        draw(Path(tmp))
        for png in sorted(Path(tmp).glob("*.png")):
            have = Path(shown) / png.name
            if not have.is_file():
                return f"{have}: missing, though its records draw {png.name}"
            a, b = imread(have), imread(png)
            if a.shape != b.shape:
                return (f"{have}: {a.shape[1]}x{a.shape[0]} pixels, but its records draw "
                        f"{b.shape[1]}x{b.shape[0]}")
            share = float((np.abs(a - b).max(axis=-1) > PIXEL_STEP).mean())
            if share > PIXEL_SHARE:
                return (f"{have}: {share:.1%} of its pixels differ from the figure its records draw; "
                        "the paper shows a figure its records do not make")
    return None
