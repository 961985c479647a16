"""A real headless Chromium (Debian `chromium`) driven over the DevTools protocol on a pipe
(`--remote-debugging-pipe`: commands on the child's fd 3, answers on its fd 4, each a JSON
message ended by a NUL byte), so a test can load a page, fill and submit a form, read the
DOM and the browser's cookies, and take a screenshot, with nothing but the standard library.
Also `dump_dom`, the plain `chromium --headless --dump-dom` of a URL.
"""
import base64
import json
import os
import shutil
import subprocess
import time

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--disable-dev-shm-usage", "--window-size=1280,1100"]


def binary():
    path = shutil.which("chromium")
    assert path is not None, "chromium not installed (Debian package `chromium`; scripts/test.sh installs it)"
    return path


def dump_dom(url, user_data_dir):
    """The DOM Chromium builds for `url`, serialized."""
    out = subprocess.run([binary(), *FLAGS, f"--user-data-dir={user_data_dir}", "--dump-dom", url],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout


class Browser:
    def __init__(self, user_data_dir):
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()
        os.makedirs(user_data_dir, exist_ok=True)
        self._log = open(os.path.join(user_data_dir, "chromium.log"), "wb")

        def fds():  # the child reads commands on fd 3 and writes answers on fd 4
            os.dup2(to_child_r, 3)
            os.dup2(from_child_w, 4)

        self.proc = subprocess.Popen(
            [binary(), *FLAGS, "--remote-debugging-pipe", f"--user-data-dir={user_data_dir}", "about:blank"],
            preexec_fn=fds, close_fds=False, stdout=self._log, stderr=subprocess.STDOUT)
        os.close(to_child_r)
        os.close(from_child_w)
        self._next = 0
        self._buffer = b""
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]

    def _read_message(self):
        while b"\0" not in self._buffer:
            chunk = os.read(self._from_child, 1 << 16)
            assert chunk, "chromium closed its DevTools pipe"
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def call(self, method, params=None, session=None):
        """Sends one command and returns its result (events in between are skipped)."""
        self._next += 1
        message = {"id": self._next, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._to_child, json.dumps(message).encode() + b"\0")
        while True:
            answer = self._read_message()
            if answer.get("id") == self._next:
                assert "error" not in answer, (method, answer["error"])
                return answer["result"]

    def page(self, method, params=None):
        return self.call(method, params, self.session)

    def evaluate(self, expression):
        result = self.page("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        assert "exceptionDetails" not in result, result
        return result["result"].get("value")

    def wait_for(self, expression, timeout=30):
        """Waits until `expression` is true in the page (the page may reload meanwhile)."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                if self.evaluate(expression):
                    return
            except AssertionError:
                pass  # evaluated while a navigation replaced the context
            time.sleep(0.1)
        raise AssertionError(f"page never satisfied {expression}: {self.evaluate('location.href')}")

    def goto(self, url):
        self.page("Page.navigate", {"url": url})
        self.wait_for(f"location.href.startsWith({json.dumps(url)}) && document.readyState === 'complete'")

    def cookies(self):
        return self.page("Network.getCookies")["cookies"]

    def screenshot(self):
        return base64.b64decode(self.page("Page.captureScreenshot", {"format": "png"})["data"])

    def close(self):
        try:
            self.call("Browser.close")
        except (AssertionError, OSError):
            pass
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        os.close(self._to_child)
        os.close(self._from_child)
        self._log.close()
