"""Reading the files a user hands in (issue 40 items 6, 7, 9): only regular files, up to a limit
(:func:`read_user_file`: a FIFO or ``/dev/zero`` is refused unread), YAML by strict rules
(:func:`strict_yaml`: YAML 1.2 numbers and booleans, no aliases, no key given twice), and a user's
value in an error message cut to a short prefix (:func:`shown`). Imports no project module but
:mod:`lyra_gym.errors`, so every reader (config, demand, knowledge, traces) can use it.
"""

from __future__ import annotations

import os
import re
import stat
from typing import Any, Callable

from lyra_gym.errors import SHOWN_CHARS, ConfigError, shown

__all__ = ["ALIAS_PROBLEM", "SHOWN_CHARS", "YamlProblem", "read_user_file", "shown", "strict_yaml",
           "unique_key_loader"]

def read_user_file(path: str | os.PathLike, limit: int, what: str,
                   error: Callable[[str], Exception] = ConfigError) -> bytes:
    """The bytes of the regular file ``path``, at most ``limit`` (a larger file is refused); a
    FIFO, a device (``/dev/zero``) or a folder is refused unread. Those problems are ``error``
    of a message naming the path and ``what`` it should be (``"config file"``); ``OSError``
    (missing, no permission) is left to the caller."""
    name = os.fspath(path)
    try:
        with open(path, "rb", opener=_open_nonblocking) as handle:
            mode = os.fstat(handle.fileno()).st_mode
            if not stat.S_ISREG(mode):
                raise error(f"{name}: a device, FIFO or socket, not a {what} (only regular files are read)")
            data = handle.read(limit + 1)
    except IsADirectoryError:
        raise error(f"{name}: a folder, not a {what} (only regular files are read)") from None
    if len(data) > limit:
        raise error(f"{name}: larger than {limit:,} bytes, the most a {what} may hold")
    return data


def _open_nonblocking(path: str, flags: int) -> int:
    """``os.open`` that does not wait for a FIFO's writer (the file type is checked next)."""
    return os.open(path, flags | getattr(os, "O_NONBLOCK", 0))


def unique_key_loader() -> type:
    """PyYAML's SafeLoader that refuses a key given twice in one mapping (plain PyYAML keeps the
    last value silently). The error is a ``yaml.MarkedYAMLError`` whose mark is the second key's
    line: ``duplicate key 'seed' (first on line 3)``. Keys brought in by a merge (``<<: *base``)
    may be overridden, as YAML intends. Use as ``yaml.load(text, Loader=unique_key_loader())``
    in place of ``yaml.safe_load(text)``: same scalars, same safety."""
    import yaml
    from yaml.constructor import ConstructorError

    class UniqueKeyLoader(yaml.SafeLoader):
        def construct_mapping(self, node: Any, deep: bool = False) -> dict:
            if isinstance(node, yaml.MappingNode):
                first: dict[Any, int] = {}
                for key_node, _ in node.value:
                    if key_node.tag == "tag:yaml.org,2002:merge":
                        continue
                    key = self.construct_object(key_node, deep=True)
                    try:
                        line = first.get(key)
                    except TypeError:  # an unhashable key: SafeLoader's own error follows
                        continue
                    if line is not None:
                        raise ConstructorError(
                            None, None, f"duplicate key {shown(key)} (first on line {line})", key_node.start_mark)
                    first[key] = key_node.start_mark.line + 1
            return super().construct_mapping(node, deep=deep)

    return UniqueKeyLoader


ALIAS_PROBLEM = "YAML aliases (*name) are not accepted"


def _strict_yaml_loader(yaml11_bools: bool = False) -> type:
    """:func:`unique_key_loader` (a key given twice is an error naming it and its line) with YAML
    1.2 booleans (only true/false; ``no``, ``off``, ``yes`` stay strings and fail the bool check;
    ``yaml11_bools`` keeps YAML 1.1's, as training configs always read them),
    floats (``1e5`` is a number) and integers (decimal, ``0x`` hex, ``0o`` octal; ``010`` and
    ``1:20``, YAML 1.1's octal 8 and sexagesimal 80, stay strings and fail a number check), and
    no aliases: ``*name`` is an error naming its line (an alias bomb expands to gigabytes)."""
    import yaml
    from yaml.composer import ComposerError

    base: Any = unique_key_loader()  # a class made at run time: mypy takes no call as a base

    class StrictLoader(base):
        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                raise ComposerError(None, None, ALIAS_PROBLEM, self.peek_event().start_mark)
            return super().compose_node(parent, index)

    drop = {"tag:yaml.org,2002:float", "tag:yaml.org,2002:int", *(() if yaml11_bools else ("tag:yaml.org,2002:bool",))}
    StrictLoader.yaml_implicit_resolvers = {
        first: [(tag, rx) for tag, rx in resolvers if tag not in drop]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }
    if not yaml11_bools:
        StrictLoader.add_implicit_resolver(
            "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF"))
    StrictLoader.add_implicit_resolver(
        "tag:yaml.org,2002:int", re.compile(r"^(?:[-+]?(?:0|[1-9][0-9_]*)|0x[0-9a-fA-F_]+|0o[0-7_]+)$"),
        list("-+0123456789"))
    StrictLoader.add_implicit_resolver(  # a dot or an exponent: 010 is neither an int nor a float
        "tag:yaml.org,2002:float",
        re.compile(r"^(?:[-+]?(?:\.[0-9]+|[0-9][0-9_]*\.[0-9_]*|[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+)"
                   r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"),
        list("-+0123456789."))
    return StrictLoader


class YamlProblem(Exception):
    """YAML text that :func:`strict_yaml` refuses: ``line`` (1-based; 0 when unknown) and ``problem``
    (one line, never the text itself)."""

    def __init__(self, line: int, problem: str) -> None:
        super().__init__(f"line {line}: {problem}" if line else problem)
        self.line, self.problem = line, problem


def strict_yaml(text: str, yaml11_bools: bool = False) -> Any:
    """The YAML document in ``text`` by :func:`_strict_yaml_loader`'s rules; every problem (syntax,
    an alias, a key given twice, a scalar Python refuses, deep nesting) is a :class:`YamlProblem`."""
    import yaml

    try:
        return yaml.load(text, Loader=_strict_yaml_loader(yaml11_bools))  # a SafeLoader
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        problem = " ".join(str(p) for p in (err.context, err.problem) if p)
        raise YamlProblem(mark.line + 1 if mark is not None else 1, " ".join(problem.split())) from None
    except yaml.YAMLError as err:
        raise YamlProblem(0, " ".join(str(err).split())[:200]) from None
    except RecursionError:
        raise YamlProblem(0, "nested too deeply") from None
    except ValueError as err:  # a scalar Python refuses: an int of over 4,300 digits, a date 2024-13-01
        raise YamlProblem(0, " ".join(str(err).split())[:120]) from None
