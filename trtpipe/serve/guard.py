"""The HTTP front of `trtpipe serve`: every request checked before Triton's HTTP frontend sees it.

Triton 2.51 (the server nvidia-pytriton 0.7.0 bundles) sizes the buffer of a JSON input from the
shape the request declares, before it checks that shape against the model (http_server.cc,
`serialized.resize(element_cnt * dtype size)`): one request with a shape of 10^12 elements aborts the
whole server with std::bad_alloc, and no option of that version bounds it (Triton 2.59 checks the
count, later versions add --http-max-input-size). Its gRPC frontend sizes inputs from the bytes
received, and the model then checks the shapes, so gRPC goes to Triton directly.

So Triton's HTTP listens on a loopback port of its own, and this front listens where clients call:
it refuses a body larger than the model's largest request could be (or a compressed one that
inflates past that), then reads the JSON header of an inference request and refuses any input
whose shape, datatype or name the model's limits do not allow, with the one-line JSON error Triton
itself would send; everything else is forwarded unchanged, over kept-alive connections to Triton.

A client that holds connections without finishing a request (slowloris: connections opened and left
idle, a request line or headers sent a byte at a time, a body that never ends, an answer never
read) is bounded three ways: a request's line and headers must arrive within REQUEST_HEAD_S of its
first byte, its body and its answer move at BODY_MIN_RATE or faster (after REQUEST_HEAD_S of
grace), and once MAX_CONNECTIONS are open a new client closes the connection that has waited
longest for its request (idle or still sending) instead of being turned away; only when every
connection is being answered is it refused, with a 503.

Triton 2.51 does not exit while an HTTP connection to it is open, idle or not: it waits out its
whole exit timeout (measured: 61 s for one idle keep-alive connection). So stopping starts with
`drain()`, which closes the idle connections to Triton and closes the others once their answer is in.

On the direct stack (direct.py) the same front, with the same checks, hands what it accepts to an
`answer` in this process instead of Triton.
"""

from __future__ import annotations

import contextlib
import http.client
import http.server
import io
import json
import re
import socket
import sys
import threading
import time
import zlib
from collections.abc import Callable, Mapping

from trtpipe.serve.limits import RequestLimits, reply_error

INFER_PATH = re.compile(r"/v2/models/([^/]+)(?:/versions/[^/]+)?/infer/?")
ABSOLUTE_FORM = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^/?#]*")  # http://host of a request line's absolute-form URL
URL_CHARACTERS = re.compile(r"[\x21-\x7e]*")  # what a request line's URL may hold: printable ASCII, no space
HEADER_BYTES = 64 << 10  # room for the JSON around the data, names and parameters
JSON_BYTES_PER_ELEMENT = 32  # "-1.2345678901234567e-308," is 25
OTHER_BODY_BYTES = 1 << 20  # any request but inference (there is no other endpoint with a large body)
DRAIN_BYTES = 16 << 20  # a refused body up to this size is read, so that the client sees the reply
MAX_CONNECTIONS = 256
LINGER_S = 1.0  # at most this long a refused connection's unread bytes are read before it closes
IDLE_TIMEOUT_S = 60  # a kept-alive connection may wait this long for its next request's first byte
REQUEST_HEAD_S = 10  # from a request's first byte to the end of its headers (and the grace on its body)
BODY_MIN_RATE = 64 << 10  # bytes a second a body must arrive at, and an answer leave at, at the least (10 MB: 160 s)
EVICT_WAIT_S = 1.0  # how long a new client waits for the connection it closed to be let go
HOP_HEADERS = {"connection", "keep-alive", "transfer-encoding", "content-length", "content-encoding", "host",
               "proxy-connection", "te", "upgrade", "trailer"}
