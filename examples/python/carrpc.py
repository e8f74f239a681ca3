"""A small JSON-RPC 2.0 client for car-server over WebSocket (websockets)."""

import asyncio
import itertools
import json
import os
import sys

import websockets


def token_path(name="auth-token"):
    """The token file the daemon writes, found as the daemon finds it."""
    if os.environ.get("CAR_TOKEN_FILE") and name == "auth-token":
        return os.environ["CAR_TOKEN_FILE"]
    if os.environ.get("CAR_HOME"):
        base = os.path.join(os.environ["CAR_HOME"], "ai.parslee.car")
    elif sys.platform == "darwin":
        base = os.path.expanduser("~/Library/Application Support/ai.parslee.car")
    elif os.path.isabs(os.environ.get("XDG_RUNTIME_DIR", "")):
        base = os.path.join(os.environ["XDG_RUNTIME_DIR"], "ai.parslee.car")
    else:
        base = os.path.expanduser("~/.config/ai.parslee.car")
    return os.path.join(base, name)


def read_token(name="auth-token"):
    with open(token_path(name)) as f:
        return f.read().strip()


class RPCError(Exception):
    def __init__(self, error):
        super().__init__(f"{error.get('code')}: {error.get('message')}")
        self.code = error.get("code")


class Client:
    """Requests go out with call(); the daemon's requests and notifications
    go to the handlers registered with on_request() and on_notification()."""

    def __init__(self, ws):
        self.ws = ws
        self.ids = itertools.count(1)
        self.pending = {}
        self.requests = {}
        self.notifications = {}
        self.tasks = set()
        self.reader = asyncio.create_task(self._read())

    @classmethod
    async def connect(cls, url=None):
        url = url or os.environ.get("CAR_URL", "ws://127.0.0.1:9100/")
        return cls(await websockets.connect(url, max_size=16 << 20))

    def on_request(self, method, handler):
        self.requests[method] = handler

    def on_notification(self, method, handler):
        self.notifications[method] = handler

    async def call(self, method, params=None):
        id_ = next(self.ids)
        fut = asyncio.get_running_loop().create_future()
        self.pending[id_] = fut
        msg = {"jsonrpc": "2.0", "id": id_, "method": method}
        if params is not None:
            msg["params"] = params
        await self.ws.send(json.dumps(msg))
        return await fut

    async def close(self):
        await self.ws.close()
        self.reader.cancel()

    async def _read(self):
        try:
            async for frame in self.ws:
                msg = json.loads(frame)
                if "method" not in msg:
                    fut = self.pending.pop(msg.get("id"), None)
                    if fut and not fut.done():
                        if "error" in msg:
                            fut.set_exception(RPCError(msg["error"]))
                        else:
                            fut.set_result(msg.get("result"))
                elif "id" in msg:
                    # Answer on a task: a slow tool never blocks the reader.
                    task = asyncio.create_task(self._answer(msg))
                    self.tasks.add(task)
                    task.add_done_callback(self.tasks.discard)
                elif msg["method"] in self.notifications:
                    self.notifications[msg["method"]](msg.get("params"))
        except websockets.ConnectionClosed:
            pass
        finally:
            for fut in self.pending.values():
                if not fut.done():
                    fut.set_exception(ConnectionError("the daemon closed the connection"))

    async def _answer(self, msg):
        handler = self.requests.get(msg["method"])
        reply = {"jsonrpc": "2.0", "id": msg["id"]}
        try:
            if handler is None:
                raise LookupError(f"no handler for {msg['method']}")
            reply["result"] = await handler(msg.get("params"))
        except asyncio.CancelledError:
            reply["error"] = {"code": -32603, "message": "cancelled by tools.cancel"}
        except Exception as exc:  # the daemon gets the tool's error as text
            reply["error"] = {"code": -32603, "message": str(exc)}
        try:
            await self.ws.send(json.dumps(reply))
        except websockets.ConnectionClosed:
            pass
