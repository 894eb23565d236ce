"""The gRPC front of `trtpipe serve`: every message bounded, and every inference request checked, before Triton.

Triton 2.51 accepts gRPC messages of up to 2 GB (its frontend sets the largest message size gRPC
allows) and has no option to bound it, so one client could make it hold 2 GB per request before any
shape is checked. This front listens where clients call, with gRPC's own receive limit set to the
largest request a served model takes: gRPC refuses a larger message from its length prefix, before
reading it (measured: a server bounded at 1 MiB stayed at 34 MB resident while refusing 512 MiB).
An inference request within that bound is parsed and its inputs checked against the model's limits
(names, datatypes, shapes, bytes); the rest goes to Triton's gRPC on a loopback port unchanged, and
Triton's answer (or error) comes back unchanged. On the direct stack (direct.py) the front answers
what it accepts itself, with the runners in this process, and nothing goes to Triton.

gRPC's synchronous server gives a call a worker as soon as its headers arrive, and the worker waits
there for the message: 70 calls that never sent one stopped every other client (measured). So every
call reads its messages through `_Waits`: at most WAITING calls wait for a message at once (a new one
cancels the call that has waited longest), a call's message must come within REQUEST_HEAD_S and a
stream's next within IDLE_TIMEOUT_S (each with BODY_MIN_RATE's time for the largest message), and the
other workers are left to answer.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping
from concurrent import futures
from typing import TYPE_CHECKING

import grpc

from trtpipe.errors import TrtpipeError
from trtpipe.serve import guard as http_guard
from trtpipe.serve.guard import HEADER_BYTES, Refused
from trtpipe.serve.limits import RequestLimits, reply_error

if TYPE_CHECKING:
    from trtpipe.serve.direct import DirectModels

SERVICE = "/inference.GRPCInferenceService/"
STREAM_METHOD = SERVICE + "ModelStreamInfer"
INFER_METHOD = SERVICE + "ModelInfer"
# Typed contents (int64_contents and the like) are varints: up to 10 bytes for an 8-byte element.
CONTENT_BYTES_PER_BYTE = 2
OTHER_MESSAGE_BYTES = 1 << 20  # any request but inference
WORKERS = 64  # requests forwarded at once; more wait in gRPC's queue
WAITING = WORKERS // 2  # calls waiting for a client's message at once; the other workers answer
WATCH_EVERY_S = 1.0  # how often calls waiting past their deadline are looked for
NO_DEADLINE_S = 1e9
FORWARDED_METADATA_SKIP = ("user-agent", "grpc-", ":")
GRPC_CODES = {400: "INVALID_ARGUMENT", 404: "NOT_FOUND", 405: "INVALID_ARGUMENT", 501: "UNIMPLEMENTED",
              503: "UNAVAILABLE"}  # a Refused's HTTP status, as gRPC says it


def message_limit(limits: Mapping[str, RequestLimits]) -> int:
    """Return the largest gRPC message the front receives: the largest request of any served model, encoded."""
    largest = max((l.max_bytes for l in limits.values()), default=0)
    return max(OTHER_MESSAGE_BYTES, HEADER_BYTES + CONTENT_BYTES_PER_BYTE * largest)


def infer_problem(request, limits: Mapping[str, RequestLimits]) -> tuple[str, str] | None:
    """Return (gRPC status name, the one line) of what is wrong with a ModelInferRequest, or None."""
    model = limits.get(request.model_name)
    if model is None:
        return "NOT_FOUND", f"Request for unknown model: '{request.model_name}' is not found"
    shapes, datatypes = {}, {}
    for tensor in request.inputs:
        if tensor.name in shapes:
            return "INVALID_ARGUMENT", f"input '{tensor.name}' is given twice"
        shapes[tensor.name], datatypes[tensor.name] = list(tensor.shape), tensor.datatype
    if not shapes:
        return "INVALID_ARGUMENT", f"the request has no inputs; model '{model.model}' takes {', '.join(model.inputs)}"
    problem = model.problem(shapes, datatypes)
    return ("INVALID_ARGUMENT", problem) if problem else None


class GrpcGuard:
    """The front on (host, port), forwarding what it accepts to Triton's gRPC on 127.0.0.1:`upstream`."""

    def __init__(self, host: str, port: int, upstream: int | None, limits: Mapping[str, RequestLimits],
                 local: DirectModels | None = None):
        """`local` (the direct stack) answers what the front accepts in this process; else Triton on `upstream` does."""
        from tritonclient.grpc import service_pb2

        self.request_type = service_pb2.ModelInferRequest
        self.limits = dict(limits)
        self.local = local
        largest = message_limit(self.limits)
        self.channel = None if local else grpc.insecure_channel(f"127.0.0.1:{upstream}", options=[
            ("grpc.max_send_message_length", largest), ("grpc.max_receive_message_length", -1)])
        self.calls: dict[str, grpc.UnaryUnaryMultiCallable] = {}  # one per method: made once, not per call
        self.waits = _Waits(largest)
        self.server = grpc.server(futures.ThreadPoolExecutor(WORKERS, thread_name_prefix="grpc-guard"),
                                  handlers=[_Forward(self)], maximum_concurrent_rpcs=4 * WORKERS,
                                  options=[("grpc.max_receive_message_length", largest),
                                           ("grpc.max_send_message_length", -1), ("grpc.so_reuseport", 0)])
        try:
            self.server.add_insecure_port(f"{host}:{port}")
        except RuntimeError:
            raise TrtpipeError(f"--grpc-port {port}: {host}:{port} is taken (another server?); "
                               "choose a free port with --grpc-port") from None

    def start(self) -> None:
        """Start listening (gRPC serves from its own threads)."""
        self.server.start()

    def stop(self, grace_s: float = 5.0) -> None:
        """Stop listening, let the calls in flight finish (at most `grace_s`), close the channel to Triton."""
        self.server.stop(grace_s).wait()
        self.waits.stop()
        if self.channel is not None:
            self.channel.close()

    def refuse(self, context, problem: tuple[str, str]) -> None:
        """End the call with the problem's status and line (raises, as gRPC's abort does)."""
        context.abort(getattr(grpc.StatusCode, problem[0]), problem[1])

    def metadata(self, context) -> list[tuple[str, str | bytes]]:
        """Return the client's metadata that Triton should see (not gRPC's own keys)."""
        return [(k, v) for k, v in context.invocation_metadata() if not k.startswith(FORWARDED_METADATA_SKIP)]

    def unary(self, method: str, requests: Iterator[bytes], context) -> bytes:
        """Return Triton's answer to one call, refusing an inference request the model does not take."""
        body = self.waits.next(requests, context, stream=False)
        if body is None:
            self.refuse(context, ("INVALID_ARGUMENT", f"{method} takes one message; the call sent none"))
        request = None
        if method == INFER_METHOD:
            request, problem = self._checked(body)
            if problem:
                self.refuse(context, problem)
        if self.local is not None:
            try:
                return self.local.grpc_infer(request) if request is not None else self.local.grpc_call(method, body)
            except Refused as refused:
                self.refuse(context, (GRPC_CODES.get(refused.status, "INVALID_ARGUMENT"), str(refused)))
            except Exception as exc:  # noqa: BLE001 - the direct stack's own bug: this request fails, the server serves on
                self.refuse(context, ("INTERNAL", reply_error(exc)))
        call = self.calls.get(method) or self.calls.setdefault(method, self.channel.unary_unary(method, _same, _same))
        try:
            return call(body, metadata=self.metadata(context), timeout=_deadline(context))
        except grpc.RpcError as exc:
            context.abort(exc.code(), exc.details() or "")

    def stream(self, method: str, requests: Iterator[bytes], context) -> Iterator[bytes]:
        """Forward a stream of inference requests; a bad one ends the stream with its reason once Triton is done."""
        refused: list[tuple[str, str]] = []
        if self.local is not None:
            if method != STREAM_METHOD:
                self.refuse(context, ("UNIMPLEMENTED", f"{method} is not served by trtpipe serve --stack direct"))
            for body in self.waits.each(requests, context):  # answered in order, an error as Triton sends it
                yield self.local.grpc_stream_answer(*self._checked(body))
            return

        def checked() -> Iterator[bytes]:
            for body in self.waits.each(requests, context):
                problem = self._checked(body)[1] if method == STREAM_METHOD else None
                if problem:
                    refused.append(problem)
                    return  # Triton sees the stream end and answers what it already has
                yield body

        call = self.channel.stream_stream(method, _same, _same)
        try:
            yield from call(checked(), metadata=self.metadata(context), timeout=_deadline(context))
        except grpc.RpcError as exc:
            context.abort(exc.code(), exc.details() or "")
        if refused:
            self.refuse(context, refused[0])

    def _checked(self, body: bytes) -> tuple[object, tuple[str, str] | None]:
        """Return the ModelInferRequest in `body` and what is wrong with it (None: nothing)."""
        request = self.request_type()
        try:
            request.ParseFromString(body)
        except Exception:  # noqa: BLE001 - protobuf's DecodeError, whichever implementation is installed
            return None, ("INVALID_ARGUMENT", "the request is not a ModelInferRequest; send the KServe v2 gRPC request")
        return request, infer_problem(request, self.limits)


