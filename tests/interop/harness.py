"""What the interop scripts share: starting a tradedesk HTTP server and finding its URL."""

from __future__ import annotations

import re
import subprocess
import time


def wait_for_url(proc: subprocess.Popen, seconds: float) -> str | None:
    """Reads the server's stderr on a thread (so the pipe never fills and a silent server
    cannot block us) and returns the /mcp URL it announces, or None after `seconds`."""
    import queue
    import threading

    lines: "queue.Queue[str]" = queue.Queue()

    def pump() -> None:
        for line in proc.stderr:
            lines.put(line)

    threading.Thread(target=pump, daemon=True).start()
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            line = lines.get(timeout=max(0.0, deadline - time.time()))
        except queue.Empty:
            break
        m = re.search(r"(http://\S+/mcp)", line)
        if m:
            return m.group(1)
    return None
