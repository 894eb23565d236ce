"""One execution of a batched model: the requests Triton hands over together, each answered.

Triton's dynamic batcher gives a model instance several requests at once. They run as one batch
when they stack (same shape but dimension 0); if that batch fails, each request runs alone, so one
bad request (an index out of range, a value the model rejects) fails alone and the others are
answered. A request outside the model's limits is refused before it reaches the runner.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from trtpipe.serve.limits import RequestLimits, reply_error

Feeds = Mapping[str, np.ndarray]


def run_requests(runner: Callable[[Feeds], dict[str, np.ndarray]], feeds: list[Feeds], limits: RequestLimits,
                 batching: bool) -> list[dict[str, np.ndarray] | str]:
    """Return per request its outputs, or the one line that says why it failed.

    Requests within the limits run as one batch when they stack; a batch that fails runs again one
    request at a time, so that one bad request (an index out of range) fails alone."""
    results: list = [limits.problem({n: list(a.shape) for n, a in f.items()}) for f in feeds]
    good = [i for i, r in enumerate(results) if r is None]
    names = list(feeds[0]) if feeds else []
    if batching and len(good) > 1 and all(len({feeds[i][n].shape[1:] for i in good}) == 1 for n in names):
        merged = _run_merged(runner, [feeds[i] for i in good], names)
        if merged is not None:
            for i, outputs in zip(good, merged):
                results[i] = outputs
            return results
    for i in good:
        try:
            results[i] = runner(feeds[i])
        except Exception as exc:  # noqa: BLE001 - the client gets the message, the model keeps serving
            results[i] = reply_error(exc)
    return results


def _run_merged(runner, feeds: list[Feeds], names: list[str]) -> list[dict[str, np.ndarray]] | None:
    """Return each request's slice of one batched run, or None when the batch failed."""
    try:
        merged = runner({n: np.concatenate([f[n] for f in feeds]) for n in names})
    except Exception:  # noqa: BLE001 - some request of the batch is bad: the caller runs each alone
        return None
    ends = np.cumsum([len(f[names[0]]) for f in feeds])
    return [{k: v[end - len(f[names[0]]):end] for k, v in merged.items()} for f, end in zip(feeds, ends)]
