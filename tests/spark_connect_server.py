"""A Spark Connect server for the spark-marked tests, started from pyspark's own jars.

pyspark ships the Spark Connect server (``jars/spark-connect_*.jar``) and ``bin/spark-submit``;
the server runs a ``local[2]`` driver with 1 GB of heap, listens on 127.0.0.1 only (gRPC, driver
and block manager alike) on a port the system picks, and logs to a file in the test's temporary
directory. It is ready when its log says where it listens. It admits only clients that give its
token (Spark Connect's pre-shared token, a fresh one per run): they find it in the environment
variable ``SPARK_CONNECT_AUTHENTICATE_TOKEN`` and name the server ``sc://localhost:PORT`` (with
a token, pyspark's client uses TLS except to ``localhost``). Anything else (no Java, no jar, no
line within the deadline) is an error naming the log: the tests that need the server fail,
never skip.
"""

from __future__ import annotations

import os
import re
import secrets
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
READY = re.compile(r"Spark Connect server started at: 127\.0\.0\.1:(\d+)")
SETTINGS = {
    "spark.connect.grpc.binding.address": "127.0.0.1",
    "spark.connect.grpc.binding.port": "0",  # the system picks a free port; the log says which
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "2",
}


TOKEN = "SPARK_CONNECT_AUTHENTICATE_TOKEN"


@dataclass
class ConnectServer:
    process: subprocess.Popen[bytes]
    port: int
    log: Path
    token: str

    @property
    def url(self) -> str:
        return f"sc://localhost:{self.port}"

    def env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """``base`` (default: this process's environment) with the server's token, for a client."""
        return {**(os.environ if base is None else base), TOKEN: self.token}

    def stop(self) -> None:
        """Stop the server (its own process group: spark-submit and the JVM it runs)."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=30)


def start(directory: Path, deadline: float = 300) -> ConnectServer:
    import pyspark

    home = Path(pyspark.__file__).resolve().parent
    submit = home / "bin" / "spark-submit"
    if not list((home / "jars").glob("spark-connect_*.jar")):
        raise AssertionError(f"pyspark {pyspark.__version__} ships no Spark Connect server jar in {home / 'jars'}")
    command = [str(submit), "--class", CLASS, "--name", "dpsql-tests-connect", "--master", "local[2]",
               "--driver-memory", "1g"]
    for key, value in SETTINGS.items():
        command += ["--conf", f"{key}={value}"]
    log = directory / "spark-connect.log"
    token = secrets.token_hex(16)
    env = {**os.environ, "SPARK_HOME": str(home), TOKEN: token}
    with open(log, "wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=directory,
                                   start_new_session=True)
    server = ConnectServer(process, 0, log, token)
    until = time.monotonic() + deadline
    while time.monotonic() < until:
        found = READY.search(log.read_text(encoding="utf-8", errors="replace"))
        if found:
            server.port = int(found.group(1))
            return server
        if process.poll() is not None:
            break
        time.sleep(0.5)
    server.stop()
    tail = log.read_text(encoding="utf-8", errors="replace").splitlines()[-15:]
    raise AssertionError(f"the Spark Connect server did not start (exit status {process.returncode}); "
                         f"its log {log} ends:\n" + "\n".join(tail))
