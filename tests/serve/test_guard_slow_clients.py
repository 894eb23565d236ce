"""The HTTP and gRPC fronts against clients that hold connections without finishing a request (slowloris),
in this process with the deadlines and the limits made small: a request's headers, its body and its answer
are bounded in time, a full house closes the connection that has waited longest rather than turn a client
away, gRPC calls that send no message are cancelled and make room, and the metrics port reads a few
connections at once."""

import json
import socket
import threading
import time

import pytest

from trtpipe.serve import guard

HEAD_S = 0.3
LARGE = 64 << 20  # an answer larger than the sockets' buffers hold


@pytest.fixture
def front(monkeypatch):
    """A Guard of 4 connections whose answer is "ok", or blocks while `hold` is clear; yields (port, hold, and a
    semaphore released as each request reaches the answer)."""
    monkeypatch.setattr(guard, "REQUEST_HEAD_S", HEAD_S)
    monkeypatch.setattr(guard, "BODY_MIN_RATE", 10_000)
    monkeypatch.setattr(guard, "MAX_CONNECTIONS", 4)
    monkeypatch.setattr(guard, "EVICT_WAIT_S", 2.0)
    hold, answering = threading.Event(), threading.Semaphore(0)
    hold.set()

    def answer(command, path, headers, body, header):
        answering.release()
        hold.wait(30)
        if path == "/v2/large":
            return 200, [("Content-Type", "application/octet-stream")], bytes(LARGE)
        return 200, [("Content-Type", "text/plain")], b"ok:" + body

    server = guard.Guard("127.0.0.1", 0, None, {}, answer=answer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1], hold, answering
    hold.set()
    server.shutdown()
    server.server_close()


def connect(port, sent=b""):
    connection = socket.create_connection(("127.0.0.1", port), timeout=10)
    if sent:
        connection.sendall(sent)
    return connection


def reply(connection) -> bytes:
    """Return everything the server sends before it closes the connection (or 10 s pass)."""
    chunks = []
    while chunk := connection.recv(1 << 16):
        chunks.append(chunk)
    return b"".join(chunks)


def request(body=b"x", close=True):
    return (b"POST /v2/health/ready HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n%s\r\n" %
            (len(body), b"Connection: close\r\n" if close else b"")) + body


def test_a_request_whose_headers_or_body_come_too_slowly_is_closed(front):
    port, _, _ = front
    began = time.monotonic()
    headers = connect(port, b"POST /v2/health/ready HTTP/1.1\r\nHo")  # headers stopped partway
    assert reply(headers) == b""
    assert time.monotonic() - began < HEAD_S + 2
    body = connect(port, request(b"x" * 4000)[:-3900])  # 10000 bytes a second asked: 4000 in 0.7 s
    answer = reply(body)
    head, payload = answer.split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.1 408"), answer
    assert "slower than 10000 bytes a second" in json.loads(payload)["error"] and b"\n" not in payload
    idle = connect(port)  # an idle connection waits for its first byte longer than a request's deadline
    time.sleep(HEAD_S * 3)
    idle.sendall(request(b"late"))
    assert reply(idle).endswith(b"ok:late")


def test_an_answer_the_client_does_not_read_is_given_up(front, monkeypatch):
    port, _, _ = front
    monkeypatch.setattr(guard, "BODY_MIN_RATE", 1 << 30)  # 64 MiB may take 0.3 s and 1/16 s more
    reader = connect(port, b"GET /v2/large HTTP/1.1\r\nHost: t\r\n\r\n")
    time.sleep(2)  # the client reads nothing meanwhile; then it reads what the server sent before it gave up
    received = 0
    while chunk := reader.recv(1 << 20):
        received += len(chunk)
    assert 0 < received < LARGE, received
    assert reply(connect(port, request(b"next"))).endswith(b"ok:next")


def test_a_full_house_closes_the_longest_waiting_connection_and_refuses_only_when_all_are_answered(front):
    port, hold, answering = front
    waiting = []
    for _ in range(4):
        waiting.append(connect(port))
        time.sleep(0.05)  # each its own moment: the first has waited longest
    kept = []
    for client in range(3):  # each new client (kept alive after its answer) closes the one that has waited longest
        kept.append(connect(port, request(b"%d" % client, close=False)))
        assert kept[-1].recv(1 << 16).endswith(b"ok:%d" % client)
        assert waiting[client].recv(1 << 16) == b"", client
    for client in kept + waiting[3:]:
        client.close()
    hold.clear()  # four requests being answered: nothing to close, the fifth client is refused with one line
    answered = [connect(port, request(b"held")) for _ in range(4)]
    assert all(answering.acquire(timeout=10) for _ in range(3 + 4))  # the 3 kept clients' answers, then these 4
    refused = reply(connect(port, request()))
    assert refused.startswith(b"HTTP/1.1 503"), refused
    assert "answering 4 connections at once" in json.loads(refused.split(b"\r\n\r\n", 1)[1])["error"]
    hold.set()
    assert all(reply(c).endswith(b"ok:held") for c in answered)


