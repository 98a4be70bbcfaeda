#!/usr/bin/env python3
"""An AG-UI agent written the way the official Python SDK's users write one, as the upstream
of the end-to-end benchmark's SDK scenario (benches/e2e/sdk.rs starts it).

FastAPI validates the request as the SDK's `RunAgentInput`; the answer is a Starlette
`StreamingResponse` over an async generator that yields `EventEncoder().encode(event)` for
SDK event objects (`ag_ui.core`), served by uvicorn over HTTP/1.1 chunked transfer encoding:
one event per HTTP chunk, each handed to the socket as it is yielded. The run is
`RUN_STARTED`, `TEXT_MESSAGE_START`, N `TEXT_MESSAGE_CONTENT` whose delta carries the bench's
timing marker (`t=<19-digit ns>;s=<6-digit seq>;`, padded to --delta-bytes), then
`TEXT_MESSAGE_END` and `RUN_FINISHED`.

Prints `sdk agent listening on http://127.0.0.1:PORT` once it accepts connections.
"""

import argparse
import socket
import sys
import time

import uvicorn
from ag_ui.core import (
    RunAgentInput,
    RunFinishedEvent,
    RunStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
)
from ag_ui.encoder import EventEncoder
from fastapi import FastAPI
from fastapi.responses import StreamingResponse

PADDING = " lorem ipsum dolor sit amet consectetur adipiscing elit sed do"


def marker(seq: int, size: int) -> str:
    """The bench's marker (benches/e2e/marker.rs) padded to `size` bytes."""
    text = f"t={time.time_ns():019d};s={seq % 1_000_000:06d};"
    if len(text) < size:
        text += (PADDING * (size // len(PADDING) + 1))[: size - len(text)]
    return text


def app(events: int, delta_bytes: int) -> FastAPI:
    agent = FastAPI()

    @agent.post("/")
    async def run(input_data: RunAgentInput) -> StreamingResponse:
        encoder = EventEncoder()

        async def stream():
            yield encoder.encode(
                RunStartedEvent(thread_id=input_data.thread_id, run_id=input_data.run_id)
            )
            yield encoder.encode(TextMessageStartEvent(message_id="m1", role="assistant"))
            for seq in range(events):
                yield encoder.encode(
                    TextMessageContentEvent(message_id="m1", delta=marker(seq, delta_bytes))
                )
            yield encoder.encode(TextMessageEndEvent(message_id="m1"))
            yield encoder.encode(
                RunFinishedEvent(thread_id=input_data.thread_id, run_id=input_data.run_id)
            )

        return StreamingResponse(stream(), media_type=encoder.get_content_type())

    return agent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=50_000, help="content events per run")
    parser.add_argument("--delta-bytes", type=int, default=33, help="size of each text delta")
    args = parser.parse_args()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(1024)
    sock.set_inheritable(True)
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        app(args.events, args.delta_bytes),
        log_level="warning",
        access_log=False,
        http="h11",
        loop="asyncio",
    )
    server = uvicorn.Server(config)
    print(f"sdk agent listening on http://127.0.0.1:{port}", flush=True)
    server.run(sockets=[sock])
    sys.exit(0)


if __name__ == "__main__":
    main()
