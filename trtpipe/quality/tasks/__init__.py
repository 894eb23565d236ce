"""Tasks: how one output is judged. Each task streams the baseline's and the candidate's outputs
batch by batch and gives back the metrics users judge that kind of output by.

- classification: top-1/top-5 agreement, logit cosine, accuracy where labels exist, top-1 agreement
  where FP32 is confident;
- embedding: cosine per sample and nearest-neighbour agreement within the set;
- detection: decoded boxes matched to the baseline's (precision, recall, F1, mAP@0.5, box IoU);
- dense: IoU and pixel agreement of thresholded maps;
- sequence: CTC greedy decoding, the share of exactly equal strings and of agreeing characters;
- face: faces and landmarks decoded from a CenterNet-style head's maps, matched to the baseline's;
- generic: cosine, SNR, and the worst channel's cosine and SNR;
- exact: integer and bool outputs (an ArgMax, indices, a mask), the share of samples equal to the baseline's.

Every task also keeps the raw-tensor numbers (cosine, SNR, errors) of its output, shown but judged
only where they are the task's own metric. Degenerate data (a constant baseline, NaN or Inf in the
baseline) raises Degenerate: no verdict can be drawn from it.

The Task base class and those checks are in base.py, each task in its own module; this package
imports them all and makes the tasks a spec asks for (make_tasks).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from trtpipe.errors import TrtpipeError
from trtpipe.quality.stream import stream_of
from trtpipe.quality.tasks.base import Degenerate, Task
from trtpipe.quality.tasks.classification import ClassificationTask
from trtpipe.quality.tasks.dense import DenseTask
from trtpipe.quality.tasks.detection import DetectionTask
from trtpipe.quality.tasks.embedding import EmbeddingTask
from trtpipe.quality.tasks.exact import ExactTask
from trtpipe.quality.tasks.face import FaceTask
from trtpipe.quality.tasks.generic import GenericTask
from trtpipe.quality.tasks.sequence import SequenceTask
from trtpipe.spec import ModelSpec, OutputSpec, is_decision, is_float

if TYPE_CHECKING:
    from trtpipe.data import Batch

__all__ = ["ClassificationTask", "Degenerate", "DenseTask", "DetectionTask", "EmbeddingTask", "ExactTask", "FaceTask",
           "GenericTask", "SequenceTask", "Task", "judge_model", "judged_by", "make_task", "make_tasks", "task_kinds"]


def task_kinds() -> dict[str, type[Task]]:
    """Return every task class by its name (trtpipe.spec.TASKS)."""
    return {kind.name: kind for kind in (ClassificationTask, EmbeddingTask, DetectionTask, DenseTask, SequenceTask,
                                         FaceTask, GenericTask, ExactTask)}


def judged_by(task: str) -> tuple[str, ...]:
    """Return the metrics thresholds may check on an output of `task`."""
    return task_kinds()[task].judged


def make_task(spec: OutputSpec) -> Task:
    """Return the task object for one `[[outputs]]` entry."""
    return task_kinds()[spec.task](spec)


def make_tasks(spec: ModelSpec | None, outputs: Sequence) -> list[Task]:
    """Return the tasks that judge a model with `outputs` (IOSpecs): the spec's `[[outputs]]`, else
    every float output with the spec's task where its shape fits (the rest generic), and every integer or
    bool output no float task reads by exact agreement. Without a task in the spec, the task is the one
    `trtpipe init` guesses from the spec's inputs and these outputs, and each task's `why` says so. A spec
    that carries a state streams each data file: its cosines take each stream as one sample."""
    tasks = _tasks(spec, outputs)
    if spec is not None and any(i.carry for i in spec.inputs):
        for task in tasks:
            task.by_stream(stream_of)
    return tasks


def _tasks(spec: ModelSpec | None, outputs: Sequence) -> list[Task]:
    by_name = {o.name: o for o in outputs}
    if spec is not None and spec.outputs:
        for entry in spec.outputs:
            for name in [entry.name, entry.score_output, entry.class_output, entry.scale_output, entry.offset_output,
                         entry.landmark_output, *(entry.score_outputs or []), *(entry.box_outputs or [])]:
                if name is not None and name not in by_name:
                    raise TrtpipeError(f"--spec: [[outputs]] names '{name}', which the model does not have "
                                       f"(it has {', '.join(by_name)}); fix the name")
            if entry.task == "exact" and not is_decision(by_name[entry.name].dtype):
                raise TrtpipeError(f"--spec: [[outputs]] {entry.name}: task exact judges integer and bool outputs, and "
                                   f"'{entry.name}' is {by_name[entry.name].dtype}, which every precision rounds; "
                                   "use generic")
        return [_face_roles(entry, outputs, "named in the spec's [[outputs]]") if entry.task == "face"
                else _with_why(make_task(entry), "named in the spec's [[outputs]]") for entry in spec.outputs]
    floats = [o for o in outputs if is_float(o.dtype)]
    decided = [o for o in outputs if is_decision(o.dtype)]
    if not floats and not decided:
        raise TrtpipeError(f"the model has no float, integer or bool output to judge (outputs: {', '.join(by_name)}); "
                           "name the outputs that matter in the spec's [[outputs]]")
    task, why = _model_task(spec, outputs)
    tasks = []
    if task == "face":  # one task reads the head's four maps; any other float output is generic
        from trtpipe.quality.tasks.face import face_roles

        roles = face_roles(outputs)
        if roles is None:
            raise TrtpipeError("the spec's task is face, but the outputs are not a heatmap [batch, 1, h, w] with 2, 2 "
                               "and 10-channel maps of its size; name them in [[outputs]] (name: the heatmap, "
                               "scale_output, offset_output, landmark_output)")
        face = _face_roles(OutputSpec(roles["name"], "face"), outputs, why)
        tasks.append(face)
        floats = [o for o in floats if o.name not in face.reads]
        task, why = "generic", f"{why}; not one of the face head's maps, so generic"
    for i, output in enumerate(floats):
        fits = {"classification": len(output.shape) == 2, "embedding": len(output.shape) >= 2,
                "detection": i == 0 and len(output.shape) == 3, "dense": len(output.shape) in (3, 4),
                "sequence": len(output.shape) == 3}
        fit = fits.get(task, True)
        tasks.append(_with_why(make_task(OutputSpec(output.name, task if fit else "generic")),
                               why if fit else f"{why}; its shape {list(output.shape)} does not fit {task}, so generic"))
    read = {name for judged in tasks for name in judged.reads}
    tasks += [_with_why(make_task(OutputSpec(output.name, "exact")), f"{output.dtype}: what the model decided itself "
                        "(an ArgMax, indices, a mask), kept or changed, not rounded")
              for output in decided if output.name not in read]
    return tasks


def _model_task(spec: ModelSpec | None, outputs: Sequence) -> tuple[str, str]:
    """Return the spec's task, or the one `trtpipe init` guesses (starting_spec.guess_task), and why."""
    if spec is not None and spec.task is not None:
        return spec.task, "the spec's task"
    from trtpipe.starting_spec import TensorFacts, guess_task

    facts = [TensorFacts(o.name, list(o.shape), o.dtype) for o in outputs]
    inputs = [TensorFacts(i.name, list(i.shape), i.dtype) for i in (spec.inputs if spec is not None else [])]
    guess = guess_task(inputs, facts)
    return guess.task, f"no task in the spec; inferred as 'trtpipe init' does: {guess.why} (set task to change it)"


