"""A real HTTP channel server on 127.0.0.1 for the refusal tests (issue 56): serves a folder, and can
require a bearer token (401 without it, 403 with another) or answer every request with a status and a
body of its own (a 5xx from a broken server). Runs in a thread of the test process."""
from __future__ import annotations

import http.server
import threading
from pathlib import Path
from typing import Optional


class ChannelServer:
    def __init__(self, root: Path, token: Optional[str] = None) -> None:
        self.root, self.token = root, token
        self.fail: Optional[tuple[int, str]] = None        # (status, body) for every request
        server = self

        class Handler(http.server.SimpleHTTPRequestHandler):
            def __init__(self, *a, **kw) -> None:
                super().__init__(*a, directory=str(server.root), **kw)

            def log_message(self, *a) -> None:
                pass

            def _answer(self, status: int, body: str) -> None:
                data = body.encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "text/plain")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:      # the client gave up (rattler drops a refused request): nothing to say
                    pass

            def do_GET(self) -> None:
                if server.fail is not None:
                    return self._answer(*server.fail)
                if server.token is not None:
                    got = self.headers.get("Authorization")
                    if got is None:
                        return self._answer(401, "authentication required")
                    if got != f"Bearer {server.token}":
                        return self._answer(403, "token not allowed on this channel")
                super().do_GET()

            do_HEAD = do_GET

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
