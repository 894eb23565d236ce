"""Sequences: a CTC recognizer's per-step class scores decoded greedily (argmax per step, repeats
collapsed, the blank dropped), or a tagger's (`decode = "tags"`: argmax per step, only the blank, its
padding, dropped, and with `padding_input` the steps its input marks as padding, or all but the steps of its
`judged_value`: a masked language model's mask), or a tagger that ships a
decoder (`decode = "viterbi"`: the best path through a [[outputs]] transitions file, as a CRF or a tagger
with allowed tag sequences decodes, the steps kept as with tags), judged by whether the candidate reads
the string FP32 reads: the share of samples whose strings agree exactly, and the characters that agree
(1 - character error rate). A model that picks each step's class in the graph (an ArgMax: an integer
output [batch, steps]) is decoded the same way from the classes it picked. With `lengths` (an integer input
or output [batch]: a batch of lines padded to the widest), each sample is read only up to its count of steps."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from trtpipe.errors import TrtpipeError
from trtpipe.quality.tasks.base import Degenerate, Task
from trtpipe.spec import NO_BLANK
from trtpipe.spec.load import Transitions, read_transitions

BLANK = 0  # PaddleOCR's, and PyTorch's nn.CTCLoss default
STEP_AXIS = 1  # [batch, steps, classes]
DECODE = "ctc"
EMISSIONS = "scores"  # viterbi: the output is added as it is (CRF emissions), unless it says probabilities
PADDING_VALUE = 0  # the id after a word in the token inputs seen (slovorez); a mask needs none
CHANGES_KEPT = 12
# log(0) would be -inf, a score only a forbidden transition has; a probability of 0 is 1e-9 instead.
PROBABILITY_FLOOR = 1e-9


def ctc_greedy(best: np.ndarray, blank: int, judged: np.ndarray | None = None) -> list[tuple[int, ...]]:
    """Return each sample's decoded classes from the best class per step [samples, steps], over the steps
    `judged` marks true (each sample's first `lengths`): repeats collapsed, then `blank` dropped (so a blank
    between two equal classes keeps both)."""
    decoded = []
    for row, keep in zip(best, np.ones(best.shape, bool) if judged is None else judged):
        row = row[keep]
        distinct = np.ones(len(row), bool)
        distinct[1:] = row[1:] != row[:-1]
        decoded.append(tuple(int(c) for c in row[distinct] if c != blank))
    return decoded


def kept(best: np.ndarray, blank: int, judged: np.ndarray | None = None) -> list[tuple[int, ...]]:
    """Return each sample's classes from `best` [samples, steps], `blank` and the steps `judged` marks false
    dropped: a tagger's reading (two equal tags in a row are two tokens, not one)."""
    keep = np.ones(best.shape, bool) if judged is None else judged
    return [tuple(int(c) for c in row[k] if c != blank) for row, k in zip(best, keep)]


def viterbi(scores: np.ndarray, transitions: Transitions, judged: np.ndarray | None = None) -> np.ndarray:
    """Return [samples, steps]: the class path with the highest total score through `scores` [samples, steps,
    classes] (per-step log-probabilities or CRF emissions), with start + transition + end scores added.

    A step `judged` marks false is skipped (the path is the best over the judged steps alone, as a decoder
    run on the word without its padding); what the path holds there means nothing.
    """
    samples, steps, classes = scores.shape
    judged = np.ones((samples, steps), bool) if judged is None else judged
    every = np.arange(classes)
    total = np.broadcast_to(transitions.start, (samples, classes)).astype(np.float64)
    begun = np.zeros(samples, bool)  # whether a judged step came yet: the first one takes no transition
    back = np.empty((samples, steps, classes), np.intp)
    for t in range(steps):
        through = total[:, :, None] + transitions.scores  # [samples, from, to]
        came = np.where(begun[:, None], through.argmax(1), every)
        arrived = np.take_along_axis(through, came[:, None, :], 1)[:, 0]
        moved = np.where(begun[:, None], arrived, total) + scores[:, t]
        here = judged[:, t]
        total = np.where(here[:, None], moved, total)
        back[:, t] = np.where(here[:, None], came, every)
        begun |= here
    path = np.empty((samples, steps), np.intp)
    path[:, -1] = (total + transitions.end).argmax(-1)
    rows = np.arange(samples)
    for t in range(steps - 1, 0, -1):
        path[:, t - 1] = back[rows, t, path[:, t]]
    return path


def edit_distance(a: tuple, b: tuple) -> int:
    """Return the Levenshtein distance between two sequences (insertions, deletions, substitutions)."""
    previous = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        current = [i]
        for j, y in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (x != y)))
        previous = current
    return previous[-1]


