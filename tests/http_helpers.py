"""Fake HTTP servers for the benchmark drivers' tests: one JSON reply."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler


def reply_json(handler: BaseHTTPRequestHandler, answer) -> None:
    """Status 200 with `answer` as the JSON body."""
    data = json.dumps(answer).encode()
    handler.send_response(200)
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)
