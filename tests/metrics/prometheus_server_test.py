#!/usr/bin/env python3
"""The real Prometheus server scrapes a running async cluster: every task's --metrics_port page is
a target it reads, and its query API then holds each worker's examples, the ps task's workers and
`up` for every task. This is what docs/live_view.md and deploy/prometheus/ rely on; a page that
only looks right (`promtool check metrics`, tests/metrics/metrics_endpoint_test.cc) is not enough.

  DTRAIN_BINARY=build/dtrain /usr/bin/python3 tests/metrics/prometheus_server_test.py [-v]

ctest runs it as Metrics.PrometheusServerScrapesAnAsyncCluster. MNIST comes from $DTRAIN_DATA_DIR
or ~/.cache/dtrain/mnist (scripts/fetch_mnist.sh). Without /usr/bin/prometheus (Debian:
prometheus) it exits 77, which ctest reports as skipped. Standard library only.
"""

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.error
import urllib.parse
import urllib.request

PROMETHEUS = "/usr/bin/prometheus"
if not os.access(PROMETHEUS, os.X_OK):
    print(f"SKIPPED: no {PROMETHEUS} (Debian: prometheus)")
    sys.exit(77)

SOURCE_DIR = os.environ.get("DTRAIN_SOURCE_DIR",
                            os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
                                __file__)))))
DTRAIN = os.environ.get("DTRAIN_BINARY", os.path.join(SOURCE_DIR, "build", "dtrain"))
DATA_DIR = (os.environ.get("DTRAIN_DATA_DIR") or
            os.path.join(os.path.expanduser("~"), ".cache", "dtrain", "mnist"))

# Far more steps than the test needs: the job must still be training when Prometheus is asked, as
# a target that stops answering gets staleness markers and drops out of instant queries. The test
# stops the job itself once its assertions hold.
TRAIN_STEPS = 1_000_000
# For all the waits below together. A healthy run takes about 8 s, most of it Prometheus's wait
# of 5 s before it applies its first targets (its scrape manager's reload period).
PATIENCE_S = 60
POLL_S = 0.2     # between two queries of a condition that is not yet true
STOP_GRACE_S = 25  # dtrain's --shutdown_timeout (20 s), then SIGKILL

# "[worker0] worker=0: metrics at http://127.0.0.1:35377/metrics", "[ps0] ps0: metrics at ..."
METRICS_LINE = re.compile(r"^\[(\w+)\] .*metrics at (http://([^/\s]+)/metrics)\s*$")
# Prometheus's log line once it listens, with the port it was given for :0.
LISTENING_LINE = re.compile(r'msg="Listening on" address=(\S+)')
TASKS = ("ps0", "worker0", "worker1")


