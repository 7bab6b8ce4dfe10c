#!/usr/bin/env python3
"""The image's entrypoint: `locust ARGS` (or any command), as the owner of the results folder.

Arguments that start with "-" are Locust's (`docker run IMAGE -f ... --headless`, as with the
official image); anything else is a command (`llm-locust sim ...`, `llm-locust report /results/run`).

Started as root (the image's default user), it switches to the user and group that own /results
before it runs the command: with docker compose /results is ./results of your clone, so the files
written there are yours whatever your uid; with nothing mounted there, /results belongs to the
image's user `locust`; a /results owned by root (root ran compose) keeps root. Started as any other
user (`docker run --user UID:GID`, a Kubernetes securityContext), it runs the command as that user.

The master–worker link's secret (docs/security.md, "The master port"): without LLM_LOCUST_MASTER_SECRET in the
environment and with LLM_LOCUST_MASTER_SECRET_FILE naming a file (docker-compose.yml: a volume of the stack's own,
shared by the master and its workers), the first container to start writes a fresh random secret there and every one
reads it (`share_link_secret`): the stack's master and workers share one secret nobody had to set.
Standard library only: it runs on any base image with Python.
"""

from __future__ import annotations

import os
import pwd
import secrets
import sys

RESULTS_DIR = "/results"
SECRET_ENV = "LLM_LOCUST_MASTER_SECRET"
SECRET_FILE_ENV = "LLM_LOCUST_MASTER_SECRET_FILE"


def command(args: list[str]) -> list[str]:
    """The command to run: `locust` with `args` when they are options (or none), else `args` itself."""
    return ["locust", *args] if not args or args[0].startswith("-") else args


def become_owner_of(path: str) -> None:
    """As root: switch user, group and HOME to those of `path`'s owner (nothing to do otherwise)."""
    if os.getuid() != 0 or not os.path.isdir(path):
        return
    info = os.stat(path)
    if info.st_uid == 0:
        return
    try:
        home = pwd.getpwuid(info.st_uid).pw_dir
    except KeyError:  # a uid without an account in the image (yours): any writable HOME will do
        home = "/tmp"
    os.setgroups([])
    os.setgid(info.st_gid)
    os.setuid(info.st_uid)
    os.environ["HOME"] = home


def share_link_secret(environ: dict[str, str]) -> None:
    """Put the link's secret in `environ` from the file LLM_LOCUST_MASTER_SECRET_FILE names, written first (mode 600,
    a fresh random secret) by whoever finds none; nothing to do when the secret is set or no file is named."""
    path = environ.get(SECRET_FILE_ENV, "")
    if environ.get(SECRET_ENV) or not path:
        return
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        pass
    else:
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_urlsafe(32))
    with open(path) as f:
        environ[SECRET_ENV] = f.read().strip()


def main() -> None:
    share_link_secret(os.environ)  # as root, before switching: the volume is root's
    become_owner_of(RESULTS_DIR)
    argv = command(sys.argv[1:])
    os.execvp(argv[0], argv)


if __name__ == "__main__":
    main()
