"""Sends raw bytes to an HTTP server and reads the answers with Python's own parser (http.client),
none of it dtrain's code: what a test of the metrics port sends, and what came back.

Usage: http_requests.py HOST PORT REQUESTS.json
REQUESTS.json: [{"name": ..., "send": <the bytes, as a Latin-1 string>,
                 "methods": [the method of each request it holds, in order]}, ...]
Prints one JSON object per request, in order: {"name", "answers": [{"status", "version",
"body_bytes", "allow", "content_type", "nosniff", "csp"}, ...], "error": why the answers stopped
short, or ""}. The requests go out
eight at a time, each on its own connection: one that the server leaves to its idle timeout does
not hold the others up.
"""

import concurrent.futures
import http.client
import json
import socket
import sys


class _SharedReader:
    """One buffered reader for every answer on a connection (pipelined answers follow each other
    in one buffer), which an answer's end does not close."""

    def __init__(self, reader):
        self._reader = reader

    def makefile(self, *args, **kwargs):
        return self

    def close(self):
        pass

    def __getattr__(self, name):
        return getattr(self._reader, name)


def exchange(host, port, request):
    result = {"name": request["name"], "answers": [], "error": ""}
    with socket.create_connection((host, port), timeout=60) as sock:
        try:
            sock.sendall(request["send"].encode("latin-1"))
        except OSError as error:  # the server may answer and close before it has read it all
            result["error"] = f"send: {error!r}"
        reader = _SharedReader(sock.makefile("rb"))
        for method in request["methods"]:
            try:
                response = http.client.HTTPResponse(reader, method=method)
                response.begin()
                body = response.read()
            except (OSError, http.client.HTTPException) as error:
                result["error"] = f"answer {len(result['answers']) + 1}: {error!r}"
                break
            result["answers"].append({
                "status": response.status,
                "version": response.version,
                "body_bytes": len(body),
                "allow": response.getheader("Allow", ""),
                "content_type": response.getheader("Content-Type", ""),
                "nosniff": response.getheader("X-Content-Type-Options", ""),
                "csp": response.getheader("Content-Security-Policy", ""),
            })
    return result


def main():
    host, port, path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    with open(path, encoding="utf-8") as f:
        requests = json.load(f)
    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        results = pool.map(lambda request: exchange(host, port, request), requests)
        for result in results:
            print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