class _Waits:
    """The calls waiting for a client's message: each since when and until when, the late ones cancelled."""

    def __init__(self, largest: int):
        """`largest`: the most bytes a message may hold, given BODY_MIN_RATE's time on top of each deadline."""
        self.patience_s = {False: http_guard.REQUEST_HEAD_S, True: http_guard.IDLE_TIMEOUT_S}
        self.transfer_s = largest / http_guard.BODY_MIN_RATE
        self.lock = threading.Lock()
        self.calls: dict[grpc.ServicerContext, tuple[float, float]] = {}  # context: (since, deadline)
        self.stopped = threading.Event()
        threading.Thread(target=self._watch, name="grpc-guard-waits", daemon=True).start()

    def next(self, requests: Iterator[bytes], context, stream: bool) -> bytes | None:
        """Return the call's next message, None when there is none; cancel the call that has waited longest
        when WAITING wait already, and this one when its message is late (its read then raises RpcError)."""
        now, oldest = time.monotonic(), None
        with self.lock:
            if len(self.calls) >= WAITING:
                oldest = min(self.calls, key=lambda c: self.calls[c][0])
                del self.calls[oldest]
            self.calls[context] = (now, now + self.patience_s[stream] + self.transfer_s)
        if oldest is not None:
            oldest.cancel()
        try:
            return next(requests, None)
        finally:
            with self.lock:
                self.calls.pop(context, None)

    def each(self, requests: Iterator[bytes], context) -> Iterator[bytes]:
        """Yield a stream's messages, each read as `next` reads it."""
        while (body := self.next(requests, context, stream=True)) is not None:
            yield body

    def stop(self) -> None:
        self.stopped.set()

    def _watch(self) -> None:
        while not self.stopped.wait(WATCH_EVERY_S):
            now = time.monotonic()
            with self.lock:
                late = [context for context, (_, deadline) in self.calls.items() if deadline < now]
                for context in late:
                    del self.calls[context]
            for context in late:
                context.cancel()


def _deadline(context) -> float | None:
    """Return the seconds the client gave the call, None when it gave no deadline (gRPC says ~2^63 then)."""
    remaining = context.time_remaining()
    return remaining if remaining is not None and remaining < NO_DEADLINE_S else None


def _same(data: bytes) -> bytes:
    return data


class _Forward(grpc.GenericRpcHandler):
    """A gRPC handler for every method: each is forwarded as bytes (ModelStreamInfer as a stream)."""

    def __init__(self, guard: GrpcGuard):
        self.guard = guard

    def service(self, details):
        method = details.method
        if method == STREAM_METHOD:
            return grpc.stream_stream_rpc_method_handler(lambda requests, context: self.guard.stream(method, requests, context),
                                                         _same, _same)
        # Read as a stream of one: the handler then holds the call's context while its message comes (see _Waits).
        return grpc.stream_unary_rpc_method_handler(lambda requests, context: self.guard.unary(method, requests, context),
                                                    _same, _same)
