"""The peers `bench_serve.py` measures toolrt against: the same echo tool on the official SDK's `MCPServer`
and on FastMCP, over streamable HTTP or stdio (run as a script by the benchmark).

    python benchmarks/_serve_peers.py sdk|fastmcp http PORT
    python benchmarks/_serve_peers.py sdk|fastmcp stdio
"""

from __future__ import annotations

import sys


async def echo(text: str) -> str:
    """Echo the text back: an async function, as toolrt's handler is (a sync one would run in a worker
    thread on the SDK, a cost toolrt's side does not pay)."""
    return text


def main(kind: str, transport: str, port: int) -> None:
    if kind == "sdk":
        from mcp.server.mcpserver import MCPServer

        # toolrt serve logs at warning (uvicorn's access log off): so does this peer, fairly.
        sdk = MCPServer("bench", log_level="WARNING")
        sdk.tool(name="echo")(echo)
        if transport == "http":
            sdk.run("streamable-http", host="127.0.0.1", port=port)
        else:
            sdk.run("stdio")
    elif kind == "fastmcp":
        import logging

        from fastmcp import FastMCP

        logging.getLogger("fastmcp").setLevel(logging.WARNING)
        fast = FastMCP("bench")
        fast.tool(name="echo")(echo)
        if transport == "http":
            fast.run("http", host="127.0.0.1", port=port, show_banner=False, log_level="warning")
        else:
            fast.run("stdio", show_banner=False)
    else:
        raise SystemExit(f"unknown server kind {kind!r}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 0)