class _Echo:
    """The direct stack's place behind the gRPC front: any call but inference answered with its own bytes."""

    def grpc_call(self, method, body):
        return body

    def grpc_stream_answer(self, request, problem):
        return b"streamed"


@pytest.fixture
def grpc_front(monkeypatch):
    """A GrpcGuard whose calls may wait 0.3 s for a message, two at a time; yields its port."""
    pytest.importorskip("tritonclient.grpc", reason="tritonclient is not installed: pip install 'trtpipe[serve]'")
    from trtpipe.serve import grpc_guard

    monkeypatch.setattr(guard, "REQUEST_HEAD_S", HEAD_S)
    monkeypatch.setattr(guard, "BODY_MIN_RATE", 1 << 40)
    monkeypatch.setattr(grpc_guard, "WAITING", 2)
    monkeypatch.setattr(grpc_guard, "WATCH_EVERY_S", 0.05)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    front = grpc_guard.GrpcGuard("127.0.0.1", port, None, {}, local=_Echo())
    front.start()
    yield port
    front.stop(0)


def test_grpc_calls_that_send_no_message_are_cancelled_and_make_room(grpc_front):
    import grpc

    never = threading.Event()

    def nothing():
        never.wait(30)
        yield from ()

    with grpc.insecure_channel(f"127.0.0.1:{grpc_front}") as channel:
        live = "/inference.GRPCInferenceService/ServerLive"
        held = channel.stream_unary(live, lambda b: b, lambda b: b).future(nothing())
        began = time.monotonic()
        assert held.exception(10).code() == grpc.StatusCode.CANCELLED  # its message did not come within 0.3 s
        assert time.monotonic() - began < HEAD_S + 3
        unary = channel.unary_unary(live, lambda b: b, lambda b: b)
        assert unary(b"\x08\x01", timeout=5) == b"\x08\x01"  # a call that sends its message is answered
        first = channel.stream_unary(live, lambda b: b, lambda b: b).future(nothing())
        time.sleep(0.05)
        stream = channel.stream_stream("/inference.GRPCInferenceService/ModelStreamInfer", lambda b: b, lambda b: b)
        second = stream(nothing())
        time.sleep(0.05)
        third = channel.stream_unary(live, lambda b: b, lambda b: b).future(nothing())  # two wait: the first goes
        assert first.exception(2).code() == grpc.StatusCode.CANCELLED
        assert not third.done()
        fourth = channel.stream_unary(live, lambda b: b, lambda b: b).future(nothing())  # then the idle stream
        with pytest.raises(grpc.RpcError) as idle:
            next(second)
        assert idle.value.code() == grpc.StatusCode.CANCELLED and not fourth.done()
        never.set()


def test_connections_to_the_metrics_port_hold_no_more_than_its_few_threads(monkeypatch):
    from trtpipe.serve import direct

    monkeypatch.setattr(direct, "METRICS_CONNECTIONS", 2)

    class Counters:  # the one call MetricsServer makes of the served models
        def metrics_text(self):
            return "nv_inference_count 0\n"

    server = direct.MetricsServer("127.0.0.1", 0, Counters())
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    try:
        before = threading.active_count()
        held = [connect(port, b"GET /met") for _ in range(20)]  # none finishes its request
        time.sleep(0.2)
        assert threading.active_count() <= before + 2  # before, a thread each, for as long as they liked
        for connection in held:
            connection.close()
        monkeypatch.setattr(direct._MetricsHandler, "timeout", HEAD_S)
        held = [connect(port, b"GET /met") for _ in range(2)]  # the whole room, given up after HEAD_S
        time.sleep(HEAD_S * 3)
        scrape = connect(port, b"GET /metrics HTTP/1.0\r\n\r\n")
        assert reply(scrape).startswith(b"HTTP/1.0 200")
        for connection in held:
            connection.close()
    finally:
        server.shutdown()
        server.server_close()