class Child:
    """A process the test started, in a process group of its own, with its stdout and stderr read
    line by line on a thread so that it never blocks on a full pipe. stop() always reaps it."""

    def __init__(self, argv, **kwargs):
        self.argv = argv
        self.process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL, start_new_session=True,
                                        text=True, errors="replace", **kwargs)
        self.lines = []
        self.changed = threading.Condition()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.process.stdout:
            with self.changed:
                self.lines.append(line.rstrip("\n"))
                self.changed.notify_all()
        with self.changed:
            self.changed.notify_all()

    def wait_for(self, found, what, deadline):
        """Waits until found(lines) is not None and returns it; fails naming `what` and showing the
        output if the process exits first or the deadline (time.monotonic()) passes."""
        with self.changed:
            while True:
                result = found(self.lines)
                if result is not None:
                    return result
                left = deadline - time.monotonic()
                if left <= 0 or (self.process.poll() is not None and not self.reader.is_alive()):
                    raise AssertionError(f"{what}: not seen in the output of {self.argv[0]} "
                                         f"(exit status {self.process.poll()}):\n" + self.output())
                self.changed.wait(min(left, 1.0))

    def output(self):
        with self.changed:
            return "\n".join(self.lines[-60:])

    def stop(self):
        if self.process.poll() is None:
            # The whole group: dtrain's launcher passes SIGTERM on to its tasks itself, and they
            # die with it (PR_SET_PDEATHSIG) if it has to be killed.
            self._signal_group(signal.SIGTERM)
            try:
                self.process.wait(timeout=STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                self._signal_group(signal.SIGKILL)
                self.process.wait()
        self.reader.join(timeout=STOP_GRACE_S)
        self.process.stdout.close()

    def _signal_group(self, signal_number):
        try:
            os.killpg(self.process.pid, signal_number)
        except ProcessLookupError:
            pass  # it exited between poll() and here


class PrometheusServerScrapesAnAsyncCluster(unittest.TestCase):

    def start(self, argv, **kwargs):
        child = Child(argv, **kwargs)
        self.addCleanup(child.stop)  # runs even when the test fails, last started first stopped
        return child

    def query(self, base_url, promql):
        """The vector an instant query returns, as a list of (labels, value)."""
        url = f"{base_url}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
        with urllib.request.urlopen(url, timeout=5) as response:
            body = json.load(response)
        self.assertEqual(body["status"], "success", body)
        self.assertEqual(body["data"]["resultType"], "vector", body)
        return [(sample["metric"], float(sample["value"][1])) for sample in body["data"]["result"]]

    def poll(self, base_url, promql, holds, prometheus):
        """Queries promql until holds(samples) is true; returns the samples. A query refused while
        the server starts (503) or a connection it is not yet taking counts as not yet."""
        samples = None
        while True:
            try:
                samples = self.query(base_url, promql)
                if holds(samples):
                    return samples
            except (urllib.error.URLError, ConnectionError):
                pass
            if time.monotonic() >= self.deadline:
                self.fail(f"{promql}: Prometheus still answers {samples}\n"
                          f"dtrain's output:\n{self.dtrain.output()}\n"
                          f"prometheus's output:\n{prometheus.output()}")
            time.sleep(POLL_S)  # a poll interval, not a synchronisation: the condition decides

    def test_every_task_is_scraped_and_each_worker_reports_its_examples(self):
        self.assertTrue(os.access(DTRAIN, os.X_OK), f"DTRAIN_BINARY={DTRAIN} is not executable")
        self.assertTrue(os.path.isfile(os.path.join(DATA_DIR, "train-images-idx3-ubyte")),
                        f"MNIST is not in {DATA_DIR}: run scripts/fetch_mnist.sh")
        self.deadline = time.monotonic() + PATIENCE_S
        temp = tempfile.TemporaryDirectory(prefix="dtrain_prometheus_")
        self.addCleanup(temp.cleanup)  # after the processes below are stopped

        self.dtrain = self.start([
            DTRAIN, "train", "--strategy", "async", "--workers", "2", "--metrics_port", "0",
            "--model", "softmax", "--data_dir", DATA_DIR, "--train_steps", str(TRAIN_STEPS),
            "--threads", "1", "--train_dir", os.path.join(temp.name, "train")])

        def every_task_url(lines):
            urls = {}
            for line in lines:
                match = METRICS_LINE.match(line)
                if match and match.group(1) in TASKS:
                    urls[match.group(1)] = match.group(3)
            return urls if len(urls) == len(TASKS) else None

        targets = self.dtrain.wait_for(every_task_url,
                                       "a metrics URL from each of " + ", ".join(TASKS),
                                       self.deadline)

        config = os.path.join(temp.name, "prometheus.yml")
        with open(config, "w") as f:
            f.write("global:\n"
                    "  scrape_interval: 1s\n"
                    "  scrape_timeout: 1s\n"
                    "scrape_configs:\n"
                    "  - job_name: dtrain\n"
                    "    static_configs:\n"
                    f"      - targets: [{', '.join(repr(t) for t in targets.values())}]\n")
        prometheus = self.start([
            PROMETHEUS, f"--config.file={config}",
            f"--storage.tsdb.path={os.path.join(temp.name, 'tsdb')}",
            "--web.listen-address=127.0.0.1:0"], cwd=temp.name)

        def listening(lines):
            for line in lines:
                match = LISTENING_LINE.search(line)
                if match:
                    return match.group(1)
            return None

        base_url = "http://" + prometheus.wait_for(listening, "prometheus listening", self.deadline)

        # Each worker's examples, from the target that worker printed, and more than none.
        def each_worker_counted(samples):
            counted = {labels.get("task") for labels, value in samples if value > 0}
            return counted >= {"worker0", "worker1"}

        examples = self.poll(base_url, "dtrain_examples_total", each_worker_counted, prometheus)
        by_task = {labels["task"]: (labels, value) for labels, value in examples}
        for worker in ("worker0", "worker1"):
            labels, value = by_task[worker]
            self.assertEqual(labels["instance"], targets[worker], labels)
            self.assertEqual(labels["job"], "dtrain", labels)
            self.assertGreater(value, 0, labels)
        self.assertNotIn("ps0", by_task, "a ps task computes no examples")

        # Every target answers Prometheus's scrapes.
        def every_target_up(samples):
            return sorted((s["instance"], v) for s, v in samples) == sorted(
                (t, 1.0) for t in targets.values())

        self.poll(base_url, 'up{job="dtrain"}', every_target_up, prometheus)

        # ps0, scraped on its own target, holds a connection from each of the two workers.
        connected = self.poll(
            base_url, 'dtrain_ps_connected_workers{task="ps0"}',
            lambda samples: len(samples) == 1 and samples[0][1] == 2, prometheus)
        self.assertEqual(connected[0][0]["instance"], targets["ps0"])


if __name__ == "__main__":
    unittest.main()
