#!/usr/bin/env python3
"""The image's entrypoint: `locust ARGS` (or any command), as the owner of the results folder.

Arguments that start with "-" are Locust's (`docker run IMAGE -f ... --headless`, as with the
official image); anything else is a command (`llm-locust sim ...`, `llm-locust report /results/run`).

Started as root (the image's default user), it switches to the user and group that own /results
before it runs the command: with docker compose /results is ./results of your clone, so the files
written there are yours whatever your uid; with nothing mounted there, /results belongs to the
image's user `locust`; a /results owned by root (root ran compose) keeps root. Started as any other
user (`docker run --user UID:GID`, a Kubernetes securityContext), it runs the command as that user.
Standard library only: it runs on any base image with Python.
"""

from __future__ import annotations

import os
import pwd
import sys

RESULTS_DIR = "/results"


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


def main() -> None:
    become_owner_of(RESULTS_DIR)
    argv = command(sys.argv[1:])
    os.execvp(argv[0], argv)


if __name__ == "__main__":
    main()
