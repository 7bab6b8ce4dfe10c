"""The package layout's promises: the import paths users write in locustfiles keep working."""

import importlib


def test_locustfile_import_paths_still_give_the_same_objects() -> None:
    """`llm_locust.plugin` / `.users` / `.shape` are thin re-exports of the objects in their stage folders."""
    from llm_locust.load.shape import SweepShape
    from llm_locust.runtime.plugin import install
    from llm_locust.runtime.users import ChatCompletionsUser, CompletionsUser

    kept = {
        "llm_locust.plugin": {"install": install},
        "llm_locust.users": {"ChatCompletionsUser": ChatCompletionsUser, "CompletionsUser": CompletionsUser},
        "llm_locust.shape": {"SweepShape": SweepShape},
    }
    for path, objects in kept.items():
        module = importlib.import_module(path)
        assert sorted(module.__all__) == sorted(objects), path
        for name, obj in objects.items():
            assert getattr(module, name) is obj, f"{path}.{name}"
