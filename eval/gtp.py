"""GTP v2 front end: ``gojax gtp``, a Go engine for Sabaki, Lizzie, GoGui and servers.

:class:`GTPServer` reads commands from any iterable of lines (``sys.stdin``,
``io.StringIO``) and writes replies to a text stream, following the GTP v2
specification: control characters other than tab and newline are dropped,
tabs become spaces, everything after ``#`` is a comment, empty lines are
ignored; a numeric id is echoed (``=7 ...``, ``?7 ...``); every reply ends
with a blank line. Any input line gets one well-formed reply; an
unexpected failure inside a command is answered ``? internal error: ...``.

The analysis commands (``lz-analyze``, ``kata-analyze``) answer ``=`` at once
and then stream one ``info ...`` line every interval from a background
thread until the next line arrives on the input, which ends the reply with
the blank line before that next command is read (KataGo's behaviour).
See ``docs/gtp.md`` for the command list and the output formats.

The pieces live in private modules, this one is the entry point that names them:
``eval._gtp_args`` (the input rules and the commands' argument parsers),
``eval._gtp_format`` (analysis and raw-network reply formats), ``eval._gtp_analysis``
(the analysis commands and the thread that streams their lines), ``eval._gtp_server``
(the session loop and the command table) and ``eval._gtp_cli`` (the ``gojax gtp``
command line and the engine it builds).
"""

from eval._gtp_analysis import GOGUI_ANALYZE_COMMANDS, POLICY_LABEL_MIN
from eval._gtp_args import AnalyzeOptions, GTPError, preprocess
from eval._gtp_cli import (
    add_policy_optimism_arguments,
    cmd_gtp,
    default_leaf_batch,
    make_engine,
    register,
)
from eval._gtp_format import _fmt as _fmt
from eval._gtp_format import _fmt_point as _fmt_point
from eval._gtp_format import format_analysis, format_raw_nn
from eval._gtp_server import NAME, RULE_FIELDS, GTPServer

__all__ = [
    "GOGUI_ANALYZE_COMMANDS",
    "NAME",
    "POLICY_LABEL_MIN",
    "RULE_FIELDS",
    "AnalyzeOptions",
    "GTPError",
    "GTPServer",
    "add_policy_optimism_arguments",
    "cmd_gtp",
    "default_leaf_batch",
    "format_analysis",
    "format_raw_nn",
    "make_engine",
    "preprocess",
    "register",
]