def _face_roles(entry: OutputSpec, outputs: Sequence, why: str) -> Task:
    """Return the face task of `entry` (its heatmap), the maps it does not name read from the outputs' shapes."""
    from trtpipe.quality.tasks.face import with_roles

    entry, inferred = with_roles(entry, outputs)
    task = _with_why(make_task(entry), why)
    if inferred:
        task.roles_why = ("inferred from the maps' channels: 1 heatmap, 2 scale, 2 offset (in CenterFace's output "
                          "order), 10 landmarks")
    return task


def _with_why(task: Task, why: str) -> Task:
    task.why = why
    return task


def judge_model(model, tasks, batches: Sequence[Batch], wanted: Sequence[Mapping[str, np.ndarray]],
                name: str = "candidate", spec: ModelSpec | None = None) -> list[tuple[Task, dict]]:
    """Run the ONNX `model` on `batches` in ONNX Runtime and judge it against the baseline's outputs
    `wanted`; return each task with its summary. `tasks(outputs)` makes the judges from the model's
    outputs (IOSpecs). Sensitivity and tuning judge their trial graphs this way, as validate does:
    with the batches' own sample ids (an output's rows are not always its samples: NMS detections), and
    as streams where the `spec` carries a state (trtpipe.quality.stream)."""
    from trtpipe.quality.stream import Stream, carried_inputs
    from trtpipe.runtime.onnxrt import OnnxRunner

    with OnnxRunner(name, model=model) as runner:
        judged = tasks(runner.outputs)
        run = Stream(runner, carried_inputs(spec, runner.outputs))
        for batch, want in zip(batches, wanted):
            got = run(batch)
            for task in judged:
                task.update(got, want, batch.ids, batch.arrays)
    for task in judged:
        task.finish()  # a constant baseline cannot rank or tune either: it says so
    return [(task, task.summary()) for task in judged]
