"""The one picture per output that fits its task: what each task keeps to draw, and the drawing.

Each picture is a small dataclass the task fills while it streams; `draw` returns a matplotlib
figure (or None when there is nothing to show) and write_report saves it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def _figure(plt, panels: int, size: float = 3.2, columns: int = 4):
    """Return a figure and `panels` axes in rows of `columns`, with room for a title above."""
    rows = -(-panels // columns)
    width = min(panels, columns)
    fig, axes = plt.subplots(rows, width, figsize=(size * width, (size + 0.5) * rows + 0.4), squeeze=False)
    axes = axes.ravel()
    for ax in axes[panels:]:
        ax.axis("off")
    return fig, axes[:panels]


def _title(fig, text: str) -> None:
    fig.suptitle(text, fontsize=9)
    fig.tight_layout(rect=(0, 0, 1, 0.93))


@dataclass
class ErrorHistogram:
    """Generic outputs: the distribution of |candidate - baseline| (sampled elements)."""

    errors: np.ndarray

    def draw(self, plt, title: str):
        fig, (ax,) = _figure(plt, 1, 4.5)
        positive = self.errors[self.errors > 0]
        if positive.size:
            ax.hist(np.log10(positive), bins=60, color="#4c72b0")
        ax.set_xlabel("log10 |candidate − baseline|")
        ax.set_ylabel("elements (sampled)")
        ax.set_title(title, fontsize=9)
        fig.tight_layout()
        return fig


@dataclass
class CosineHistogram:
    """Embeddings: the distribution of per-sample cosines with the baseline."""

    cosines: np.ndarray

    def draw(self, plt, title: str):
        fig, (ax,) = _figure(plt, 1, 4.5)
        ax.hist(np.clip(1 - self.cosines, 1e-9, None), bins=np.logspace(-9, 0, 55), color="#4c72b0")
        ax.set_xscale("log")
        ax.set_xlabel("1 − cosine with FP32 (per sample; left is better)")
        ax.set_ylabel("samples")
        ax.set_title(title, fontsize=9)
        fig.tight_layout()
        return fig


@dataclass
class Flips:
    """Classification: the samples whose top-1 class flipped (trtpipe.quality.tasks.classification.Flip)."""

    flips: list
    flipped: int
    samples: int

    def draw(self, plt, title: str):
        if not self.flips:
            return None
        fig, axes = _figure(plt, len(self.flips), 2.4)
        for ax, flip in zip(axes, self.flips):
            if flip.image is not None:
                ax.imshow(flip.image, cmap="gray" if flip.image.ndim == 2 else None)
            ax.set_xticks([]), ax.set_yticks([])
            ax.set_title(f"{flip.sample[:18]}\nFP32 {flip.baseline_class} ({flip.baseline_p:.2f})\n"
                         f"→ {flip.candidate_class} ({flip.candidate_p:.2f})", fontsize=7)
        _title(fig, f"{title}: top-1 flipped on {self.flipped} of {self.samples} samples (first {len(self.flips)})")
        return fig


@dataclass
class SequenceChanges:
    """Sequences: the samples whose decoded sequence changed (tasks.sequence.Change), FP32's above the candidate's;
    an integer output's samples that changed (tasks.exact), their first values."""

    changes: list
    changed: int
    samples: int
    what: str = "decoded sequence"
    counted: str = "edit"  # what a Change's distance counts: an integer output's changed values are no edits
    values: str = "class indices"

    def draw(self, plt, title: str):
        if not self.changes:
            return None
        fig, (ax,) = _figure(plt, 1, 9.0, columns=1)
        ax.axis("off")
        rows = [f"{c.sample[:24]:24}  FP32      {' '.join(map(str, c.baseline))}\n{'':24}  candidate {' '.join(map(str, c.candidate))}"
                f"   ({c.distance} {self.counted}{'s' if c.distance > 1 else ''})" for c in self.changes]
        ax.text(0, 1, "\n".join(rows), family="monospace", fontsize=7, va="top", transform=ax.transAxes)
        _title(fig, f"{title}: {self.what} changed on {self.changed} of {self.samples} samples "
                    f"(first {len(self.changes)}, {self.values})")
        return fig


@dataclass
class BoxSamples:
    """Detection: the samples with the most unmatched boxes (tasks.detection.DetectionSample); faces
    (tasks.face.Faces) also draw their landmarks."""

    samples: list
    what: str = "boxes"

    def draw(self, plt, title: str):
        if not self.samples:
            return None
        from matplotlib.patches import Rectangle

        fig, axes = _figure(plt, len(self.samples), 3.4)
        for ax, sample in zip(axes, self.samples):
            if sample.image is not None:
                ax.imshow(sample.image, cmap="gray" if sample.image.ndim == 2 else None)
            for dets, color, style in ((sample.baseline, "#2ca02c", "-"), (sample.candidate, "#d62728", "--")):
                for (x1, y1, x2, y2), cls in zip(dets.boxes, dets.classes):
                    ax.add_patch(Rectangle((x1, y1), x2 - x1, y2 - y1, fill=False, edgecolor=color, linestyle=style, lw=1.2))
                    ax.text(x1, y1, str(cls), color=color, fontsize=6, va="bottom")
                landmarks = getattr(dets, "landmarks", None)
                if landmarks is not None and len(landmarks):
                    ax.scatter(landmarks[..., 0].ravel(), landmarks[..., 1].ravel(), s=5, color=color,
                               marker="o" if style == "-" else "x", linewidths=0.8)
            if sample.image is None:
                ax.autoscale()
                ax.invert_yaxis()
            ax.set_xticks([]), ax.set_yticks([])
            ax.set_title(f"{sample.sample[:20]}: {sample.misses} unmatched", fontsize=7)
        _title(fig, f"{title}: FP32 {self.what} green, candidate red dashed (the samples with most unmatched {self.what})")
        return fig


@dataclass
class MaskPair:
    """Dense maps: the sample with the lowest IoU, baseline mask, candidate mask and where they differ."""

    worst: object  # tasks.dense.MaskSample or None

    def draw(self, plt, title: str):
        if self.worst is None:
            return None
        fig, axes = _figure(plt, 3, 3.0)
        w = self.worst
        for ax, image, name in zip(axes, (w.baseline, w.candidate, w.baseline != w.candidate),
                                   ("FP32 mask", "candidate mask", "differs")):
            ax.imshow(image, cmap="gray" if name == "differs" else "viridis", interpolation="nearest")
            ax.set_title(name, fontsize=8)
            ax.set_xticks([]), ax.set_yticks([])
        _title(fig, f"{title}: the sample with the lowest IoU, {w.iou:.3f}, {w.sample}")
        return fig
