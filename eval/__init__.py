"""Evaluation, the top layer (``gojax`` <- ``train`` <- ``eval``): engines, matches, reports.

* The command line: ``cli`` (the ``gojax`` command; no other module imports it) and
  ``arguments`` (the argument types its subcommands share).
* The GTP engine: ``gtp`` (the ``gojax gtp`` front end), ``engine`` (one game: position,
  history, clocks, scoring) with ``engine_replay``, ``players`` (the move choosers),
  ``gtp_params`` (KataGo's runtime parameters), ``trained_model`` (a ``gojax train``
  net as the engine's model).
* KataGo's analysis engine: ``analysis`` (``gojax analysis``, batched queries),
  ``analysis_query`` (query parsing), ``replay_cache`` (replayed games kept).
* KataGo's names and files: ``katago_config`` (its command line and ``.cfg`` files),
  ``katago_names`` (its names for the search settings).
* Games between players: ``gtp_client`` (a GTP program as a subprocess), ``match`` and
  ``recount`` (matches between GTP engines), ``arena``, ``agents`` and ``gating`` (games
  between JAX agents and GTP programs), ``ratings`` (Bradley-Terry), ``sweep`` (grids
  of checkpoints x search settings x opponents).
* Measurements and reports: ``value_mse`` (AlphaGo's evaluator comparison), ``report``,
  ``report_alphago`` and ``report_papers`` (the docs' tables and plots from ``results/``).

Modules named with a leading underscore hold the parts of one public module
(``_gtp_*`` of ``gtp``, ``_analysis_*`` of ``analysis``, ``_engine_*`` of ``engine``,
...), which re-exports what other code uses.
"""