@dataclass
class Change:
    """A sample whose decoded sequence changed: FP32's and the candidate's classes, and their distance."""

    sample: str
    baseline: tuple[int, ...]
    candidate: tuple[int, ...]
    distance: int


class SequenceTask(Task):
    name = "sequence"
    judged = ("exact_match", "char_agreement")
    primary = "exact_match"

    def __init__(self, spec):
        super().__init__(spec)
        self.blank = spec.blank if spec.blank is not None else BLANK
        self.step_axis = spec.step_axis if spec.step_axis is not None else STEP_AXIS
        self.decode = spec.decode or DECODE
        self.transitions = None if spec.transitions is None else read_transitions(
            spec.transitions, f"--spec: [[outputs]] {self.output}: transitions")
        if self.blank == NO_BLANK and self.decode == "ctc":
            # Without a blank, CTC cannot tell a repeated character from one held over two steps.
            raise TrtpipeError(f"--spec: [[outputs]] {self.output}: blank = \"none\" needs decode = \"tags\" or \"viterbi\" "
                               "(a CTC recognizer has a blank class); give its index, or set decode = \"tags\"")
        self.count = self.exact = self.edits = self.characters = 0
        self.unjudged = 0  # judged_value: samples without a step of that id, which no reader reads
        self.changes: list[Change] = []

    def _steps(self, values: np.ndarray) -> np.ndarray:
        """Return `values` (batch axis first, as Task.update leaves it) as [samples, steps, classes], or as
        [samples, steps] where they are the class picked at each step."""
        batch = self.spec.batch_axis  # None: the output has no batch axis, and update added one in front
        rank = values.ndim if batch is not None else values.ndim - 1  # the output's own rank
        axes = [a for a in range(rank) if a != batch]  # its other axes, in the order update left them
        if values.ndim not in (2, 3) or self.step_axis not in axes:
            raise TrtpipeError(f"--spec: [[outputs]] {self.output}: a sequence is steps x classes per sample (or the "
                               f"class picked at each step), with the steps on step_axis (now {self.step_axis}), but the "
                               f"output has {rank} axes with batch_axis {'none' if batch is None else batch}; fix step_axis "
                               "or batch_axis, or use another task")
        if values.ndim == 2 and self.decode == "viterbi":
            raise TrtpipeError(f"--spec: [[outputs]] {self.output}: viterbi decodes scores, and this output holds the "
                               "class picked at each step; set decode = \"ctc\" or \"tags\"")
        return np.moveaxis(values, 1 + axes.index(self.step_axis), 1)

    def add(self, candidate, baseline, got, want, ids, inputs) -> None:
        baseline, candidate = self._steps(baseline), self._steps(candidate)
        if baseline.ndim == 2 and not np.array_equal(baseline, np.rint(baseline)):
            raise TrtpipeError(f"--spec: [[outputs]] {self.output}: a sequence of one value a step must hold the class "
                               "picked at each step (integers), and FP32 gives fractions; name its per-step scores "
                               "[batch, steps, classes] instead, or use generic")
        if baseline.ndim == 3 and self.blank != NO_BLANK and not 0 <= self.blank < baseline.shape[-1]:
            raise TrtpipeError(f"--spec: [[outputs]] {self.output}: blank {self.blank} is not one of its "
                               f"{baseline.shape[-1]} classes; fix blank")
        judged = None if self.spec.padding_input is None else self._judged(inputs, baseline.shape[:2])
        # Each run is cut at its own lengths, as the model's reader cuts it: a count that changed is a change.
        wanted = self._decoded(baseline, self._within(judged, want, inputs, baseline.shape[:2]))
        gotten = self._decoded(candidate, self._within(judged, got, inputs, candidate.shape[:2]))
        with_steps = [True] * len(wanted) if judged is None or self.spec.judged_value is None else judged.any(axis=1)
        for sample, base, cand, read in zip(ids, wanted, gotten, with_steps):
            if not read:
                self.unjudged += 1
                continue
            distance = edit_distance(base, cand)
            self.count += 1
            self.exact += base == cand
            self.edits += distance
            self.characters += len(base)
            if distance and len(self.changes) < CHANGES_KEPT:
                self.changes.append(Change(sample, base, cand, distance))

    def _decoded(self, steps: np.ndarray, judged: np.ndarray | None) -> list[tuple[int, ...]]:
        """Return each sample's classes from `steps` [samples, steps, classes] (or the class picked at each step
        [samples, steps]), decoded as the spec says."""
        if self.decode != "viterbi":
            best = steps.argmax(-1) if steps.ndim == 3 else np.rint(steps).astype(np.int64)
            return ctc_greedy(best, self.blank, judged) if self.decode == "ctc" else kept(best, self.blank, judged)
        classes = self.transitions.scores.shape[0]
        if steps.shape[-1] != classes:
            raise TrtpipeError(f"--spec: [[outputs]] {self.output}: transitions {self.spec.transitions} is for {classes} "
                               f"classes, but the output has {steps.shape[-1]}; give the model's transition file")
        steps = steps.astype(np.float64)
        if self.spec.emissions == "probabilities":
            steps = np.log(np.maximum(steps, PROBABILITY_FLOOR))
        return kept(viterbi(steps, self.transitions, judged), self.blank, judged)

    def _judged(self, inputs, shape: tuple[int, int]) -> np.ndarray:
        """Return [samples, steps]: True where padding_input is not padding (a mask: where it is true), or where
        it holds judged_value."""
        name = self.spec.padding_input
        if name not in inputs:
            raise TrtpipeError(f"--spec: [[outputs]] {self.output}: padding_input '{name}' is not fed (the inputs are "
                               f"{', '.join(inputs)}); name one of them")
        values = np.asarray(inputs[name])
        if values.shape != shape:
            raise TrtpipeError(f"--spec: [[outputs]] {self.output}: padding_input '{name}' has shape {list(values.shape)}, "
                               f"but the output has {shape[1]} steps for {shape[0]} samples; name the input whose "
                               "steps are the output's")
        if values.dtype == bool:
            return values
        if self.spec.judged_value is not None:
            return values == self.spec.judged_value
        return values != (self.spec.padding_value if self.spec.padding_value is not None else PADDING_VALUE)

    def _within(self, judged: np.ndarray | None, outputs, inputs, shape: tuple[int, int]) -> np.ndarray | None:
        """Return `judged` with each sample's steps from its `lengths` on marked false (the lengths of this
        run's `outputs`, or of the inputs)."""
        name = self.spec.lengths
        if name is None:
            return judged
        source = outputs if name in outputs else inputs if name in inputs else None
        if source is None:
            raise TrtpipeError(f"--spec: [[outputs]] {self.output}: lengths '{name}' is neither an output nor an input "
                               f"of the model (outputs: {', '.join(outputs)}); name the one that counts each sample's steps")
        counts = np.asarray(source[name])
        if counts.dtype.kind not in "iu" or counts.size != shape[0]:
            raise TrtpipeError(f"--spec: [[outputs]] {self.output}: lengths '{name}' holds {counts.dtype} of shape "
                               f"{list(counts.shape)}, and it must count the steps of each of the {shape[0]} samples: "
                               "name an integer input or output [batch]")
        within = np.arange(shape[1])[None, :] < counts.reshape(-1)[:, None]
        return within if judged is None else judged & within

    def finish(self) -> None:
        super().finish()
        if self.unjudged and not self.count:
            raise Degenerate(f"output '{self.output}': no step of the {self.unjudged} samples is judged: padding_input "
                             f"'{self.spec.padding_input}' never holds judged_value {self.spec.judged_value} in them; "
                             "set judged_value to the id the model's reader reads (a mask's id), or check the data")
        if self.count and not self.characters:
            raise Degenerate(f"output '{self.output}': FP32 decodes every one of the {self.count} samples to an empty "
                             f"sequence (blank {self.blank}, steps on axis {self.step_axis}), so no string can be "
                             "compared; likely cause: another blank index or step axis (set blank or step_axis in "
                             "[[outputs]]), or data without text")

    def metrics(self) -> dict[str, float]:
        errors = self.edits / max(self.characters, 1)
        return {"exact_match": self.exact / max(self.count, 1), "char_agreement": max(0.0, 1 - errors),
                "char_error_rate": errors, "changed_sequences": self.count - self.exact,
                "baseline_characters": self.characters, "blank": self.blank, "step_axis": self.step_axis,
                **({"unjudged_samples": self.unjudged} if self.spec.judged_value is not None else {})}

    def described(self) -> dict[str, str]:
        padding = {} if self.spec.padding_input is None else {"padding_input": self.spec.padding_input}
        padding |= {} if self.spec.judged_value is None else {"judged_value": str(self.spec.judged_value)}
        padding |= {} if self.spec.lengths is None else {"lengths": self.spec.lengths}
        path = {} if self.spec.transitions is None else {"transitions": str(self.spec.transitions),
                                                         "emissions": self.spec.emissions or EMISSIONS}
        return {**super().described(), "decode": self.decode, **padding, **path}

    def picture(self):
        from trtpipe.quality.pictures import SequenceChanges

        return SequenceChanges(self.changes, self.count - self.exact, self.count)