DECODERS = {"gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}


# What answers an accepted request in the front's process: (command, path, headers, body, the inference
# request's JSON header as the front parsed it, else None) -> (status, headers, body).
Answer = Callable[[str, str, Mapping[str, str], bytes, dict | None], tuple[int, list[tuple[str, str]], bytes]]


class Refused(Exception):
    """A request the front answers itself: HTTP status and the one-line reason."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def body_limit(limits: RequestLimits | None) -> int:
    """Return the most bytes a request body may hold: the model's largest request written as JSON."""
    if limits is None:
        return OTHER_BODY_BYTES
    return HEADER_BYTES + JSON_BYTES_PER_ELEMENT * limits.max_bytes


def check_infer(body: bytes, header_length: int | None, limits: RequestLimits) -> dict:
    """Return the JSON header of the inference request in `body`; raise Refused when the model does not take it."""
    header = body if header_length is None else body[:header_length]
    try:
        request = json.loads(header)
    except (ValueError, RecursionError):
        raise Refused(400, "the request body is not JSON (or nests too deep); send the KServe v2 JSON request") from None
    inputs = request.get("inputs") if isinstance(request, dict) else None
    if not isinstance(inputs, list) or not inputs:
        raise Refused(400, "the request has no 'inputs' list; send the KServe v2 JSON request")
    shapes, datatypes = {}, {}
    for entry in inputs:
        name = entry.get("name") if isinstance(entry, dict) else None
        if not isinstance(name, str):
            raise Refused(400, "every input needs a 'name', a 'shape' and a 'datatype'")
        if name in shapes:
            raise Refused(400, f"input '{name}' is given twice")
        shapes[name], datatypes[name] = entry.get("shape"), entry.get("datatype")
    problem = limits.problem(shapes, datatypes)
    if problem:
        raise Refused(400, problem)
    return request


def byte_count(header: str, text: str) -> int:
    """Return the number of bytes a header gives; raise Refused unless it is digits alone (int() would also
    take a sign, spaces and underscores, which a proxy in front may read otherwise)."""
    if not (text.isascii() and text.isdigit()):
        raise Refused(400, f"{header} {text[:32]!r} is not a number of bytes; send the length in digits")
    return int(text)


def _decoded(body: bytes, encoding: str, limit: int) -> bytes:
    """Return a compressed body inflated, refusing one that inflates past `limit` bytes."""
    if encoding not in DECODERS:
        raise Refused(415, f"Content-Encoding {encoding}: send gzip, deflate or an uncompressed body")
    inflater = zlib.decompressobj(DECODERS[encoding])
    try:
        out = inflater.decompress(body, limit + 1)
    except zlib.error:
        raise Refused(400, f"the body is not valid {encoding}") from None
    if len(out) > limit or inflater.unconsumed_tail:
        raise Refused(413, f"the request inflates to more than {limit} bytes, more than the model takes")
    return out


class Guard(http.server.ThreadingHTTPServer):
    """The front on (host, port), forwarding what it accepts to Triton's HTTP on 127.0.0.1:`upstream`."""

    daemon_threads = True
    allow_reuse_address = True
    # socketserver's backlog of 5 dropped the handshakes of a burst of clients, each then retried a second later
    request_queue_size = socket.SOMAXCONN

    def __init__(self, host: str, port: int, upstream: int | None, limits: Mapping[str, RequestLimits],
                 answer: Answer | None = None):
        """`answer` (the direct stack) answers what the front accepts in this process; else Triton on `upstream` does."""
        self.upstream = upstream
        self.answer = answer
        self.limits = dict(limits)
        self.busy = 0  # requests read and not yet answered (stopping waits for them)
        self.connections = threading.BoundedSemaphore(MAX_CONNECTIONS)
        self.lock = threading.Lock()
        # Each open connection: since when it has waited for or been sending its request; None while answered.
        self.waiting: dict[socket.socket, float | None] = {}
        self.idle: list[http.client.HTTPConnection] = []  # connections to Triton, kept alive between requests
        self.draining = False
        super().__init__((host, port), _Handler)

    def take(self) -> http.client.HTTPConnection:
        """Return an idle connection to Triton, or a new one."""
        with self.lock:
            if self.idle:
                return self.idle.pop()
        return http.client.HTTPConnection("127.0.0.1", self.upstream, timeout=None)

    def give(self, connection: http.client.HTTPConnection) -> None:
        """Keep `connection` for the next request, or close it when stopping."""
        with self.lock:
            if not self.draining:
                self.idle.append(connection)
                return
        connection.close()

    def wait_answered(self, timeout_s: float) -> None:
        """Wait (at most `timeout_s`) until every request read has been answered."""
        deadline = time.monotonic() + timeout_s
        while self.busy and time.monotonic() < deadline:
            time.sleep(0.01)

    def drain(self) -> None:
        """Close every idle connection to Triton, and each busy one once its answer is in (Triton can then exit)."""
        with self.lock:
            self.draining = True
            idle, self.idle = self.idle, []
        for connection in idle:
            connection.close()

    def process_request(self, request, client_address):
        room = self.connections.acquire(blocking=False) or (
            self._close_longest_waiting() and self.connections.acquire(timeout=EVICT_WAIT_S))
        if not room:
            self._refuse_busy(request)
            return
        with self.lock:
            self.waiting[request] = time.monotonic()
        super().process_request(request, client_address)

    def handle_error(self, request, client_address):
        if isinstance(sys.exc_info()[1], OSError):
            return  # the client went away (or was closed for another): nothing of the server's to report
        super().handle_error(request, client_address)

    def _close_longest_waiting(self) -> bool:
        """Close the connection that has waited longest for its request; False when every one is being answered."""
        with self.lock:
            waiting = [(since, id(c), c) for c, since in self.waiting.items() if since is not None]
            if not waiting:
                return False
            connection = min(waiting)[2]
            self.waiting.pop(connection)
        with contextlib.suppress(OSError):
            connection.shutdown(socket.SHUT_RDWR)  # its read returns, and its thread lets the connection go
        return True

    def _refuse_busy(self, request: socket.socket) -> None:
        payload = json.dumps({"error": f"the server is answering {MAX_CONNECTIONS} connections at once; retry"}).encode()
        head = (f"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(payload)}\r\nConnection: close\r\n\r\n").encode()
        with contextlib.suppress(OSError):
            request.settimeout(EVICT_WAIT_S)
            request.sendall(head + payload)
        self.shutdown_request(request)

    def waits(self, connection: socket.socket, since: float | None) -> bool:
        """Record that `connection` waits for a request since `since` (None: it is being answered), unless it
        was waiting already (since it was accepted); False when it was closed for another client meanwhile."""
        with self.lock:
            if connection not in self.waiting:
                return False
            if since is None or self.waiting[connection] is None:
                self.waiting[connection] = since
            return True

    def process_request_thread(self, request, client_address):
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self.lock:
                self.waiting.pop(request, None)
            self.connections.release()


class _Timed(io.RawIOBase):
    """A connection's reads and writes, each bounded by the deadline of the request being read or the answer
    being written (None: the idle timeout, while it waits for a request)."""

    def __init__(self, connection: socket.socket):
        self.connection = connection
        self.deadline: float | None = None

    def readable(self) -> bool:
        return True

    def writable(self) -> bool:
        return True

    def until(self, seconds: float | None) -> None:
        """Bound what is read or written from now on to `seconds` (None: the idle timeout)."""
        self.deadline = None if seconds is None else time.monotonic() + seconds

    def readinto(self, buffer) -> int:
        self._bound()
        return self.connection.recv_into(buffer)

    def write(self, data) -> int:
        self._bound()
        return self.connection.send(data)

    def _bound(self) -> None:
        timeout = IDLE_TIMEOUT_S
        if self.deadline is not None:
            timeout = self.deadline - time.monotonic()
            if timeout <= 0:
                raise TimeoutError("the request or its answer was not sent in time")
        self.connection.settimeout(min(timeout, IDLE_TIMEOUT_S))


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = IDLE_TIMEOUT_S
    # An answer leaves in one write (handle_one_request flushes after each request), and without Nagle's
    # delay: headers and body written apart waited for the client's delayed ACK, 44 ms a request.
    wbufsize = 1 << 16
    disable_nagle_algorithm = True
    server: Guard

    def log_message(self, *args) -> None:
        pass  # Triton keeps the log; a front that logs every request costs time

    def setup(self) -> None:
        super().setup()
        self.timed = _Timed(self.connection)
        self.rfile = io.BufferedReader(self.timed, 1 << 16)
        self.wfile = io.BufferedWriter(self.timed, self.wbufsize)

    def handle_one_request(self) -> None:
        self.timed.until(None)
        if not self.server.waits(self.connection, time.monotonic()):
            self.close_connection = True
            return
        try:
            if not self.rfile.peek(1):  # the idle wait, up to IDLE_TIMEOUT_S for the next request's first byte
                self.close_connection = True
                return
        except (TimeoutError, OSError, ValueError):
            self.close_connection = True
            return
        self.timed.until(REQUEST_HEAD_S)
        super().handle_one_request()

    def parse_request(self) -> bool:
        """Read the request line and headers as http.server does, then the URL as one path for both stacks:
        an absolute-form URL (http://host/v2/...) is its path, as a server must take it; a URL with
        characters no URL holds is refused here, not forwarded for Triton's client to choke on."""
        if not super().parse_request():
            return False
        absolute = ABSOLUTE_FORM.match(self.path)
        if absolute:
            self.path = self.path[absolute.end():] or "/"
        if not URL_CHARACTERS.fullmatch(self.path):
            self.send_error(400, "the URL holds a space, a control or a non-ASCII character (percent-encode it)")
            return False
        return True

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """http.server's own refusals (a request line, URL or headers it will not read) as the one-line JSON
        error every other refusal is, not its HTML page."""
        line = reply_error(message or self.responses.get(code, ("refused",))[0])
        self._reply(code, {"error": f"{line}; send a KServe v2 request"}, close=True)
        self.wfile.flush()
        # Read what the client is still sending before closing: closing on unread bytes resets the
        # connection, and the reset can reach the client before the reply does.
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_WR)
            deadline, left = time.monotonic() + LINGER_S, DRAIN_BYTES
            while left > 0 and (wait := deadline - time.monotonic()) > 0:
                self.connection.settimeout(wait)
                chunk = self.connection.recv(min(left, 1 << 16))
                if not chunk:
                    break
                left -= len(chunk)

    def do_GET(self) -> None:
        self._forward()

    do_POST = do_HEAD = do_PUT = do_DELETE = do_GET

    def _forward(self) -> None:
        with self.server.lock:
            self.server.busy += 1
        try:
            self._answer()
        finally:
            with self.server.lock:
                self.server.busy -= 1

    def _answer(self) -> None:
        try:
            body, header = self._checked_body()
        except Refused as refused:
            self._reply(refused.status, {"error": str(refused)}, close=True)
            return
        except TimeoutError:
            self._reply(408, {"error": f"the request body came slower than {BODY_MIN_RATE} bytes a second; "
                                       "send it at once"}, close=True)
            return
        if not self.server.waits(self.connection, None):
            return  # closed for another client while its body came in
        try:
            if self.server.answer is not None:
                status, headers, payload = self.server.answer(self.command, self.path, self.headers, body, header)
            else:
                status, headers, payload = self._upstream(body)
        except Refused as refused:
            self._reply(refused.status, {"error": str(refused)})
            return
        except (OSError, http.client.HTTPException) as exc:
            self._reply(503, {"error": f"the server is not answering ({reply_error(exc)})"})
            return
        except Exception as exc:  # the direct stack's own bug: this request fails, the server serves on
            if self.server.answer is None:
                raise
            self._reply(500, {"error": reply_error(exc)})
            return
        self.timed.until(REQUEST_HEAD_S + len(payload) / BODY_MIN_RATE)
        self.send_response(status)
        for key, value in headers:
            if key.lower() not in HOP_HEADERS:
                self.send_header(key, value)
        self.send_header("Content-Length", str(len(payload)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)

    def _checked_body(self) -> tuple[bytes, dict | None]:
        """Return the body and, of an inference request, its JSON header (parsed once, here); raise Refused."""
        match = INFER_PATH.fullmatch(self.path.split("?", 1)[0])
        limits = self.server.limits.get(match.group(1)) if match else None
        if match and limits is None:
            raise Refused(404, f"Request for unknown model: '{match.group(1)}' is not found")
        if self.headers.get("Transfer-Encoding"):
            raise Refused(411, "send the body with a Content-Length, not chunked")
        lengths = {value.strip() for value in self.headers.get_all("Content-Length") or ()}
        if len(lengths) > 1:  # which one a proxy in front believed is anyone's guess: request smuggling
            raise Refused(400, "the request has Content-Length headers that differ; send one")
        length = byte_count("Content-Length", lengths.pop() if lengths else "0")
        limit = body_limit(limits)
        read = min(length, max(limit, DRAIN_BYTES))  # the most this request's body is read of
        self.timed.until(REQUEST_HEAD_S + read / BODY_MIN_RATE)
        if length > limit:
            if 0 < length <= DRAIN_BYTES:
                self.rfile.read(length)
            raise Refused(413, f"the request body is {length} bytes, more than the {limit} the model takes")
        body = self.rfile.read(length) if length else b""
        if len(body) < length:
            raise Refused(400, f"the body ended after {len(body)} of its Content-Length {length} bytes")
        encoding = (self.headers.get("Content-Encoding") or "identity").strip().lower()
        if encoding != "identity":
            body = _decoded(body, encoding, limit)
        if not match:
            return body, None
        header = self.headers.get("Inference-Header-Content-Length")
        header_length = byte_count("Inference-Header-Content-Length", header.strip()) if header is not None else None
        if header_length is not None and not 0 < header_length <= len(body):
            raise Refused(400, f"Inference-Header-Content-Length {header_length} does not fit the body")
        return body, check_infer(body, header_length, limits)

    def _upstream(self, body: bytes) -> tuple[int, list[tuple[str, str]], bytes]:
        """Send the request to Triton over a kept-alive connection; return its answer."""
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_HEADERS}
        headers["Content-Length"] = str(len(body))
        for attempt in (0, 1):
            connection = self.server.take()
            try:
                connection.request(self.command, self.path, body=body if body or self.command == "POST" else None,
                                   headers=headers)
                response = connection.getresponse()
                answer = response.status, response.getheaders(), response.read()
            except (OSError, http.client.HTTPException):
                connection.close()
                if attempt:
                    raise  # a kept-alive connection Triton closed is retried once on a fresh one
                continue
            self.server.give(connection)
            if self.server.draining:
                self.close_connection = True  # the client's next request finds the server stopping
            return answer
        raise AssertionError("unreachable")

    def _reply(self, status: int, message: dict, close: bool = False) -> None:
        """Answer with a JSON error; `close` when the body may be unread (the connection cannot be reused)."""
        payload = json.dumps(message).encode()
        self.timed.until(REQUEST_HEAD_S + len(payload) / BODY_MIN_RATE)
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        if close:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.write(payload)
