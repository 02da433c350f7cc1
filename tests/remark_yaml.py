"""Read LLVM optimization-remark YAML (`--- !Passed` ... documents) with PyYAML.

The documents carry the remark kind as a YAML tag; a SafeLoader that maps each of
the four tags to a plain dict (with the kind under "Kind") reads NVIDIA's files and ours.
"""

from __future__ import annotations

import yaml

TAGS = ("Passed", "Missed", "Failure", "Analysis")


class RemarkLoader(yaml.SafeLoader):
    pass


def _constructor(kind: str):
    def construct(loader: yaml.SafeLoader, node: yaml.Node) -> dict:
        value = loader.construct_mapping(node, deep=True)
        return {"Kind": kind, **value}
    return construct


for _tag in TAGS:
    RemarkLoader.add_constructor(f"!{_tag}", _constructor(_tag))


def load_remarks(text: str) -> list[dict]:
    """Every remark document of `text`; raises yaml.YAMLError on anything that is not remark YAML."""
    docs = [doc for doc in yaml.load_all(text, Loader=RemarkLoader) if doc is not None]
    for doc in docs:
        if not isinstance(doc, dict) or doc.get("Kind") not in TAGS:
            raise yaml.YAMLError(f"not a remark document: {doc!r}")
        for key in ("Pass", "Name", "Function", "Args"):
            if key not in doc:
                raise yaml.YAMLError(f"remark without {key}: {doc!r}")
    return docs


def arg(doc: dict, key: str) -> object:
    """The first value of `key` in a remark's Args list (None when absent)."""
    return next((item[key] for item in doc["Args"] if key in item), None)
