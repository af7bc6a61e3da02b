"""Reading the files people give memsim: UTF-8 text, and strict YAML and JSON.

Strict means that a key given twice in one mapping is an error (a plain YAML or JSON reader
keeps the last one silently), and that JSON may not hold NaN, Infinity or a number past float
range. Every error is the caller's error class (``ConfigError`` for configs, ``TraceError`` for
traces) naming the file, and the field or line where one is known.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

from memsim.core import limits
from memsim.core.errors import ConfigError, MemsimError

_MERGE = "tag:yaml.org,2002:merge"


def check_file(path: Path, error: type[MemsimError] = ConfigError) -> None:
    """``path`` is a file that exists (a folder is said to be one)."""
    path = Path(path)
    if path.is_dir():
        raise error("is a directory, not a file", file=str(path))
    if not path.is_file():
        raise error("file not found", file=str(path))


def read_text(path: Path, error: type[MemsimError] = ConfigError) -> str:
    """The file's text, decoded as UTF-8 (a byte-order mark is dropped)."""
    data = read_bytes(path, error)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise error(f"not UTF-8 text (byte 0x{data[exc.start]:02x} on line {line})", file=str(path)) from None


def read_bytes(path: Path, error: type[MemsimError] = ConfigError) -> bytes:
    """The file's bytes, if it holds at most ``limits.MAX_FILE_BYTES``."""
    check_file(path, error)
    try:
        limits.check(Path(path).stat().st_size, limits.MAX_FILE_BYTES, "bytes", file=str(path), error=error)
        return Path(path).read_bytes()
    except OSError as exc:
        raise error(f"cannot read: {exc.strerror or exc}", file=str(path)) from None


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader; duplicate keys are found on the node tree before construction."""


# libyaml's parser under the same constructor, where PyYAML was built with it: a chip file parses in a
# few milliseconds instead of tens. A document it refuses is parsed again by ``_Loader``, whose errors
# (and what they name) are the ones memsim gives.
_FastLoader: type | None = type("_FastLoader", (yaml.CSafeLoader,), {}) if getattr(yaml, "__with_libyaml__", False) \
    else None


def load_yaml(path: Path, error: type[MemsimError] = ConfigError) -> Any:
    """The YAML document in ``path`` (None when it is empty), if it holds at most ``limits.MAX_YAML_BYTES``."""
    text = read_text(path, error)
    limits.check(len(text.encode()), limits.MAX_YAML_BYTES, "bytes of YAML", file=str(path), error=error)
    return parse_yaml(text, str(path), error)


def parse_yaml(text: str, file: str, error: type[MemsimError] = ConfigError) -> Any:
    if _FastLoader is not None:
        try:
            return _document(_FastLoader(text), text, file, error)
        except (yaml.YAMLError, ValueError, RecursionError):
            pass  # refused: parsed again below, for the error PyYAML's own parser gives
    try:
        loader = _Loader(text)
    except yaml.YAMLError as exc:  # a character YAML does not allow (the reader checks on construction)
        raise error(f"invalid YAML: {getattr(exc, 'problem', None) or _first_clause(exc)}", file=file) from None
    try:
        return _document(loader, text, file, error)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark else None
        raise error(f"invalid YAML: {getattr(exc, 'problem', None) or exc}", file=file, field=where) from None
    except (ValueError, RecursionError) as exc:  # an integer of thousands of digits, nesting too deep
        raise error(f"invalid YAML: {_first_clause(exc)}", file=file) from None


def _document(loader: Any, text: str, file: str, error: type[MemsimError]) -> Any:
    """The one document ``loader`` reads, with no key twice in a mapping and only Unicode text."""
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_keys(loader, node, "", set(), file, error)
        return _unicode_only(loader.construct_document(node), text, file, error)
    finally:
        loader.dispose()


def _check_keys(loader: _Loader, node: yaml.Node, path: str, seen: set[int], file: str,
                error: type[MemsimError]) -> None:
    """No mapping under ``node`` gives a key twice; ``path`` names fields as the loaders do
    (``levels[hbm].bandwidth``: list entries by their ``name``)."""
    if id(node) in seen:  # an alias to a node already checked (or a recursive one)
        return
    seen.add(id(node))
    if isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _check_keys(loader, item, f"{path}[{_entry_name(item) or i}]", seen, file, error)
    elif isinstance(node, yaml.MappingNode):
        lines: dict[Any, int] = {}
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE:  # `<<: *base` merges keys that this mapping may override
                _check_keys(loader, value_node, path, seen, file, error)
                continue
            key = loader.construct_object(key_node, deep=True) if isinstance(key_node, yaml.ScalarNode) else None
            child = f"{path}.{key}" if path else str(key)
            line = key_node.start_mark.line + 1
            if key is not None and _hashable(key):
                if key in lines:
                    lines_ = f"lines {lines[key]} and {line}" if lines[key] != line else f"twice on line {line}"
                    raise error(f"duplicate key {key!r} ({lines_})", file=file, field=child)
                lines[key] = line
            _check_keys(loader, value_node, child, seen, file, error)


def _hashable(key: Any) -> bool:
    try:
        hash(key)
    except TypeError:  # construction reports an unhashable key
        return False
    return True


def _entry_name(node: yaml.Node) -> str | None:
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            if key_node.value == "name" and isinstance(value_node, yaml.ScalarNode):
                return value_node.value
    return None


class _Refused(ValueError):
    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _Refused(f"duplicate key {key!r} in one object", field=key)
        out[key] = value
    return out


def _no_constant(name: str) -> Any:
    raise _Refused(f"{name} is not a number memsim accepts")


def _finite(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise _Refused(f"{text[:40]} is past float range")
    return value


# A UTF-16 surrogate written as an escape (JSON ``\ud800``, YAML ``\ud800`` or ``\U0000d800``): a pair
# of them is one character, a lone one is not text, and fails only when the output is written.
_SURROGATE_ESCAPE = re.compile(r"\\(?:u|U0000)[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def _unicode_only(value: Any, text: str, file: str, error: type[MemsimError]) -> Any:
    """``value``, parsed from ``text``, if none of its strings holds a lone surrogate; else the
    error names the first field that does. (Only a text with such an escape is walked.)"""
    if not _SURROGATE_ESCAPE.search(text):
        return value
    stack: list[tuple[Any, str]] = [(value, "")]
    seen: set[int] = set()  # a YAML alias is the same object again: walked once, however often it is used
    while stack:
        item, where = stack.pop()
        if isinstance(item, (dict, list)):
            if id(item) in seen:
                continue
            seen.add(id(item))
        if isinstance(item, dict):
            for key, child in reversed(list(item.items())):
                name = f"{where}.{key}" if where else str(key)
                if isinstance(key, str) and _SURROGATE.search(key):  # named as escaped, so it can be printed
                    raise error("holds a lone UTF-16 surrogate: not Unicode text", file=file,
                                field=f"{where}.{ascii(key)[1:-1]}" if where else ascii(key)[1:-1])
                stack.append((child, name))
        elif isinstance(item, list):
            stack.extend((child, f"{where}[{i}]") for i, child in reversed(list(enumerate(item))))
        elif isinstance(item, str) and _SURROGATE.search(item):
            raise error("holds a lone UTF-16 surrogate: not Unicode text", file=file, field=where or None)
    return value


def parse_json(text: str, file: str, error: type[MemsimError] = ConfigError) -> Any:
    try:
        return _unicode_only(json.loads(text, object_pairs_hook=_unique, parse_constant=_no_constant,
                                        parse_float=_finite), text, file, error)
    except json.JSONDecodeError as exc:
        raise error(f"invalid JSON at line {exc.lineno}: {exc.msg}", file=file) from None
    except _Refused as exc:
        raise error(f"invalid JSON: {exc}", file=file, field=exc.field) from None
    except (ValueError, RecursionError) as exc:  # an integer of thousands of digits, nesting too deep
        raise error(f"invalid JSON: {_first_clause(exc)}", file=file) from None


def load_json(path: Path, error: type[MemsimError] = ConfigError) -> Any:
    """The JSON value in ``path``."""
    return parse_json(read_text(path, error), str(path), error)


def _first_clause(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text.split(":")[0].split(";")[0].strip()
